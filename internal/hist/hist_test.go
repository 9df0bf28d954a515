package hist

import (
	"testing"
	"time"
)

// TestHistogramSum: Record and Merge keep the sum of the durations, which
// Prometheus histograms carry; negative durations count as zero.
func TestHistogramSum(t *testing.T) {
	var h, o Histogram
	h.Record(3 * time.Microsecond)
	h.Record(-time.Second)
	o.Record(time.Millisecond)
	h.Merge(&o)
	if h.Sum != time.Millisecond+3*time.Microsecond || h.Count() != 3 {
		t.Errorf("sum %v, count %d", h.Sum, h.Count())
	}
	var a Atomic
	a.Record(5 * time.Second)
	a.Record(2 * time.Second)
	if s := a.Snapshot(); s.Sum != 7*time.Second || s.Count() != 2 || s.Buckets[BucketOf(5*time.Second)] != 1 {
		t.Errorf("snapshot sum %v, count %d", s.Sum, s.Count())
	}
}
