package engine

import (
	"math"
	"runtime"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
)

// flusher is the state of the flusher goroutine, which owns written,
// synced, released and releasedSeq and calls the Sink, holding the sink
// lock (Engine.sinkMu) except while it parks; SyncInline, holding it, may
// do the same for a lone waiter. Every field is owned by that goroutine.
//
// Each pass of its loop (run) takes four steps:
//
//  1. park: wait for a kick, the timer, a finished sync or Close;
//  2. decide: read the claimed, written and synced positions, the waiters'
//     requests and the sync policy, and say whether to write now;
//  3. flush: write every committed byte, then sync if a sync is due;
//     then call a TimedSink's TimedTick when its TickIn says it is due;
//  4. sleep: choose the next wake-up: another pass at once, the timer (the
//     earliest of the flush, sync and TickIn times), or idle until a
//     producer's commit kicks it. With nothing to write and the timer
//     later than FlushInterval, a commit kicks it as from idle: the timer
//     of a sync or a TimedSink must not hold committed bytes back. When a
//     request (Flush, Sync, WaitSynced, RequestSync) waits on bytes
//     claimed but not yet committed, the next commit kicks it too, and it
//     does not look before: the caller may have given up, and a claim may
//     stay open for long.
//
// A wake-up from idle (the first commit after a quiet spell) only arms the
// flush timer: writing a few records per wake-up would make producers and
// flusher ping-pong for the CPU. Bytes are written when a trigger fires:
// FlushBytes claimed (by the flusher's own pacing), a waiter (space, Flush,
// Sync, WaitSynced), the timer (FlushInterval, BatchAge, SyncEvery), or
// Close.
//
// While producers are busy the flusher paces itself: it sleeps until
// FlushBytes more are expected at the claim rate it measured, so producers
// need not wake it (Commit wakes it only past half a ring, when someone
// waits, or when it is idle).
type flusher struct {
	e   *Engine
	cfg *Config

	timer   clock.Timer
	timerAt time.Time // when the armed timer fires; zero when not armed

	gather    groupGather
	pace      pacer
	lastSync  time.Time // when the last sync completed
	dataSince time.Time // when the flusher first saw the oldest unsynced byte; zero if none
	stopping  bool      // Close stopped the engine: write and sync everything, then exit

	// syncer runs a PipelinedSink's syncs; nil for any other Sink.
	syncer *syncer
	// timed is the Sink as a TimedSink, or nil.
	timed TimedSink
}

func newFlusher(e *Engine) *flusher {
	f := &flusher{e: e, cfg: &e.cfg, timer: e.newTimer(time.Hour), lastSync: e.now()}
	f.timer.Stop()
	if ps, ok := e.sink.(PipelinedSink); ok {
		f.syncer = newSyncer(e, ps)
	}
	f.timed, _ = e.sink.(TimedSink)
	return f
}

// run is the flusher goroutine. It returns once Close has stopped the
// engine and every claimed byte is written and synced, or at Close after a
// failure. It joins the syncer, then closes done.
func (f *flusher) run() {
	e := f.e
	defer close(e.done)
	defer e.progress.Broadcast()
	// The flusher holds sinkMu except while it waits (park, awaitCommit).
	e.sinkMu.Lock()
	defer e.sinkMu.Unlock()
	if f.syncer != nil {
		defer f.syncer.stop() // a sync in flight finishes before the sink is closed
	}
	defer f.timer.Stop()
	if f.timed != nil {
		// A Sink may want a call before anything is written (a log
		// reopened with work due later).
		now := e.now()
		if t := f.timed.TickIn(now); t >= 0 {
			f.arm(now, t)
		}
	}
	for {
		fired := f.park()
		if e.failed.Load() != nil {
			if f.stopping {
				f.awaitInlineSync()
				return
			}
			e.progress.Broadcast() // nothing more is written; keep waiters informed until Close
			continue
		}
		p := f.decide(fired)
		progressed := p.urgent && f.flush(p)
		if e.failed.Load() != nil {
			continue // fail broadcast it; the next pass exits or parks
		}
		if progressed {
			e.progress.Broadcast()
		}
		if f.timed != nil && !f.stopping && f.timed.TickIn(p.now) == 0 { // p.now: no clock read of its own
			if err := f.timed.TimedTick(); err != nil {
				e.fail(err)
				continue
			}
		}
		if f.stopping {
			// Close set the closed bit before stop, so the claimed position
			// is final: wait for the last producers to commit, then write
			// and sync it all.
			if f.finished() {
				return
			}
			if !progressed && !f.syncing() {
				f.awaitCommit() // or an inline sync's end
			}
			continue
		}
		f.sleep(p, progressed)
	}
}

