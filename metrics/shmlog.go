package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/appendlog/appendlog/shmlog"
)

// ShmCollector is a prometheus.Collector over a shmlog.Log's Stats. Each
// scrape takes one snapshot; after the Log's Close it sends nothing. Like
// the Log's other methods, a scrape must not run concurrently with the
// Log's Close: unregister the collector first.
type ShmCollector struct {
	l                                        *shmlog.Log
	claims, file, fileBytes, capacity, holes *prometheus.Desc
}

var _ prometheus.Collector = (*ShmCollector)(nil)

// NewShmCollector returns a Collector for l's Stats, with constant labels
// (nil for none) that tell several logs or processes apart.
func NewShmCollector(l *shmlog.Log, labels prometheus.Labels) *ShmCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("appendlog_shmlog_"+name, help, nil, labels)
	}
	return &ShmCollector{
		l:         l,
		claims:    d("claims_total", "Claims this process entered (one per record, and one per file it found full)."),
		file:      d("active_file", "Index of the file appends go to."),
		fileBytes: d("active_file_bytes", "Bytes claimed in the active file, by every process."),
		capacity:  d("file_capacity_bytes", "Bytes a file holds."),
		holes:     d("padded_frames_total", "Frames padded over because their writer died before committing them."),
	}
}

// Describe sends the descriptors of the metrics.
func (c *ShmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.claims, c.file, c.fileBytes, c.capacity, c.holes} {
		ch <- d
	}
}

// Collect takes a Stats snapshot and sends the metrics. It sends none once
// the Log is closed: its Stats are then all zero, and claims_total would
// go back to 0.
func (c *ShmCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	if s.Capacity == 0 {
		return // closed: an open Log's files always hold some bytes
	}
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
		ch <- prometheus.MustNewConstMetric(d, t, v)
	}
	m(c.claims, prometheus.CounterValue, float64(s.Claims))
	m(c.file, prometheus.GaugeValue, float64(s.ActiveFile))
	m(c.fileBytes, prometheus.GaugeValue, float64(s.ActiveBytes))
	m(c.capacity, prometheus.GaugeValue, float64(s.Capacity))
	m(c.holes, prometheus.CounterValue, float64(s.Padded))
}
