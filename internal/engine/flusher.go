package engine

import (
	"math"
	"runtime"
	"time"
)

// flushLoop is the flusher goroutine. It owns written, synced, released and
// releasedSeq, and is the only caller of the Sink.
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
func (e *Engine) flushLoop() {
	defer close(e.done)
	defer e.progress.Broadcast()

	timer := e.newTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var timerAt time.Time // when the armed timer fires; zero when not armed
	arm := func(d time.Duration) {
		d = max(d, time.Microsecond)
		at := e.now().Add(d)
		if !timerAt.IsZero() && !at.Before(timerAt) {
			return // already due sooner
		}
		timer.Reset(d) // no stale fire is received after Reset
		timerAt = at
	}

	cfg := &e.cfg
	var gather groupGather
	var pace pacer
	lastSync := e.now()
	var dataSince time.Time // when the flusher first saw the oldest unsynced byte
	stopping := false

	// A PipelinedSink's syncs run on the syncer goroutine while the flusher
	// goes on writing; at most one is in flight (syncTarget: the written
	// position it covers, 0 if none).
	ps, pipelined := e.sink.(PipelinedSink)
	var syncTarget uint64
	var syncStarted time.Time
	var jobs chan func() error
	var results chan error
	if pipelined {
		jobs = make(chan func() error) // unbuffered: the syncer is idle when one is sent
		results = make(chan error, 1)  // the syncer never waits for the flusher
		syncerDone := make(chan struct{})
		go func() {
			defer close(syncerDone)
			for fn := range jobs {
				results <- fn()
				e.wake()
			}
		}()
		defer func() {
			close(jobs)
			<-syncerDone
		}()
	}
	// syncDone records a completed sync of everything below target.
	syncDone := func(target uint64, started time.Time) {
		gather.end(e)
		e.stats.syncs.Add(1)
		e.synced.Store(target)
		lastSync = e.now()
		dataSince = time.Time{}
		if e.written.Load() > target {
			dataSince = started // the oldest unsynced byte came after the sync began
		}
	}
	for {
		fired := false
		var res error
		gotResult := false
		switch {
		case stopping && syncTarget != 0:
			res, gotResult = <-results, true
		case !stopping:
			// Parked: due when the timer fires (or never, until a kick).
			if timerAt.IsZero() {
				e.due.Store(math.MaxInt64)
			} else {
				e.due.Store(e.nanos(timerAt) + int64(_lateSlack))
			}
			select {
			case <-e.kick:
			case <-timer.C():
				timerAt = time.Time{}
				fired = true
			case res = <-results:
				gotResult = true
			case <-e.stop:
				stopping = true
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
				syncDone(syncTarget, syncStarted)
				e.progress.Broadcast()
			}
			syncTarget = 0
		}
		if e.failed.Load() != nil {
			if stopping {
				if syncTarget != 0 {
					<-results // let the syncer finish before the sink is closed
				}
				return
			}
			e.progress.Broadcast() // nothing more is written; keep waiters informed until Close
			continue
		}

		pos, _ := e.Tail()
		w, s := e.written.Load(), e.synced.Load()
		now := e.now()
		if (pos > w || w > s) && dataSince.IsZero() {
			dataSince = now
		}
		demand := e.waiters.Load() != 0 || e.flushReq.Load() > w || e.syncReq.Load() > s
		dueBatch := cfg.Sync == SyncBatch && !dataSince.IsZero() && now.Sub(dataSince) >= cfg.BatchAge
		dueInterval := cfg.Sync == SyncInterval && (pos > s) && now.Sub(lastSync) >= cfg.SyncEvery
		urgent := stopping || fired || demand || pos-w >= uint64(cfg.FlushBytes) || dueBatch || dueInterval

		progressed := false
		if urgent {
			if !stopping && e.syncReq.Load() > s {
				gather.wait(e)
			}
			progressed = e.writeCommitted()
			w = e.written.Load()
			needSync := false
			if w > s {
				switch {
				case e.syncReq.Load() > s, stopping, dueInterval:
					needSync = true
				case cfg.Sync == SyncBatch:
					needSync = dueBatch || w-s >= uint64(cfg.BatchBytes)
				}
			}
			switch {
			case !needSync:
			case pipelined && syncTarget != 0:
				// One sync in flight; its completion brings the loop round.
			case pipelined:
				gather.begin(e)
				syncTarget, syncStarted = w, e.now()
				jobs <- ps.PrepareSync()
			default:
				gather.begin(e)
				started := e.now()
				if err := e.sink.Sync(); err != nil {
					e.fail(err)
					continue
				}
				syncDone(w, started)
				progressed = true
			}
		}
		if progressed {
			e.progress.Broadcast()
		}

		pos, _ = e.Tail()
		w, s = e.written.Load(), e.synced.Load()
		if stopping {
			// Close set the closed bit before stop, so pos is final: wait
			// for the last producers to commit, then write and sync it all.
			if w >= pos && s >= pos && syncTarget == 0 {
				return
			}
			if !progressed && syncTarget == 0 && e.failed.Load() == nil {
				// Claims not yet committed: Close keeps waiters
				// non-zero, so their commits kick.
				if e.onCommitWait != nil {
					e.onCommitWait()
				}
				<-e.kick
			}
			continue
		}
		pending := pos > w
		if progressed && pending && (demand || pos-w >= uint64(cfg.FlushBytes)) {
			e.wake() // more is wanted now: go round again at once
			continue
		}
		d := time.Duration(-1)
		if pending {
			d = min(cfg.FlushInterval, pace.next(pos, now, uint64(cfg.FlushBytes)))
			if demand {
				d = 50 * time.Microsecond // a waiter waits on bytes still being copied
			}
		}
		if (pending || w > s) && !dataSince.IsZero() {
			switch cfg.Sync {
			case SyncBatch:
				d = minDur(d, cfg.BatchAge-now.Sub(dataSince))
			case SyncInterval:
				d = minDur(d, cfg.SyncEvery-now.Sub(lastSync))
			}
		}
		if d >= 0 {
			arm(d)
			continue
		}
		if timerAt.IsZero() {
			// Nothing to do until a producer commits. Announce idleness,
			// then look once more so a commit racing with the store is not
			// missed (a producer loads idle after its commit).
			e.idle.Store(true)
			if p, _ := e.Tail(); p > e.written.Load() {
				e.wake()
			}
			e.progress.Broadcast() // idleness is observable (tests wait for it)
		}
	}
}