// park waits for the next reason to make a pass: a kick, the timer, a
// finished pipelined sync, or stop. Once stopping it waits only for a sync
// in flight. It reports whether the timer fired.
func (f *flusher) park() (fired bool) {
	e := f.e
	var res error
	gotResult := false
	switch {
	case f.stopping && f.syncing():
		e.sinkMu.Unlock()
		res, gotResult = <-f.syncer.results, true
		e.sinkMu.Lock()
	case !f.stopping:
		// Parked: due when the timer fires (or never, until a kick).
		if f.timerAt.IsZero() {
			e.due.Store(math.MaxInt64)
		} else {
			e.due.Store(e.nanos(f.timerAt) + int64(_lateSlack))
		}
		var results <-chan error // nil, never ready, without a syncer
		if f.syncer != nil {
			results = f.syncer.results
		}
		if f.cfg.onPark != nil {
			f.cfg.onPark(true)
		}
		e.sinkMu.Unlock()
		select {
		case <-e.kick:
		case <-f.timer.C():
			f.timerAt = time.Time{}
			fired = true
		case res = <-results:
			gotResult = true
		case <-e.stop:
			f.stopping = true
		}
		e.sinkMu.Lock()
		if f.cfg.onPark != nil {
			f.cfg.onPark(false)
		}
	}
	if e.idle.Load() {
		e.idle.Store(false)
	}
	e.due.Store(e.nanos(e.now()) + int64(_lateSlack))
	if gotResult {
		if res != nil {
			e.fail(res)
		} else {
			f.syncDone(f.syncer.target, f.syncer.started)
			e.progress.Broadcast()
		}
		f.syncer.target = 0
		e.syncBusy.Store(false)
	}
	return fired
}

// plan is what a pass found (decide) and what it acts on (flush, sleep).
type plan struct {
	now         time.Time
	demand      bool // a goroutine waits on the flusher, or asked for a flush or sync not yet done
	dueBatch    bool // SyncBatch: the oldest unsynced byte is BatchAge old
	dueInterval bool // SyncInterval: SyncEvery has passed since the last sync, with bytes to sync
	urgent      bool // write now rather than wait for more
}

// decide reads the engine's positions and requests and says whether this
// pass writes: when stopping, when the timer fired, on demand, when
// FlushBytes are claimed but unwritten, when more than half the ring is
// claimed and not released, or when the sync policy is due.
//
// Past half a ring is the kick a producer that never waits (TryClaim,
// Drop mode) gives from Commit: a pass it starts must write, whatever
// FlushBytes is, or a full ring stays full, dropping every record, until
// the timer. A claim it is refused in a ring less than half full asks for
// a flush instead (see claim).
func (f *flusher) decide(fired bool) plan {
	e, cfg := f.e, f.cfg
	pos, _ := e.Tail()
	w, s := e.written.Load(), e.synced.Load()
	p := plan{now: e.now()}
	if pos == w && w == s {
		f.dataSince = time.Time{} // SyncInline synced it all
	}
	if (pos > w || w > s) && f.dataSince.IsZero() {
		f.dataSince = p.now
	}
	p.demand = e.waiters.Load() != 0 || e.flushReq.Load() > w || e.syncReq.Load() > s
	p.dueBatch = cfg.Sync == SyncBatch && !f.dataSince.IsZero() && p.now.Sub(f.dataSince) >= cfg.BatchAge
	p.dueInterval = cfg.Sync == SyncInterval && pos > s && p.now.Sub(f.lastSync) >= cfg.SyncEvery
	p.urgent = f.stopping || fired || p.demand || pos-w >= uint64(cfg.FlushBytes) || pos-e.released.Load() > e.half || p.dueBatch || p.dueInterval
	return p
}

