package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/appendlog/appendlog/writer"
)

// StatsSource is what NewRingCollector reads: every writer of package
// writer (a *writer.Ring, Slab, Buffered, Direct, Mmap) is one.
type StatsSource interface {
	Stats() writer.Stats
}

// RingCollector is a prometheus.Collector over a writer's Stats. Each
// scrape takes one snapshot. It is safe for concurrent use.
type RingCollector struct {
	src   StatsSource
	err   func() error // nil if the writer has no Err method
	descs writerDescs
}

var _ prometheus.Collector = (*RingCollector)(nil)

type writerDescs struct {
	records, bytes, writtenRecords, writtenBytes, droppedRecords, droppedBytes,
	markers, queued, flushes, flushLatency, syncs, blockedWaits, blocked,
	retries, rotations, rotationErrors, reopens, failed *prometheus.Desc
}

// NewRingCollector returns a Collector for w's Stats, with constant labels
// (nil for none) that tell several writers apart. If w has an Err method,
// as a Ring does, the failed gauge reports it.
func NewRingCollector(w StatsSource, labels prometheus.Labels) *RingCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("appendlog_writer_"+name, help, nil, labels)
	}
	c := &RingCollector{src: w, descs: writerDescs{
		records:        d("records_total", "Records accepted by Write (written or dropped)."),
		bytes:          d("bytes_total", "Bytes of the records accepted by Write."),
		writtenRecords: d("written_records_total", "Records handed to the sink (the OS, for files)."),
		writtenBytes:   d("written_bytes_total", "Record bytes handed to the sink."),
		droppedRecords: d("dropped_records_total", "Records dropped because the buffer was full."),
		droppedBytes:   d("dropped_bytes_total", "Bytes of the records dropped."),
		markers:        d("markers_total", "Drop-marker lines written into the stream."),
		queued:         d("queued_bytes", "Bytes accepted but not yet handed to the sink."),
		flushes:        d("flushes_total", "Writes to the sink, one per batch of records."),
		flushLatency:   d("flush_duration_seconds", "Duration of the writes to the sink."),
		syncs:          d("syncs_total", "Completed syncs (fdatasync for files)."),
		blockedWaits:   d("blocked_waits_total", "Writes that waited for buffer space."),
		blocked:        d("blocked_seconds_total", "Total time writes waited for buffer space."),
		retries:        d("retries_total", "Failed sink writes that were retried."),
		rotations:      d("rotations_total", "Files rotated away from (Rotate)."),
		rotationErrors: d("rotation_errors_total", "Errors met syncing, compressing or pruning rotated files."),
		reopens:        d("reopens_total", "Files switched to by Reopen."),
		failed:         d("failed", "1 once the writer has failed with a sticky error, else 0."),
	}}
	if e, ok := w.(interface{ Err() error }); ok {
		c.err = e.Err
	}
	return c
}

// Describe sends the descriptors of the metrics.
func (c *RingCollector) Describe(ch chan<- *prometheus.Desc) {
	d := &c.descs
	for _, x := range []*prometheus.Desc{d.records, d.bytes, d.writtenRecords, d.writtenBytes,
		d.droppedRecords, d.droppedBytes, d.markers, d.queued, d.flushes, d.flushLatency, d.syncs,
		d.blockedWaits, d.blocked, d.retries, d.rotations, d.rotationErrors, d.reopens} {
		ch <- x
	}
	if c.err != nil {
		ch <- d.failed
	}
}

// Collect takes a Stats snapshot and sends the metrics.
func (c *RingCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	d := &c.descs
	counter := func(desc *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v))
	}
	counter(d.records, s.Records)
	counter(d.bytes, s.Bytes)
	counter(d.writtenRecords, s.WrittenRecords)
	counter(d.writtenBytes, s.WrittenBytes)
	counter(d.droppedRecords, s.DroppedRecords)
	counter(d.droppedBytes, s.DroppedBytes)
	counter(d.markers, s.Markers)
	ch <- prometheus.MustNewConstMetric(d.queued, prometheus.GaugeValue, float64(s.QueuedBytes))
	counter(d.flushes, s.Flushes)
	ch <- histogram(d.flushLatency, &s.FlushLatency)
	counter(d.syncs, s.Syncs)
	counter(d.blockedWaits, s.BlockedWaits)
	ch <- prometheus.MustNewConstMetric(d.blocked, prometheus.CounterValue, s.Blocked.Seconds())
	counter(d.retries, s.Retries)
	counter(d.rotations, s.Rotations)
	counter(d.rotationErrors, s.RotationErrors)
	counter(d.reopens, s.Reopens)
	if c.err != nil {
		failed := 0.0
		if c.err() != nil {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(d.failed, prometheus.GaugeValue, failed)
	}
}

// histogram converts h to a Prometheus histogram in seconds. Bucket i of
// h (durations below 2^i ns, bucket 0 those of 0 ns) becomes the bound
// 2^i ns (0 for bucket 0); h's last bucket, which also holds every longer
// duration, is left to +Inf.
func histogram(desc *prometheus.Desc, h *writer.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, writer.HistogramBuckets-1)
	var cum uint64
	for i := range writer.HistogramBuckets - 1 {
		cum += h.Buckets[i]
		bound := 0.0
		if i > 0 {
			bound = (time.Duration(1) << i).Seconds()
		}
		buckets[bound] = cum
	}
	return prometheus.MustNewConstHistogram(desc, h.Count(), h.Sum.Seconds(), buckets)
}
