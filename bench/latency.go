package bench

import (
	"math/bits"
	"time"
)

// Latency histogram shape: values below 8 ns get a bucket each; above,
// every power of two is split into 8 buckets (≤ 12.5% relative error), up
// to 2^40 ns (18 minutes); longer values land in the last bucket.
const (
	_subBits    = 3
	_sub        = 1 << _subBits
	_maxExp     = 40
	_histBucket = _sub + (_maxExp-_subBits)*_sub
)

// histogram counts latencies. The zero value is empty. Not safe for
// concurrent use: each writer goroutine has its own, merged afterwards.
type histogram struct {
	counts [_histBucket]uint64
	n      uint64
}

func bucketOf(ns int64) int {
	if ns < _sub {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 1 // ns in [2^e, 2^(e+1)), e >= _subBits
	if e >= _maxExp {
		return _histBucket - 1
	}
	sub := int(ns>>(e-_subBits)) & (_sub - 1)
	return _sub + (e-_subBits)*_sub + sub
}

// bucketHigh returns the largest value bucket i holds.
func bucketHigh(i int) int64 {
	if i < _sub {
		return int64(i)
	}
	e := (i-_sub)/_sub + _subBits
	sub := int64((i - _sub) % _sub)
	low := (_sub + sub) << (e - _subBits)
	return low + 1<<(e-_subBits) - 1
}

func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(int64(d))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the upper edge of the bucket holding quantile q, or 0 for
// an empty histogram.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n-1)) + 1 // 1-based rank of the sample
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return bucketHigh(i)
		}
	}
	return bucketHigh(_histBucket - 1)
}