// flush writes every committed byte, then syncs if a sync is due: at once
// for a Sink, on the syncer for a PipelinedSink (one in flight at a time).
// It reports whether the written or synced position advanced. After a sink
// error the engine has failed.
func (f *flusher) flush(p plan) (progressed bool) {
	e := f.e
	s := e.synced.Load()
	if !f.stopping && !e.syncBusy.Load() && e.syncReq.Load() > s {
		f.gather.wait(e) // not while a sync is in flight: the group waits for it
	}
	arrived := e.arrivals.Load() // before the frontier is read: their records are written below
	progressed = e.writeCommitted()
	if e.failed.Load() != nil {
		return false // a write failed: the sink gets no more calls
	}
	w := e.written.Load()
	if !f.syncDue(p, w, s) {
		return progressed
	}
	switch {
	case e.syncBusy.Load():
		// The syncer's or SyncInline's: its completion brings the loop
		// round (see SyncInline).
	case e.failed.Load() != nil:
		// SyncInline's sync failed since the check above (it fails the
		// engine before it clears syncBusy): never sync again.
		return false
	case e.synced.Load() >= w:
		// An inline sync that ended since s was read covered it
		// (SyncInline raises synced before it clears syncBusy).
	case f.syncer != nil:
		f.gather.begin(arrived)
		f.syncer.start(w, e.now())
	default:
		f.gather.begin(arrived)
		started := e.now()
		if err := e.sink.Sync(); err != nil {
			e.fail(err)
			return false
		}
		f.syncDone(w, started)
		progressed = true
	}
	return progressed
}

// syncDue reports whether the bytes written below w, synced below s, need
// a sync now: one was asked for, Close is stopping, or the policy is due.
func (f *flusher) syncDue(p plan, w, s uint64) bool {
	if w <= s {
		return false
	}
	switch {
	case f.e.syncReq.Load() > s, f.stopping, p.dueInterval:
		return true
	case f.cfg.Sync == SyncBatch:
		return p.dueBatch || w-s >= uint64(f.cfg.BatchBytes)
	}
	return false
}

// syncDone records a completed sync of every byte below target, which
// started at started.
func (f *flusher) syncDone(target uint64, started time.Time) {
	e := f.e
	f.gather.end(e)
	e.stats.syncs.Add(1)
	StoreMax(&e.synced, target)
	f.lastSync = e.now()
	f.dataSince = time.Time{}
	if e.written.Load() > target {
		f.dataSince = started // the oldest unsynced byte came after the sync began
	}
}

// syncing reports whether the syncer's sync is in flight (syncBusy is
// then set too; syncBusy alone means SyncInline's).
func (f *flusher) syncing() bool { return f.syncer != nil && f.syncer.target != 0 }

// finished reports whether, once stopping, every claimed byte is written
// and synced and no sync is in flight.
func (f *flusher) finished() bool {
	pos, _ := f.e.Tail()
	return f.e.written.Load() >= pos && f.e.synced.Load() >= pos && !f.e.syncBusy.Load()
}

// awaitInlineSync waits, once stopping after a failure, for a sync that
// SyncInline runs outside the sink lock: the Sink's owner closes its files
// once the flusher has exited. Its end kicks the flusher (see SyncInline).
// syncBusy also stands for the syncer's sync, which the deferred
// syncer.stop waits for, and whose result only park receives.
func (f *flusher) awaitInlineSync() {
	for f.e.syncBusy.Load() && !f.syncing() {
		f.e.sinkMu.Unlock()
		<-f.e.kick
		f.e.sinkMu.Lock()
	}
}

// awaitCommit waits, once stopping, for a producer's commit: Close keeps
// waiters non-zero, so every commit kicks.
func (f *flusher) awaitCommit() {
	if f.e.onCommitWait != nil {
		f.e.onCommitWait()
	}
	f.e.sinkMu.Unlock()
	<-f.e.kick
	f.e.sinkMu.Lock()
}

