package sys

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestTimer: a sleep never ends early, a zero or negative one returns at
// once, and a closed Timer says so.
func TestTimer(t *testing.T) {
	tm, err := NewTimer()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond, 50 * time.Microsecond} {
		start := time.Now()
		if err := tm.Sleep(d); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < d {
			t.Fatalf("Sleep(%v) returned after %v", d, got)
		}
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if err := tm.Sleep(d); err != nil {
			t.Fatalf("Sleep(%v): %v", d, err)
		}
	}
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tm.Sleep(time.Millisecond); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Sleep on a closed Timer: %v, want os.ErrClosed", err)
	}
}