// minWindow estimates how long a Sink.Write takes as the fastest of the
// last len(d) writes: a write that waited for a CPU must not teach Late to
// expect the wait, and one prompt write in the window is enough.
//
// The estimate shapes what it measures. When producers never wait (Drop),
// a flusher whose sink call is over often gets a CPU only when a producer
// yields to it, and producers yield once Late says so, at the estimate plus
// _lateSlack. Every write then looks at least that long, and the minimum
// creeps up: with 8 producers on 2 CPUs and a 1 ms sink it settled at
// 1.45 ms a write, and 30 % of records were dropped for want of sink
// time (BenchmarkDropLatency). So every probeEvery-th write is expected
// sooner, at 3/4 of the estimate (next): if the sink is faster than the
// estimate, that write shows it.
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
// one wake-up per lap (BENCHMARKS.md, writer, session 4).
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
	if p.rate <= 0 {
		return time.Hour
	}
	return max(time.Duration(float64(chunk)/p.rate), minPace)
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
type groupGather struct {
	s0, s1  uint64        // arrival counts at the starts of the last two syncs
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

func (g *groupGather) begin(e *Engine) {
	g.s0, g.s1 = g.s1, e.arrivals.Load()
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
// most MaxWrite bytes, releasing the blocks each write finished before the
// next, so producers waiting for space need not wait for the whole range.
// It reports whether anything was written.
//
// It reads the frontier again before each write: producers fill the space
// each write released while the next one runs, so a range of 1.5 MaxWrite
// becomes two full writes rather than a full and a half one (with O_DIRECT
// on the test VM the half writes had locked into alternating with the full
// ones). Past the range committed when it was called it
// goes on only while a FlushBytes batch is ready (smaller ones wait for the
// pacer), and for at most Size bytes, so that syncs, timers and Close are
// served between.
func (e *Engine) writeCommitted() bool {
	w := e.written.Load()
	first := e.frontier(w)
	if first == w {
		return false
	}
	limit := w + uint64(e.cfg.Size)
	for end := first; w < end; {
		next := min(end, w+uint64(e.cfg.MaxWrite))
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
// reports whether it freed any. REQUIRES: called by the flusher.
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