// sleep chooses how the flusher waits for its next pass: another pass at
// once when more is wanted now, the timer when bytes wait to be written or
// synced (wakeAfter), or idle until a producer's commit kicks it.
//
// It reads the clock again: the pass's writes, sync and TimedTick took
// time since decide read it, and a sleep measured from the start of the
// pass but armed at its end would fire late by that much.
func (f *flusher) sleep(p plan, progressed bool) {
	e := f.e
	pos, _ := e.Tail()
	w, s := e.written.Load(), e.synced.Load()
	if progressed && pos > w && (p.demand || pos-w >= uint64(f.cfg.FlushBytes)) {
		e.wake() // more is wanted now: go round again at once
		return
	}
	p.now = e.now()
	d := f.wakeAfter(p, pos, w, s)
	if f.timed != nil {
		if t := f.timed.TickIn(p.now); t >= 0 {
			d = minDur(d, t)
		}
		if e.syncBusy.Load() && !f.syncing() {
			// An inline sync runs: TickIn cannot see what its end gives
			// the sink to do. Look again within FlushInterval, which
			// spares the sync's end a wake-up (see tickUncovered).
			d = minDur(d, f.cfg.FlushInterval)
		}
	}
	if d >= 0 {
		f.arm(p.now, d)
	}
	switch {
	case f.timerAt.IsZero():
		f.sleepIdle(false)
	case pos > w && (e.flushReq.Load() > w || e.syncReq.Load() > w):
		// A request waits on bytes that are claimed but not committed:
		// nothing serves it before they are. Sleep until a commit (or
		// the timer) rather than look again and again: its caller may
		// have given up and left the request behind.
		f.sleepUntilCommit(w)
	case pos <= w && f.timerAt.Sub(p.now) > f.cfg.FlushInterval:
		// Nothing to write, and the timer (the sync policy's or the
		// sink's, perhaps armed for a sync that is done by now) fires
		// later than a commit may wait: sleep as if idle, so that the
		// next commit wakes the flusher to arm its flush timer.
		f.sleepIdle(true)
	}
}

// wakeAfter returns how long the flusher may sleep with the claimed,
// written and synced positions pos, w and s, or -1 when it has nothing to
// do until kicked. Unwritten bytes wait until FlushBytes more are expected
// at the pacer's rate, at most FlushInterval; unsynced bytes until the
// sync policy is due. Unwritten bytes that someone waits on are not
// committed yet (the pass wrote the rest): their commit kicks the flusher
// (see sleep), so they are no reason to wake sooner.
func (f *flusher) wakeAfter(p plan, pos, w, s uint64) time.Duration {
	cfg := f.cfg
	pending := pos > w
	d := time.Duration(-1)
	if pending {
		d = min(cfg.FlushInterval, f.pace.next(pos, p.now, uint64(cfg.FlushBytes)))
	}
	// A sync in flight, the syncer's or SyncInline's, brings the loop
	// round when it completes: the next one cannot start before, so its
	// due time is no reason to wake.
	if (pending || w > s) && !f.dataSince.IsZero() && !f.e.syncBusy.Load() {
		switch cfg.Sync {
		case SyncBatch:
			d = minDur(d, cfg.BatchAge-p.now.Sub(f.dataSince))
		case SyncInterval:
			d = minDur(d, cfg.SyncEvery-p.now.Sub(f.lastSync))
		}
	}
	return d
}

// arm sets the timer to fire d (at least a microsecond) after now, a time
// just read, unless it is already due sooner.
func (f *flusher) arm(now time.Time, d time.Duration) {
	d = max(d, time.Microsecond)
	at := now.Add(d)
	if !f.timerAt.IsZero() && !at.Before(f.timerAt) {
		return
	}
	f.timer.Reset(d) // no stale fire is received after Reset
	f.timerAt = at
}

