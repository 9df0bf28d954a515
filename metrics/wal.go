package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appendlog/appendlog/wal"
)

// LogCollector is a prometheus.Collector over a wal.Log's Stats. Each
// scrape takes one snapshot. It is safe for concurrent use.
type LogCollector struct {
	l                                                           *wal.Log
	appended, written, writes, syncs, next, durable, made, gone *prometheus.Desc
	syncLatency, synced, inline, skipped, failed                *prometheus.Desc
}

var _ prometheus.Collector = (*LogCollector)(nil)

// NewLogCollector returns a Collector for l's Stats, with constant labels
// (nil for none) that tell several logs apart.
func NewLogCollector(l *wal.Log, labels prometheus.Labels) *LogCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("appendlog_wal_"+name, help, nil, labels)
	}
	return &LogCollector{
		l:           l,
		appended:    d("appended_bytes_total", "Bytes appended since Open, frames included."),
		written:     d("written_bytes_total", "Bytes handed to the OS since Open, frames included."),
		writes:      d("writes_total", "Writes to segment files."),
		syncs:       d("syncs_total", "Completed fdatasyncs."),
		next:        d("next_seq", "Sequence number the next append gets."),
		durable:     d("durable_seq", "Highest sequence number known durable (0: none)."),
		made:        d("segments_created_total", "Segments created since Open."),
		gone:        d("segments_deleted_total", "Segments deleted by retention and TruncateFront since Open."),
		syncLatency: d("sync_duration_seconds", "Time each group commit's fdatasync took."),
		synced:      d("synced_records_total", "Records made durable by fdatasyncs; divided by the sync count, the mean group-commit size."),
		inline:      d("inline_syncs_total", "Completed fdatasyncs that ran on a lone waiting caller's goroutine rather than the flusher's (counted in syncs_total too)."),
		skipped:     d("retention_skipped_total", "Background retention passes that deleted nothing because a cursor was being created; growing while segments pile up means a process holds the cursors' floor lock."),
		failed:      d("failed", "1 once a write or sync failed the log (every later call returns the error), else 0."),
	}
}

// Describe sends the descriptors of the metrics.
func (c *LogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.appended, c.written, c.writes, c.syncs, c.next, c.durable, c.made, c.gone, c.syncLatency, c.synced, c.inline, c.skipped, c.failed} {
		ch <- d
	}
}

// Collect takes a Stats snapshot and sends the metrics.
func (c *LogCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
		ch <- prometheus.MustNewConstMetric(d, t, v)
	}
	m(c.appended, prometheus.CounterValue, float64(s.Appended))
	m(c.written, prometheus.CounterValue, float64(s.Written))
	m(c.writes, prometheus.CounterValue, float64(s.Writes))
	m(c.syncs, prometheus.CounterValue, float64(s.Syncs))
	m(c.next, prometheus.GaugeValue, float64(s.NextSeq))
	m(c.durable, prometheus.GaugeValue, float64(s.DurableSeq))
	m(c.made, prometheus.CounterValue, float64(s.SegmentsCreated))
	m(c.gone, prometheus.CounterValue, float64(s.SegmentsDeleted))
	m(c.synced, prometheus.CounterValue, float64(s.SyncedRecords))
	m(c.inline, prometheus.CounterValue, float64(s.InlineSyncs))
	m(c.skipped, prometheus.CounterValue, float64(s.RetentionSkipped))
	failed := 0.0
	if s.Failed {
		failed = 1
	}
	m(c.failed, prometheus.GaugeValue, failed)
	ch <- histogram(c.syncLatency, &s.SyncLatency)
}
