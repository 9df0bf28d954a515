package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkSink is a PipelinedSink (or, with plain, a Sink) that fails the test
// when the engine breaks a promise SyncInline must keep too: no two calls
// at once, no two syncs in flight, no call after Close returned. A sync may
// be held (hold) until the test releases it.
type checkSink struct {
	memSink
	busy     atomic.Bool  // a Write, Sync or PrepareSync is under way
	inflight atomic.Int32 // pipelined syncs under way
	overlap  atomic.Int32 // writes while a sync was under way
	closed   atomic.Bool  // Close returned
	// hold (capacity 1, made before the engine) gives the next sync a
	// channel to wait on until the test closes it.
	hold chan chan struct{}
}

func (s *checkSink) enter(call string) func() {
	if s.closed.Load() {
		s.t.Errorf("sink: %s after Close returned", call)
	}
	if !s.busy.CompareAndSwap(false, true) {
		s.t.Errorf("sink: %s while another call was under way", call)
		return func() {}
	}
	return func() { s.busy.Store(false) }
}

func (s *checkSink) Write(pos uint64, a, b []byte) error {
	defer s.enter("Write")()
	if s.inflight.Load() != 0 {
		s.overlap.Add(1)
	}
	return s.memSink.Write(pos, a, b)
}

func (s *checkSink) Sync() error {
	defer s.enter("Sync")()
	s.waitHold()
	return s.memSink.Sync()
}

// prepareSync is pipeCheck's PrepareSync. Not a method of that name: a
// checkSink must stay a plain Sink.
func (s *checkSink) prepareSync() func() error {
	defer s.enter("PrepareSync")()
	return s.pipelinedSync(&s.inflight, s.waitHold)
}

// waitHold waits, if the test put a channel in hold, until it is closed.
func (s *checkSink) waitHold() {
	select {
	case release := <-s.hold:
		<-release
	default:
	}
}

// pipeCheck is a checkSink that is a PipelinedSink.
type pipeCheck struct{ *checkSink }

func (s pipeCheck) PrepareSync() func() error { return s.checkSink.prepareSync() }

var (
	_ PipelinedSink = pipeCheck{}
	_ Sink          = (*checkSink)(nil)
)

func (s *checkSink) syncedEnd() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.syncedAt) == 0 {
		return 0
	}
	return s.syncedAt[len(s.syncedAt)-1]
}

func newCheck(t *testing.T, pipelined bool, cfg Config) (*Engine, *checkSink) {
	t.Helper()
	s := &checkSink{memSink: memSink{t: t}, hold: make(chan chan struct{}, 1)}
	var sink Sink = s
	if pipelined {
		sink = pipeCheck{s}
	}
	e, err := New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	return e, s
}

// TestSyncInlineLoneWaiter: one goroutine appending and waiting for each
// record to be synced runs the syncs itself (Stats.InlineSyncs), one per
// wait, each covering its record.
func TestSyncInlineLoneWaiter(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		e, s := newCheck(t, pipelined, Config{Size: MinSize, Sync: SyncNever})
		const n = 200
		for range n {
			c := commitN(t, e, 100)
			if err := e.WaitSynced(context.Background(), c.Pos+100); err != nil {
				t.Fatal(err)
			}
			if got := s.syncedEnd(); got < c.Pos+100 {
				t.Fatalf("pipelined=%v: WaitSynced(%d) returned after a sync covering %d", pipelined, c.Pos+100, got)
			}
		}
		st := e.Stats()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		s.closed.Store(true)
		// A wait the flusher served instead (it held the sink lock for a
		// moment, woken by the commit) is still one sync; SyncNever
		// starts none of its own.
		if st.Syncs != n {
			t.Errorf("pipelined=%v: %d syncs for %d lone waits, want one each", pipelined, st.Syncs, n)
		}
		if st.InlineSyncs < n/2 {
			t.Errorf("pipelined=%v: %d of %d syncs ran on the waiter's goroutine", pipelined, st.InlineSyncs, n)
		}
	}
}