// sleepIdle announces that the flusher has nothing to write until a
// producer commits, then looks once more so that a commit racing with the
// announcement is not missed (a producer loads idle after its commit).
// With timer set, its timer is armed (Idle stays false). Going idle is
// broadcast as progress, so tests can wait for it.
func (f *flusher) sleepIdle(timer bool) {
	e := f.e
	e.idleTimer.Store(timer)
	e.idle.Store(true)
	if p, _ := e.Tail(); p > e.written.Load() {
		e.wake()
	}
	if !timer {
		e.progress.Broadcast()
	}
}

// sleepUntilCommit makes the next commit kick the flusher, which has
// written everything committed below w and sleeps with its timer armed: it
// sets idle (with idleTimer, so Idle stays false), then looks once more, so
// that a commit racing with it is not missed (a producer adds to its
// block's counter, then loads idle; frontier loads the counters after).
func (f *flusher) sleepUntilCommit(w uint64) {
	e := f.e
	e.idleTimer.Store(true)
	e.idle.Store(true)
	if e.frontier(w) > w {
		e.wake()
	}
}

// syncer runs a PipelinedSink's syncs on its own goroutine, so that the
// flusher goes on writing while one runs. At most one is in flight.
type syncer struct {
	e       *Engine
	sink    PipelinedSink
	jobs    chan func() error // unbuffered: the syncer is idle when one is sent
	results chan error        // capacity 1: the syncer never waits for the flusher
	done    chan struct{}     // closed when run returns

	// Flusher only.
	target  uint64    // the written position the sync in flight covers; 0 if none
	started time.Time // when the sync in flight started
}

func newSyncer(e *Engine, sink PipelinedSink) *syncer {
	return &syncer{
		e:       e,
		sink:    sink,
		jobs:    make(chan func() error),
		results: make(chan error, 1),
		done:    make(chan struct{}),
	}
}

// run is the syncer goroutine: it runs each sync it is handed, sends the
// result and kicks the flusher. It returns when stop closes jobs.
func (s *syncer) run() {
	defer close(s.done)
	for fn := range s.jobs {
		s.results <- fn()
		s.e.wake()
	}
}

// start hands the syncer a sync of every byte written below w, prepared on
// the flusher. REQUIRES: no sync in flight; called by the flusher.
func (s *syncer) start(w uint64, now time.Time) {
	s.target, s.started = w, now
	s.e.syncBusy.Store(true)
	s.jobs <- s.sink.PrepareSync()
}

// stop lets a sync in flight finish and joins the syncer goroutine.
// REQUIRES: called by the flusher, once, as it exits.
func (s *syncer) stop() {
	close(s.jobs)
	<-s.done
}

// minWindow estimates how long a Sink.Write takes as the fastest of the
// last len(d) writes: a write that waited for a CPU must not teach Late to
// expect the wait, and one prompt write in the window is enough.
//
// The estimate shapes what it measures. When producers never wait (Drop),
// a flusher whose sink call is over often gets a CPU only when a producer
// yields to it, and producers yield once Late says so, at the estimate plus
// _lateSlack. Every write then looks at least that long, the minimum
// creeps up, and records are dropped for want of sink time
// (BenchmarkDropLatency, ms-per-write). So every probeEvery-th write is
// expected sooner, at 3/4 of the estimate (next): if the sink is faster
// than the estimate, that write shows it.
type minWindow struct {
	d [64]int64
	n int
}

// probeEvery is how often a write is expected at 3/4 of the estimate.
const probeEvery = 8

// next returns how long the next write is expected to take: the estimate,
// or 3/4 of it for every probeEvery-th write.
func (w *minWindow) next() int64 {
	e := w.est()
	if w.n%probeEvery == probeEvery-1 {
		e -= e / 4
	}
	return e
}

func (w *minWindow) add(d int64) {
	w.d[w.n%len(w.d)] = d
	w.n++
}

// est returns the minimum of the window, 0 before the first write.
func (w *minWindow) est() int64 {
	k := min(w.n, len(w.d))
	if k == 0 {
		return 0
	}
	m := w.d[0]
	for _, d := range w.d[1:k] {
		m = min(m, d)
	}
	return m
}

