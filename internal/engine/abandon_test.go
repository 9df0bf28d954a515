package engine

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
)

// readCounter is the system clock, counting the engine's reads of the
// time: the flusher reads it at every pass.
type readCounter struct {
	clock.Clock
	reads atomic.Int64
}

func (c *readCounter) Now() time.Time {
	c.reads.Add(1)
	return c.Clock.Now()
}

// TestAbandonedRequestDoesNotPoll: a Sync, WaitSynced or Flush that gives
// up while the bytes it waits for are claimed but not yet committed (or a
// RequestSync for such bytes) leaves a request that the flusher cannot
// serve before the commit. The flusher must sleep until that commit. It
// used to look again at a short timer, pass after pass, for as long as the
// claim stayed open, burning a CPU for a caller that had gone (or, beside a
// waiter still waiting, for nothing: a commit kicks the flusher while
// anyone waits).
//
// The passes are counted over a window of real time, since a fake clock
// cannot show a flusher that spins on the system's timers. Once the claim
// commits, every request is honoured at once (FlushInterval is an hour),
// and a waiter that did not give up gets its sync.
func TestAbandonedRequestDoesNotPoll(t *testing.T) {
	const (
		window = 20 * time.Millisecond
		// Reads of the clock the flusher may make in the window: those of
		// the pass that follows the request's own, and no more.
		maxReads = 8
	)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ask  func(e *Engine, end uint64) error // the request left behind
		live bool                              // a WaitSynced for end that does not give up, beside it
		sync bool                              // the request is for a sync, not only a write
	}{
		{name: "sync", ask: func(e *Engine, _ uint64) error { return e.Sync(gone) }, sync: true},
		{name: "wait-synced", ask: func(e *Engine, end uint64) error { return e.WaitSynced(gone, end) }, sync: true},
		{name: "flush", ask: func(e *Engine, _ uint64) error { return e.Flush(gone) }},
		{name: "request-sync", ask: func(e *Engine, end uint64) error { e.RequestSync(end); return nil }, sync: true},
		{name: "sync-beside-a-waiter", ask: func(e *Engine, _ uint64) error { return e.Sync(gone) }, live: true, sync: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &readCounter{Clock: clock.Real()}
			e, err := New(Config{Size: MinSize, FlushInterval: time.Hour, Clock: clk}, &memSink{t: t})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			// A committed block, so the request's pass has something to
			// do (the block holding an open claim is written only once
			// it commits), then a claim left open.
			first := commitN(t, e, e.cfg.BlockSize)
			open, err := e.Claim(100, 1)
			if err != nil {
				t.Fatal(err)
			}
			committed := false
			commit := func() {
				e.Put(open, 0, make([]byte, 100))
				e.Commit(open)
				committed = true
			}
			defer func() {
				if !committed {
					commit() // Close waits for it
				}
			}()
			end := open.Pos + 100
			var live chan error
			if tc.live {
				live = make(chan error, 1)
				go func() { live <- e.WaitSynced(context.Background(), end) }()
				// Armed on progress, it has kicked the flusher.
				guard := time.Now().Add(_guard)
				for armedWaiters(e) == 0 {
					if time.Now().After(guard) {
						t.Fatal("the waiter never arrived")
					}
					runtime.Gosched()
				}
			}
			if err := tc.ask(e, end); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("request: %v", err)
			}
			// The pass the request kicked writes the committed record (and
			// syncs it, if asked to).
			waitUntil(t, e, "the committed record handled", func() bool {
				return e.Written() >= first.Pos+uint64(e.cfg.BlockSize) && (!tc.sync || e.Synced() >= first.Pos+uint64(e.cfg.BlockSize))
			})
			before := clk.reads.Load()
			time.Sleep(window) // a window to count passes in, not a wait for anything
			if reads := clk.reads.Load() - before; reads > maxReads {
				t.Errorf("the flusher read the clock %d times in %v with a claim open and nothing else to do: it polls", reads, window)
			}
			commit()
			waitUntil(t, e, "the request honoured after the commit", func() bool {
				return e.Written() >= end && (!tc.sync || e.Synced() >= end)
			})
			if tc.live {
				select {
				case err := <-live:
					if err != nil {
						t.Fatalf("WaitSynced: %v", err)
					}
				case <-time.After(_guard):
					t.Fatal("the waiter still waits after the sync")
				}
			}
		})
	}
}

// armedWaiters returns how many Waiters wait on e's progress.
func armedWaiters(e *Engine) int {
	e.progress.mu.Lock()
	defer e.progress.mu.Unlock()
	return len(e.progress.ws)
}
