package engine

import (
	"context"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
)

// TestCommitWakesFlusherOnALongTimer: a flusher with nothing left to write
// that sleeps on a timer of its sync policy or of a TimedSink, later than
// FlushInterval, still writes the next commit within FlushInterval. It
// used to sleep on as it does on its flush timer, the commit did not wake
// it, and the bytes waited in the ring until that timer: SyncEvery,
// BatchAge, or a TimedSink's TickIn (a wal with Retention.MaxAge asks for
// its seal hours ahead), unless the ring filled or someone flushed.
func TestCommitWakesFlusherOnALongTimer(t *testing.T) {
	const flushEvery = 10 * time.Millisecond
	for _, tc := range []struct {
		name string
		cfg  Config
		tick time.Duration // TickIn's answer, 0 for a plain Sink
		sync bool          // Sync the first record: the policy's timer is left with nothing to do
	}{
		{"sync-interval", Config{Sync: SyncInterval, SyncEvery: 40 * time.Millisecond}, 0, false},
		{"sync-interval-after-sync", Config{Sync: SyncInterval, SyncEvery: 40 * time.Millisecond}, 0, true},
		{"sync-batch", Config{Sync: SyncBatch, BatchBytes: 1 << 20, BatchAge: 40 * time.Millisecond}, 0, false},
		{"timed-sink", Config{}, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFake()
			cfg := tc.cfg
			cfg.Size, cfg.FlushInterval, cfg.Clock = MinSize, flushEvery, clk
			var sink Sink = &memSink{t: t}
			if tc.tick > 0 {
				ts := &timedSink{memSink: &memSink{t: t}, clk: clk}
				ts.due.Store(clk.Now().Add(tc.tick).UnixNano())
				sink = ts
			}
			e, err := New(cfg, sink)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			a := commitN(t, e, 100)
			// Not before the flusher took the commit: advanceUntil would
			// move the clock to a TimedSink's long timer, the only one
			// armed until then.
			start := clk.Now()
			waitTimer(t, clk, "the first commit makes the flusher arm its flush timer", func(at time.Time) bool {
				return !at.After(start.Add(flushEvery))
			})
			advanceUntil(t, e, clk, "the first record written by the flush timer", func() bool {
				return e.Written() >= a.Pos+100
			})
			if tc.sync {
				if err := e.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			// The flusher now sleeps on its long timer alone.
			waitTimer(t, clk, "the flusher sleeps on its long timer", func(at time.Time) bool { return at.Sub(clk.Now()) > flushEvery })
			b := commitN(t, e, 100)
			committed := clk.Now()
			waitTimer(t, clk, "the commit makes the flusher arm its flush timer", func(at time.Time) bool {
				return !at.After(committed.Add(flushEvery))
			})
			advanceUntil(t, e, clk, "the second record written", func() bool { return e.Written() >= b.Pos+100 })
			if waited := clk.Now().Sub(committed); waited > flushEvery {
				t.Fatalf("a commit waited %v to be written, FlushInterval is %v", waited, flushEvery)
			}
		})
	}
}

// waitTimer waits until the earliest timer armed on clk satisfies ok.
func waitTimer(t *testing.T, clk *clock.Fake, what string, ok func(at time.Time) bool) {
	t.Helper()
	guard := time.NewTimer(time.Second)
	defer guard.Stop()
	for {
		changed := clk.Changed()
		at, armed := clk.Next()
		if armed && ok(at) {
			return
		}
		select {
		case <-changed:
		case <-guard.C:
			t.Fatalf("not after 1s: %s (at %v the earliest timer is at %v, armed %v)", what, clk.Now(), at, armed)
		}
	}
}