// TestSyncInlineFailureIsSticky: a sync that fails on the waiter's goroutine
// fails the engine as one on the flusher does: the waiter gets the error,
// the sync is never retried, and every later call returns it.
func TestSyncInlineFailureIsSticky(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		e, s := newCheck(t, pipelined, Config{Size: MinSize, Sync: SyncNever})
		c := commitN(t, e, 10)
		if err := e.WaitSynced(context.Background(), c.Pos+10); err != nil {
			t.Fatal(err)
		}
		eio := errors.New("EIO")
		s.mu.Lock()
		s.syncErr = eio
		s.mu.Unlock()
		c = commitN(t, e, 10)
		if err := e.WaitSynced(context.Background(), c.Pos+10); !errors.Is(err, eio) {
			t.Fatalf("pipelined=%v: WaitSynced after a failed sync: %v, want EIO", pipelined, err)
		}
		if st := e.Stats(); st.InlineSyncs != 1 {
			t.Errorf("pipelined=%v: %d inline syncs counted, want the first only", pipelined, st.InlineSyncs)
		}
		if err := e.Sync(context.Background()); !errors.Is(err, eio) {
			t.Fatalf("pipelined=%v: Sync after the failure: %v", pipelined, err)
		}
		if _, err := e.Claim(10, 1); !errors.Is(err, eio) {
			t.Fatalf("pipelined=%v: Claim after the failure: %v", pipelined, err)
		}
		if err := e.Close(); !errors.Is(err, eio) {
			t.Fatalf("pipelined=%v: Close hid the failure: %v", pipelined, err)
		}
		s.closed.Store(true)
		s.mu.Lock()
		if s.syncs != 2 {
			t.Errorf("pipelined=%v: %d sync calls, want 2 (the failed one never retried)", pipelined, s.syncs)
		}
		s.mu.Unlock()
	}
}

// TestSyncInlineStepsAside: while a lone waiter's sync runs on its own
// goroutine, the flusher goes on writing (the sync is pipelined), a second
// waiter is not served inline (one sync in flight at a time) but by the
// flusher's sync right after, which the first sync's end brings round.
// The first wait finds the flusher parked nearly always; when the flusher
// held the sink lock at that moment and ran the first sync itself, the
// round is run again.
func TestSyncInlineStepsAside(t *testing.T) {
	for range 20 {
		if stepsAside(t) {
			return
		}
	}
	t.Fatal("in 20 rounds the first wait never ran its sync itself")
}

// stepsAside runs one round of TestSyncInlineStepsAside and reports
// whether the first sync ran on the waiter's goroutine.
func stepsAside(t *testing.T) (inline bool) {
	e, s := newCheck(t, true, Config{Size: MinSize, Sync: SyncNever})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	s.hold <- release
	defer func() {
		free() // a failed round must not leave Close waiting for the sync
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		s.closed.Store(true)
	}()

	c1 := commitN(t, e, 100)
	first := make(chan error, 1)
	go func() { first <- e.WaitSynced(context.Background(), c1.Pos+100) }()
	for deadline := time.Now().Add(_guard); s.inflight.Load() != 1; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: the first sync under way", _guard)
		}
	}

	c2 := commitN(t, e, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Flush(ctx); err != nil {
		t.Fatalf("Flush while a sync is held: %v (the flusher waited for it)", err)
	}
	if s.overlap.Load() == 0 {
		t.Fatal("no write while the sync was held")
	}
	second := make(chan error, 1)
	go func() { second <- e.WaitSynced(context.Background(), c2.Pos+100) }()
	select {
	case err := <-second:
		t.Fatalf("the second wait returned (%v) while the only sync covering its record was not started", err)
	case <-time.After(20 * time.Millisecond):
	}
	free()
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := s.syncedEnd(); got < c2.Pos+100 {
		t.Fatalf("the second wait returned after a sync covering %d of %d", got, c2.Pos+100)
	}
	st := e.Stats()
	if st.Syncs != 2 || st.InlineSyncs > 1 {
		t.Fatalf("%d syncs, %d inline; want 2, at most the first inline", st.Syncs, st.InlineSyncs)
	}
	return st.InlineSyncs == 1
}

