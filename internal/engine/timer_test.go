package engine

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
)

// slowSink is a timedSink whose Write and Sync take write and sync of the
// fake clock's time (they move the clock on), as a slow disk's would.
type slowSink struct {
	*timedSink
	write, sync time.Duration
}

func (s *slowSink) Write(pos uint64, a, b []byte) error {
	s.clk.Advance(s.write)
	return s.timedSink.Write(pos, a, b)
}

func (s *slowSink) Sync() error {
	s.clk.Advance(s.sync)
	return s.timedSink.Sync()
}

// TestTimersDoNotSlipByThePass: the timers of the sync policies and of a
// TimedSink fire when they are due, however long the pass that armed them
// took. The flusher measured how long to sleep from the time its pass
// began, then armed the timer for that long from the end of the pass: it
// fired late by the pass's Write (or Sync) time.
func TestTimersDoNotSlipByThePass(t *testing.T) {
	const (
		due  = 10 * time.Millisecond
		slow = 3 * time.Millisecond
	)
	for _, tc := range []struct {
		name string
		cfg  Config
		tick bool // the TimedSink asks for TimedTick at due
		sync bool // the pass's Sync is slow, not its Write
		done func(e *Engine, s *slowSink, end uint64) bool
	}{
		{
			name: "sync-interval",
			cfg:  Config{Sync: SyncInterval, SyncEvery: due},
			done: func(e *Engine, _ *slowSink, end uint64) bool { return e.Synced() >= end },
		},
		{
			name: "sync-batch-age",
			cfg:  Config{Sync: SyncBatch, BatchBytes: 1 << 20, BatchAge: due},
			done: func(e *Engine, _ *slowSink, end uint64) bool { return e.Synced() >= end },
		},
		{
			name: "timed-tick",
			tick: true,
			done: func(_ *Engine, s *slowSink, _ uint64) bool { return s.calls.Load() == 1 },
		},
		{
			name: "timed-tick-after-a-sync",
			cfg:  Config{Sync: SyncBatch, BatchBytes: 1, BatchAge: time.Hour},
			tick: true,
			sync: true,
			done: func(_ *Engine, s *slowSink, _ uint64) bool { return s.calls.Load() == 1 },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFake()
			start := clk.Now()
			sink := &slowSink{timedSink: &timedSink{memSink: &memSink{t: t}, clk: clk}}
			if tc.sync {
				sink.sync = slow
			} else {
				sink.write = slow
			}
			if tc.tick {
				sink.due.Store(start.Add(due).UnixNano())
			}
			cfg := tc.cfg
			cfg.Size, cfg.FlushInterval, cfg.Clock = MinSize, time.Millisecond, clk
			var q parkWatch
			cfg.onPark = q.hook
			e, err := New(cfg, sink)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			// Written by the flush timer at 1ms, in a pass whose write
			// (or sync of BatchBytes) takes 3ms; the policy's sync, or
			// the tick, is due at 10ms.
			c := commitN(t, e, 100)
			q.advanceUntil(t, clk, "done by the timer", func() bool { return tc.done(e, sink, c.Pos+100) })
			if at := clk.Now().Sub(start); at != due {
				t.Fatalf("done at %v of fake time, due at %v", at, due)
			}
		})
	}
}

// parkWatch follows whether a flusher is parked, and counts its wake-ups
// (Config.onPark).
type parkWatch struct {
	parked atomic.Bool
	wakes  atomic.Uint64
}

func (q *parkWatch) hook(parked bool) {
	q.parked.Store(parked)
	if !parked {
		q.wakes.Add(1) // after parked: a wake counted is one parked=true no longer stands for
	}
}

// advanceUntil is the package's advanceUntil for a sink that moves the
// clock itself (slowSink). It moves the clock to the next timer only once
// the flusher has handled every wake-up the test caused (the commit's
// kick, then each timer it fired) and parked again; moved during a pass,
// the clock would run on by the pass's own time as well, and the pass would
// see a later time than its timer's. Nothing else wakes this flusher: the
// test commits once, and its sink syncs in the pass.
func (q *parkWatch) advanceUntil(t *testing.T, clk *clock.Fake, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(_guard)
	want := uint64(1) // the commit's kick
	for {
		for !(q.wakes.Load() >= want && q.parked.Load()) {
			if time.Now().After(deadline) {
				t.Fatalf("not after %v of real time (fake time %v): %s: the flusher did not park after wake-up %d", _guard, clk.Now(), what, want)
			}
			time.Sleep(20 * time.Microsecond)
		}
		if cond() {
			return
		}
		at, ok := clk.Next()
		if !ok {
			t.Fatalf("no timer armed at fake time %v: %s", clk.Now(), what)
		}
		want = q.wakes.Load() + 1
		clk.Advance(at.Sub(clk.Now()))
	}
}