// pacer estimates the claim rate from the flusher's passes and says when
// the next FlushBytes will have been claimed.
//
// On Linux a timer under 1 ms fires after about 1 ms: the runtime's
// netpoller sleeps in epoll_wait, whose timeout is in milliseconds
// (golang/go#53824). At claim rates where FlushBytes takes less, the
// flusher wakes late and the producers' kick past half a ring takes over,
// one wake-up per lap (BenchmarkWrite, sink=null).
type pacer struct {
	pos  uint64    // claimed position at the last sample
	at   time.Time // time of the last sample
	rate float64   // bytes per nanosecond, smoothed; 0 until measured
}

// minPace bounds how often a pacing flusher wakes.
const minPace = 20 * time.Microsecond

// next samples the claimed position pos at now and returns how long until
// chunk more bytes are expected; a long duration when no rate is known.
func (p *pacer) next(pos uint64, now time.Time, chunk uint64) time.Duration {
	switch dt := now.Sub(p.at); {
	case p.at.IsZero():
		p.pos, p.at = pos, now
	case dt >= minPace: // positions only grow
		r := float64(pos-p.pos) / float64(dt)
		if p.rate == 0 {
			p.rate = r
		} else {
			p.rate = (p.rate + r) / 2
		}
		p.pos, p.at = pos, now
	}
	// A rate halved towards zero by passes with nothing claimed makes
	// chunk/rate too large for a Duration, whose conversion from such a
	// float is not defined (it comes out negative on amd64).
	d := float64(chunk) / p.rate
	if p.rate <= 0 || d >= float64(time.Hour) {
		return time.Hour
	}
	return max(time.Duration(d), minPace)
}

// groupGather lets the goroutines that one group commit released append
// their next records before the next sync starts. Without it, waiters split
// into two groups that alternate, each sync covering half of them: the
// flusher starts a sync as soon as the first of the released waiters asks,
// while the rest are still waking up.
//
// It counts arrivals (Engine.arrivals, one per wait). A sync that started
// at arrival count s1 and ended at e1 saw e1-s0 waiters in its round (s0:
// the start of the sync before it): those it covered and those that came
// while it ran. The next sync waits, briefly, until as many have arrived
// since s1.
//
// A sync's arrival count is read before the pass writes the bytes the sync
// covers: a waiter counted then committed its record before it waited, so
// the write includes it. Read when the sync starts, after the write, it
// also counted waiters that came during the write, whose records wait for
// the next sync; the round after expected that many waiters too many, and
// gathered until its deadline a smaller group (BenchmarkGroupCommit's
// acks/sync; BENCHMARKS.md has the figures).
type groupGather struct {
	s0, s1  uint64        // arrival counts read before the writes of the last two syncs
	target  uint64        // waiters expected in the next round
	syncDur time.Duration // how long the last sync took
	started time.Time
}

// maxGather bounds how long the flusher waits for a group to re-form.
//
// Gathering reads the system clock, not Config.Clock: it times how long
// goroutines take to be scheduled, and yields until they are, so a fake
// clock that does not move must not keep it yielding.
const maxGather = 100 * time.Microsecond

// begin records a sync starting now, covering the waiters counted in
// arrived (read before the pass's writes).
func (g *groupGather) begin(arrived uint64) {
	g.s0, g.s1 = g.s1, arrived
	g.started = time.Now()
}

func (g *groupGather) end(e *Engine) {
	g.syncDur = time.Since(g.started)
	g.target = e.arrivals.Load() - g.s0
}

// wait yields until the expected group has arrived, for at most half the
// last sync's duration (and maxGather): a wait that costs a fraction of a
// sync buys one sync for the whole group.
func (g *groupGather) wait(e *Engine) {
	if g.target <= 1 || e.arrivals.Load()-g.s1 >= g.target {
		return
	}
	deadline := time.Now().Add(min(g.syncDur/2, maxGather))
	for e.arrivals.Load()-g.s1 < g.target && time.Now().Before(deadline) {
		runtime.Gosched()
	}
}

