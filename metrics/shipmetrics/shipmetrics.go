// Package shipmetrics exports a ship.Shipper's Stats as Prometheus
// metrics. It is apart from package metrics so that a program exporting
// its logs' metrics does not link the Kafka client.
//
//	s, _ := ship.NewKafkaFromDir(dir, nil, opts)
//	prometheus.MustRegister(shipmetrics.NewCollector(s, prometheus.Labels{"log": "app"}))
//
// The names are appendlog_ship_*: shipped_records_total and
// shipped_bytes_total (acknowledged by Kafka), skipped_records_total
// (found in Kafka at start), in_flight_records, committed_seq, lag_records,
// lag_bytes, oldest_in_flight_seconds, oldest_unshipped_seconds,
// connect_errors_total (the client's retries), produce_errors_total and
// last_ack_timestamp_seconds (0 before the first ack). See ship.Stats.
package shipmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appendlog/appendlog/ship"
)

// Collector is a prometheus.Collector over a ship.Shipper's Stats. Each
// scrape takes one snapshot. It is safe for concurrent use.
type Collector struct {
	s                                                   *ship.Shipper
	shipped, bytes, skipped, inFlight, committed, lag   *prometheus.Desc
	lagBytes, oldestInFlight, oldest, connErrs, prodErr *prometheus.Desc
	lastAck                                             *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector for s's Stats, with constant labels
// (nil for none) that tell several shippers apart.
func NewCollector(s *ship.Shipper, labels prometheus.Labels) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("appendlog_ship_"+name, help, nil, labels)
	}
	return &Collector{
		s:              s,
		shipped:        d("shipped_records_total", "Records Kafka acknowledged."),
		bytes:          d("shipped_bytes_total", "Payload bytes of the records Kafka acknowledged."),
		skipped:        d("skipped_records_total", "Records found in Kafka already at start and not sent again."),
		inFlight:       d("in_flight_records", "Records sent and not yet acknowledged."),
		committed:      d("committed_seq", "The cursor's committed position: every record below it is in Kafka."),
		lag:            d("lag_records", "Records of the source at or after the committed position."),
		lagBytes:       d("lag_bytes", "Payload bytes not yet acknowledged (estimated for records not read yet)."),
		oldestInFlight: d("oldest_in_flight_seconds", "How long the oldest record in flight has waited for its acknowledgement."),
		oldest:         d("oldest_unshipped_seconds", "How long the oldest record not yet acknowledged has waited to ship (a lower bound while records wait unread)."),
		connErrs:       d("connect_errors_total", "Failed broker connections, request writes and response reads: the client's retries."),
		prodErr:        d("produce_errors_total", "Records Kafka refused for good."),
		lastAck:        d("last_ack_timestamp_seconds", "When Kafka last acknowledged a record, Unix seconds (0: never)."),
	}
}

// Describe sends the descriptors of the metrics.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.shipped, c.bytes, c.skipped, c.inFlight, c.committed, c.lag, c.lagBytes,
		c.oldestInFlight, c.oldest, c.connErrs, c.prodErr, c.lastAck} {
		ch <- d
	}
}

// Collect takes a Stats snapshot and sends the metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s.Stats()
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
		ch <- prometheus.MustNewConstMetric(d, t, v)
	}
	m(c.shipped, prometheus.CounterValue, float64(s.Shipped))
	m(c.bytes, prometheus.CounterValue, float64(s.Bytes))
	m(c.skipped, prometheus.CounterValue, float64(s.Skipped))
	m(c.inFlight, prometheus.GaugeValue, float64(s.InFlight))
	m(c.committed, prometheus.GaugeValue, float64(s.Committed))
	m(c.lag, prometheus.GaugeValue, float64(s.LagRecords))
	m(c.lagBytes, prometheus.GaugeValue, float64(s.LagBytes))
	m(c.oldestInFlight, prometheus.GaugeValue, s.OldestInFlight.Seconds())
	m(c.oldest, prometheus.GaugeValue, s.OldestUnshipped.Seconds())
	m(c.connErrs, prometheus.CounterValue, float64(s.ConnectErrors))
	m(c.prodErr, prometheus.CounterValue, float64(s.ProduceErrors))
	last := 0.0
	if !s.LastAck.IsZero() {
		last = float64(s.LastAck.UnixNano()) / 1e9
	}
	m(c.lastAck, prometheus.GaugeValue, last)
}
