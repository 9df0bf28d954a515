// Package hist holds the latency histogram that the writer and wal
// packages export in their Stats (as writer.Histogram and wal.Histogram,
// aliases of this type) and that package metrics turns into Prometheus
// histograms.
package hist

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Buckets is the number of buckets of a Histogram.
const Buckets = 40

// Histogram counts durations in power-of-two buckets: Buckets[0] counts
// durations of at most 0 ns and Buckets[i], for i >= 1, those of
// [2^(i-1), 2^i) ns. The last bucket also holds every longer duration
// (2^38 ns is about 4.6 minutes). Sum is the total of the durations
// recorded (Prometheus histograms carry it). The zero value is an empty
// histogram; it is not safe for concurrent use (writers keep an atomic one
// and return copies).
type Histogram struct {
	Buckets [Buckets]uint64
	Sum     time.Duration
}

// BucketOf returns the index of the bucket that counts d.
func BucketOf(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(d)), Buckets-1)
}

// Record adds d to the histogram.
func (h *Histogram) Record(d time.Duration) {
	h.Buckets[BucketOf(d)]++
	h.Sum += max(d, 0)
}

// Merge adds the counts of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o.Buckets {
		h.Buckets[i] += n
	}
	h.Sum += o.Sum
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	return n
}

// Quantile returns an upper bound of the q-quantile (0 <= q <= 1): the
// upper edge of the bucket that holds it, so the true value lies within a
// factor of two below. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	total := h.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	if rank >= total {
		rank = total - 1
	}
	var seen uint64
	for i, c := range h.Buckets {
		seen += c
		if seen > rank {
			if i == 0 {
				return 0
			}
			return time.Duration(1) << i
		}
	}
	return time.Duration(1) << (Buckets - 1)
}

// Atomic is a Histogram that goroutines record into while others take
// snapshots. The zero value is empty and ready to use.
type Atomic struct {
	b   [Buckets]atomic.Uint64
	sum atomic.Int64 // nanoseconds
}

// Record adds d.
func (h *Atomic) Record(d time.Duration) {
	h.b[BucketOf(d)].Add(1)
	h.sum.Add(int64(max(d, 0)))
}

// Snapshot returns the histogram. Taken while durations are recorded, Sum
// may include a duration the buckets do not yet count, or the reverse.
func (h *Atomic) Snapshot() Histogram {
	var s Histogram
	for i := range h.b {
		s.Buckets[i] = h.b[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}