// minDur returns the smaller of a and b, treating a negative a as unset.
func minDur(a, b time.Duration) time.Duration {
	if a < 0 {
		return max(b, 0)
	}
	return max(min(a, b), 0)
}

// writeCommitted hands every committed byte to the sink, in writes of at
// most MaxWrite bytes (a write cut short ends at a block boundary),
// releasing the blocks each write finished before the next, so producers
// waiting for space need not wait for the whole range.
// It reports whether anything was written.
//
// It reads the frontier again before each write: producers fill the space
// each write released while the next one runs, so a range of 1.5 MaxWrite
// becomes two full writes rather than a full and a half one, which could
// otherwise lock into alternating (TestFullWritesWhileProducersRefill).
// Past the range committed when it was called it goes on only while a
// FlushBytes batch is ready (smaller ones wait for the pacer), and for at
// most Size bytes, so that syncs, timers and Close are served between.
func (e *Engine) writeCommitted() bool {
	w := e.written.Load()
	first := e.frontier(w)
	if first == w {
		return false
	}
	bs := uint64(e.cfg.BlockSize)
	limit := (w + uint64(e.cfg.Size)) &^ (bs - 1) // a block boundary past w
	for end := first; w < end; {
		next := end
		if end-w > uint64(e.cfg.MaxWrite) {
			// A write cut short ends at a block boundary, where
			// producers leave record starts (writer's marks), unless
			// MaxWrite is below a block.
			next = w + uint64(e.cfg.MaxWrite)
			if r := next &^ (bs - 1); r > w {
				next = r
			}
		}
		a, b := e.slices(w, next)
		start := e.now()
		e.due.Store(e.nanos(start) + e.writeEst.next() + int64(_lateSlack))
		if err := e.sink.Write(w, a, b); err != nil {
			e.fail(err)
			return false
		}
		now := e.now()
		e.writeEst.add(int64(now.Sub(start)))
		e.due.Store(e.nanos(now) + int64(_lateSlack))
		e.stats.flushes.Add(1)
		e.written.Store(next)
		if e.release(next) && e.waiters.Load() != 0 {
			e.progress.Broadcast()
		}
		w = next
		end = min(e.frontier(w), limit)
		if w >= first && end-w < uint64(e.cfg.FlushBytes) {
			break
		}
	}
	return true
}

// frontier returns the end of the committed range that starts at w.
func (e *Engine) frontier(w uint64) uint64 {
	bs := uint64(e.cfg.BlockSize)
	end := w
	for {
		pos, _ := e.Tail()
		if end >= pos {
			return end
		}
		start := end &^ (bs - 1)
		c := e.blk[(end&e.mask)>>e.shift].v.Load()
		got := c & (1<<32 - 1)
		if got == bs {
			end = start + bs
			continue
		}
		// The block is not complete. If the tail is inside it and the
		// counter (read first) equals the bytes claimed in it (tail read
		// after), every claim in it has committed: a byte counted in c was
		// claimed before c was read, hence before the tail was read.
		t2, _ := e.Tail()
		if t2 < start+bs && got == t2-start {
			return t2
		}
		return end
	}
}

// slices returns the ring bytes for positions [from, to), split at the wrap.
func (e *Engine) slices(from, to uint64) (a, b []byte) {
	s := from & e.mask
	n := to - from
	if s+n <= uint64(len(e.buf)) {
		return e.buf[s : s+n], nil
	}
	return e.buf[s:], e.buf[:n-(uint64(len(e.buf))-s)]
}

// release frees the blocks below written (rounded down to a block) and
// reports whether it freed any. REQUIRES: the sink lock held.
func (e *Engine) release(written uint64) bool {
	bs := uint64(e.cfg.BlockSize)
	r := e.released.Load()
	upto := written &^ (bs - 1)
	if upto <= r {
		return false
	}
	seq := e.releasedSeq.Load()
	for p := r; p < upto; p += bs {
		c := &e.blk[(p&e.mask)>>e.shift].v
		seq += c.Load() >> 32
		c.Store(0)
	}
	e.releasedSeq.Store(seq)
	e.released.Store(upto)
	return true
}