// TestSyncInlineRacingClose: goroutines that append and wait for syncs,
// some alone and some not, while Close runs: every wait that returned nil
// was covered by a sync, Close leaves everything written and synced, and
// the sink gets no call after Close returns and never two at once.
func TestSyncInlineRacingClose(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		for _, g := range []int{1, 4} {
			e, s := newCheck(t, pipelined, Config{Size: MinSize, Sync: SyncNever})
			var wg sync.WaitGroup
			for id := range g {
				wg.Go(func() {
					buf := make([]byte, 64)
					for i := uint32(0); ; i++ {
						c, err := putRecord(e, id, len(buf), i, buf)
						if err != nil {
							return // closed
						}
						if err := e.WaitSynced(context.Background(), c.Pos+64); err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Error(err)
							}
							return
						}
						if got := s.syncedEnd(); got < c.Pos+64 {
							t.Errorf("WaitSynced(%d) returned after a sync covering %d", c.Pos+64, got)
							return
						}
					}
				})
			}
			time.Sleep(20 * time.Millisecond)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			s.closed.Store(true)
			wg.Wait()
			data := s.bytes()
			if got := s.syncedEnd(); got != uint64(len(data)) {
				t.Fatalf("pipelined=%v g=%d: Close left %d of %d bytes unsynced", pipelined, g, uint64(len(data))-got, len(data))
			}
			if st := e.Stats(); g == 1 && st.InlineSyncs == 0 {
				t.Errorf("pipelined=%v g=%d: no sync ran inline in %d", pipelined, g, st.Syncs)
			}
		}
	}
}

// TestSyncInlineCancellableContext: a wait whose context can be cancelled
// (done already or not) runs no sync on its goroutine: a sink stuck in a
// write or sync must not keep it from returning when ctx is done.
func TestSyncInlineCancellableContext(t *testing.T) {
	e, s := newCheck(t, true, Config{Size: MinSize, Sync: SyncNever})
	c := commitN(t, e, 100)
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.WaitSynced(ctx, c.Pos+100); err != nil {
		t.Fatalf("WaitSynced with a live cancellable context: %v", err)
	}
	cancel()
	c = commitN(t, e, 100)
	// nil too: the flusher may serve the request the wait leaves (a sync
	// of this sink takes no time) before the wait's select picks ctx.
	if err := e.WaitSynced(ctx, c.Pos+100); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitSynced with a cancelled context: %v", err)
	}
	if st := e.Stats(); st.InlineSyncs != 0 {
		t.Fatalf("cancellable waits ran %d syncs on their goroutine", st.InlineSyncs)
	}

	// A sync held in the sink: the cancellable wait returns at its
	// deadline; the held sync is the flusher's.
	release := make(chan struct{})
	s.hold <- release
	c = commitN(t, e, 100)
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	err := e.WaitSynced(dctx, c.Pos+100)
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitSynced while the sink's sync is held: %v, want the deadline", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	s.closed.Store(true)
}

// TestSyncInlineFailureStopsTheFlusher: a plain Sink's sync fails on the
// lone waiter's goroutine while a cancellable waiter has asked the flusher
// for a sync. The flusher, next to take the sink lock, must find the
// engine failed: it must not sync again (the failed sync is never
// retried), whenever the waiter's goroutine gets round to the rest.
func TestSyncInlineFailureStopsTheFlusher(t *testing.T) {
	var armed, inPark atomic.Bool
	parked := make(chan struct{}, 1)
	// No timer of its own wakes the flusher: only the second waiter.
	cfg := Config{Size: MinSize, Sync: SyncNever, FlushInterval: time.Hour}
	cfg.onPark = func(p bool) {
		inPark.Store(p)
		if p && armed.Load() {
			select {
			case parked <- struct{}{}:
			default:
			}
		}
	}
	e, s := newCheck(t, false, cfg)
	// The flusher's pass after the lock is released comes before the
	// waiter's goroutine goes on (it parks again whatever it did).
	e.onInlineSynced = func() {
		select {
		case <-parked:
		case <-time.After(_guard):
			t.Errorf("the flusher did not park again within %v", _guard)
		}
	}
	eio := errors.New("EIO")
	release := make(chan struct{})
	s.hold <- release // taken by the next sync: the inline one below
	s.mu.Lock()
	s.syncErr = eio
	s.mu.Unlock()

	c := commitN(t, e, 100)
	for deadline := time.Now().Add(_guard); !inPark.Load(); time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: the flusher parked after the commit", _guard)
		}
	}
	inline := make(chan error, 1)
	go func() { inline <- e.WaitSynced(context.Background(), c.Pos+100) }()
	for deadline := time.Now().Add(_guard); len(s.hold) != 0; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: the inline sync under way", _guard)
		}
	}
	if !inPark.Load() {
		t.Fatal("the flusher ran the sync, not the waiter")
	}
	// A waiter the flusher serves: it asks for a sync and kicks it, and
	// the flusher waits for the sink lock.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := make(chan error, 1)
	go func() { other <- e.WaitSynced(ctx, c.Pos+100) }()
	for deadline := time.Now().Add(_guard); e.waiters.Load() == 0 || len(e.kick) != 0; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: the flusher kicked by the second waiter", _guard)
		}
	}
	armed.Store(true)
	close(release)
	if err := <-inline; !errors.Is(err, eio) {
		t.Fatalf("inline WaitSynced: %v, want EIO", err)
	}
	if err := <-other; !errors.Is(err, eio) {
		t.Fatalf("the other WaitSynced: %v, want EIO", err)
	}
	if err := e.Close(); !errors.Is(err, eio) {
		t.Fatalf("Close: %v, want EIO", err)
	}
	s.closed.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncs != 1 {
		t.Fatalf("%d sync calls, want 1: the failed sync was retried", s.syncs)
	}
}

