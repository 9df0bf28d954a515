package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appendlog/appendlog/stream"
)

// StoreCollector is a prometheus.Collector over a stream.Store: each
// stream's Stats, labelled stream, and each open group's, labelled stream
// and group. A scrape reads every stream's Stats (it does not open an
// idle one) and lists its segment files. It is safe for concurrent use.
type StoreCollector struct {
	st                                                *stream.Store
	first, next, durable, published, pubBytes, disk   *prometheus.Desc
	open, groups                                      *prometheus.Desc
	committed, delivered, redelivered, acked, nacked  *prometheus.Desc
	dead, skipped, pending, lag, lagBytes, oldestWait *prometheus.Desc
}

var _ prometheus.Collector = (*StoreCollector)(nil)

// NewStoreCollector returns a Collector for st's streams and their open
// groups, with constant labels (nil for none) that tell several stores
// apart.
func NewStoreCollector(st *stream.Store, labels prometheus.Labels) *StoreCollector {
	sd := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("appendlog_stream_"+name, help, []string{"stream"}, labels)
	}
	gd := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("appendlog_stream_group_"+name, help, []string{"stream", "group"}, labels)
	}
	return &StoreCollector{
		st:          st,
		first:       sd("first_seq", "First record the stream holds."),
		next:        sd("next_seq", "Sequence number the next Publish gets."),
		durable:     sd("durable_seq", "Last durable record (0: none)."),
		published:   sd("published_records_total", "Records published since the store opened."),
		pubBytes:    sd("published_bytes_total", "Bytes published since the store opened, frames included."),
		disk:        sd("disk_bytes", "Size of the stream's segment files."),
		open:        sd("open", "1 while the stream's log is open, 0 while it is idle."),
		groups:      sd("groups", "Groups open on the stream."),
		committed:   gd("committed_seq", "Lowest record the group has not acked."),
		delivered:   gd("delivered_total", "Records delivered the first time."),
		redelivered: gd("redelivered_total", "Records delivered again (Nack, AckWait)."),
		acked:       gd("acked_total", "Records acked."),
		nacked:      gd("nacked_total", "Nack calls."),
		dead:        gd("dead_total", "Records that reached MaxDeliver."),
		skipped:     gd("skipped_total", "Records retention deleted before the group got them."),
		pending:     gd("pending", "Records delivered and not yet acked."),
		lag:         gd("lag_records", "Records published and not yet delivered."),
		lagBytes:    gd("lag_bytes", "Size of the records not yet delivered, estimated from the stream's mean record size."),
		oldestWait:  gd("oldest_unacked_seconds", "How long the oldest delivered, unacked record has waited, counted from the group's first deadline check after its delivery."),
	}
}

// Describe sends the descriptors of the metrics.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.first, c.next, c.durable, c.published, c.pubBytes, c.disk, c.open, c.groups,
		c.committed, c.delivered, c.redelivered, c.acked, c.nacked, c.dead, c.skipped, c.pending, c.lag, c.lagBytes, c.oldestWait} {
		ch <- d
	}
}

// Collect reads each stream's Stats and its groups' and sends the metrics.
// A stream deleted while it runs is left out.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.st.List() {
		s, err := c.st.Stream(name)
		if err != nil {
			continue
		}
		st := s.Stats()
		m := func(d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
			ch <- prometheus.MustNewConstMetric(d, t, v, lv...)
		}
		open := 0.0
		if st.Open {
			open = 1
		}
		m(c.first, prometheus.GaugeValue, float64(st.FirstSeq), name)
		m(c.next, prometheus.GaugeValue, float64(st.NextSeq), name)
		m(c.durable, prometheus.GaugeValue, float64(st.DurableSeq), name)
		m(c.published, prometheus.CounterValue, float64(st.Published), name)
		m(c.pubBytes, prometheus.CounterValue, float64(st.PublishedBytes), name)
		m(c.disk, prometheus.GaugeValue, float64(st.DiskBytes), name)
		m(c.open, prometheus.GaugeValue, open, name)
		m(c.groups, prometheus.GaugeValue, float64(st.Groups), name)
		for g, gs := range s.GroupStats() {
			m(c.committed, prometheus.GaugeValue, float64(gs.Committed), name, g)
			m(c.delivered, prometheus.CounterValue, float64(gs.Delivered), name, g)
			m(c.redelivered, prometheus.CounterValue, float64(gs.Redelivered), name, g)
			m(c.acked, prometheus.CounterValue, float64(gs.Acked), name, g)
			m(c.nacked, prometheus.CounterValue, float64(gs.Nacked), name, g)
			m(c.dead, prometheus.CounterValue, float64(gs.Dead), name, g)
			m(c.skipped, prometheus.CounterValue, float64(gs.Skipped), name, g)
			m(c.pending, prometheus.GaugeValue, float64(gs.Pending), name, g)
			m(c.lag, prometheus.GaugeValue, float64(gs.LagRecords), name, g)
			m(c.lagBytes, prometheus.GaugeValue, float64(gs.LagBytes), name, g)
			m(c.oldestWait, prometheus.GaugeValue, gs.OldestUnacked.Seconds(), name, g)
		}
	}
}
