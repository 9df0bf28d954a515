package engine

import (
	"testing"
	"time"
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
			e, err := New(cfg, sink)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			// Written by the flush timer at 1ms, in a pass whose write
			// (or sync of BatchBytes) takes 3ms; the policy's sync, or
			// the tick, is due at 10ms.
			c := commitN(t, e, 100)
			advanceUntil(t, e, clk, "done by the timer", func() bool { return tc.done(e, sink, c.Pos+100) })
			if at := clk.Now().Sub(start); at != due {
				t.Fatalf("done at %v of fake time, due at %v", at, due)
			}
		})
	}
}
