package engine

import (
	"testing"
	"time"
)

// TestPacerQuietRateNeverWrapsToMinPace: while bytes wait but none are
// claimed (a claim held open), each pass halves the measured rate, and the
// time until the next FlushBytes only grows. chunk/rate outgrows an int64
// of nanoseconds long before the rate reaches zero; converted as it was,
// it came out negative and the pacer asked for a pass every minPace.
func TestPacerQuietRateNeverWrapsToMinPace(t *testing.T) {
	var p pacer
	const chunk = 2 << 20
	now := time.Unix(0, 0)
	p.next(0, now, chunk)
	now = now.Add(time.Millisecond)
	prev := p.next(1<<20, now, chunk) // a claim rate of 1 MiB/ms
	for i := range 2000 {
		now = now.Add(DefaultFlushInterval)
		d := p.next(1<<20, now, chunk) // nothing claimed since
		if d < prev {
			t.Fatalf("pass %d: next FlushBytes in %v after %v with nothing claimed since", i, d, prev)
		}
		prev = d
	}
}