// TestCheckSinkIsPlain: newCheck's plain sink is not a PipelinedSink, or
// the plain cases above would test the pipelined path twice.
func TestCheckSinkIsPlain(t *testing.T) {
	e, s := newCheck(t, false, Config{Size: MinSize})
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
		s.closed.Store(true)
	}()
	if _, ok := e.sink.(PipelinedSink); ok {
		t.Fatal("newCheck(pipelined=false) made a PipelinedSink")
	}
}

// TestSyncInlinePolicyWaitsForIt: while a lone waiter's sync runs, with
// bytes written after it began and the sync policy due for them, the
// flusher waits for the sync to end, as it does for its syncer's, rather
// than make a pass again and again to find it still running; its end
// brings the flusher round to sync those bytes as the policy says. A
// round whose held sync was the flusher's (its batch timer fired first)
// is run again.
func TestSyncInlinePolicyWaitsForIt(t *testing.T) {
	for range 20 {
		if policyWaits(t) {
			return
		}
	}
	t.Fatal("in 20 rounds the first wait never ran its sync itself")
}

// policyWaits runs one round of TestSyncInlinePolicyWaitsForIt and reports
// whether the held sync ran on the waiter's goroutine.
func policyWaits(t *testing.T) (inline bool) {
	var parks atomic.Int64
	cfg := Config{Size: MinSize, Sync: SyncBatch, BatchBytes: 1 << 20, BatchAge: time.Millisecond}
	cfg.onPark = func(p bool) {
		if p {
			parks.Add(1)
		}
	}
	e, s := newCheck(t, true, cfg)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer func() {
		free()
		if err := e.Close(); err != nil {
			t.Error(err)
		}
		s.closed.Store(true)
	}()
	s.hold <- release
	c := commitN(t, e, 100)
	done := make(chan error, 1)
	go func() { done <- e.WaitSynced(context.Background(), c.Pos+100) }()
	for deadline := time.Now().Add(_guard); len(s.hold) != 0; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: the first sync under way", _guard)
		}
	}
	c2 := commitN(t, e, 100)
	ctx, cancel := context.WithTimeout(context.Background(), _guard)
	defer cancel()
	if err := e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// BatchAge passes for the second record while the sync is held.
	time.Sleep(10 * cfg.BatchAge)
	p0 := parks.Load()
	time.Sleep(50 * time.Millisecond)
	passes := parks.Load() - p0
	free()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e.Stats().InlineSyncs == 0 {
		return false // the held sync was the flusher's
	}
	if passes > 20 {
		t.Errorf("the flusher made %d passes while a sync it could not start waited for the inline one", passes)
	}
	for deadline := time.Now().Add(_guard); e.Synced() < c2.Pos+100; time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: the second record synced by the batch policy (synced %d, want %d)", _guard, e.Synced(), c2.Pos+100)
		}
	}
	return true
}
