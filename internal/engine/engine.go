// Package engine is the claim/commit buffer and flusher behind wal.Log and
// writer.Ring: one mechanism, not two copies.
//
// # The mechanism
//
// The buffer is a ring of Size bytes addressed by a 64-bit log position that
// only grows. Producers and one flusher goroutine share it:
//
//  1. Claim: a producer reserves n bytes (and k record sequence numbers) with
//     one compare-and-swap on the packed tail word. The swap succeeds only if
//     the reservation fits in space the flusher has released, so a claim is
//     never lost and never has to be undone: in Drop mode a record that does
//     not fit is refused before any space is taken.
//  2. Copy: the producer copies its bytes into its own range with Put. No one
//     else touches that range.
//  3. Commit: the producer adds the bytes it wrote to the commit counter of
//     every block its range overlaps (one atomic add per block).
//  4. Flush: the flusher walks blocks in order. A block whose counter equals
//     the block size is fully committed; the block holding the tail is
//     committed up to the tail when its counter equals the claimed bytes in it
//     (read the counter, then the tail: see frontier). The flusher hands each
//     contiguous committed range to the Sink in one call, and, when asked for
//     durability, calls Sink.Sync once for every waiter it covers (group
//     commit).
//
// # Invariants
//
//   - A block is reused only after every producer that claimed in it has
//     committed and the flusher has written it: release happens at block
//     granularity, after the block's counter reached BlockSize and the block
//     was handed to the Sink, and the counter is reset before the release is
//     published.
//   - The sink sees bytes in claim order, exactly once, with no gaps.
//   - After Close returns no claim succeeds (the closed bit lives in the tail
//     word, so "not closed" and "reserved" are one atomic step) and every
//     claim that succeeded before it was written and synced.
//   - A sink error is sticky: the engine enters a failed state, wakes every
//     waiter, and every later call returns the error. The engine never retries
//     a failed Sync.
//
// # The packed tail word
//
//	bit 63      closed
//	bits 32..62 low 31 bits of the next sequence number
//	bits 0..31  low 32 bits of the next log position
//
// The full 64-bit values are rebuilt from a reference the flusher publishes
// (released position and the sequence number of the first record starting at
// or after it). Every claimed position lies within Size of released, and
// Size <= MaxSize (512 MiB), so 32 bits of position and 31 bits of sequence
// are unambiguous; claim re-reads released after the tail to reject a stale
// reference (see Engine.claim).
package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/sys"
)

// Errors returned by the engine.
var (
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("engine: closed")
	// ErrTooLarge is returned by Claim when n is not in [1, MaxClaim] or the
	// record count k is not in [0, n].
	ErrTooLarge = errors.New("engine: claim larger than the buffer allows")
	// ErrNilContext is wrapped by the error of every method that takes a
	// context when it is given a nil one. The call changes nothing: the
	// engine neither fails nor records a request.
	ErrNilContext = errors.New("engine: nil context")
)

// nilContext returns the error for a nil context passed to method.
func nilContext(method string) error {
	return fmt.Errorf("%w passed to %s", ErrNilContext, method)
}

// Limits of Config.Size.
const (
	MinSize = 64 << 10
	MaxSize = 512 << 20
)

// Defaults for zero Config fields.
const (
	DefaultSize          = 8 << 20
	DefaultFlushInterval = 10 * time.Millisecond
)

// Sink receives the committed bytes in order. Its methods are never called
// concurrently: they are called by the flusher goroutine or, for a sync
// that a lone waiter asked for while the flusher was parked, by that
// waiter's goroutine (see Engine.SyncInline), each holding the engine's
// sink lock. They must not call a method of the Engine that waits on the
// flusher (Close, Flush, Sync, WaitSynced, the Await calls, or a Claim on
// a full ring): the flusher would wait for itself.
type Sink interface {
	// Write writes the bytes at log positions [pos, pos+len(a)+len(b)).
	// b continues a when the range wraps around the end of the ring; it is
	// often empty. The slices alias the ring: they are valid only during the
	// call. A range ends where every claim below it ended (the tail when
	// the flusher looked), or at a multiple of BlockSize, where a claim may
	// continue (or anywhere, when Config.MaxWrite is below BlockSize); a
	// and b meet at a multiple of Size.
	Write(pos uint64, a, b []byte) error
	// Sync makes every byte written so far durable.
	Sync() error
}

// TimedSink is a Sink with work to do on the flusher goroutine at times it
// chooses, whether or not bytes are being written: the flusher asks
// TickIn when it starts and at each pass, and keeps its timer armed for
// the time it returns.
type TimedSink interface {
	Sink
	// TickIn is called on the flusher goroutine at each pass. It returns
	// how long until the sink wants TimedTick called, or a negative
	// duration when it wants no call until something changes. It must be
	// cheap.
	TickIn(now time.Time) time.Duration
	// TimedTick is called on the flusher goroutine at a pass where TickIn
	// returned 0. An error fails the engine, as a Write error does.
	TimedTick() error
}

// PipelinedSink is a Sink whose syncs may overlap further writes: the
// engine then runs each sync on a syncer goroutine while the flusher goes
// on writing, so a slow fdatasync does not stall the write path. The
// engine never has two syncs in flight, and calls Sync only through
// PrepareSync.
type PipelinedSink interface {
	Sink
	// PrepareSync is called on the flusher goroutine. It returns a function
	// that makes every byte written before the call durable; the engine
	// calls it on another goroutine, concurrently with later Writes.
	PrepareSync() func() error
}

// SyncMode says when the flusher calls Sink.Sync on its own. Explicit
// requests (Sync, WaitSynced, Close) are always honoured.
type SyncMode int

// Sync modes.
const (
	// SyncNever leaves durability to the OS.
	SyncNever SyncMode = iota + 1
	// SyncInterval syncs written bytes every SyncEvery.
	SyncInterval
	// SyncBatch syncs when BatchBytes are written but not synced, or when the
	// oldest unsynced byte is BatchAge old (group commit).
	SyncBatch
)

// Config configures an Engine. Zero fields take defaults.
type Config struct {
	// Size is the ring size in bytes, a power of two in [MinSize, MaxSize].
	// Default DefaultSize.
	Size int
	// BlockSize is the commit-tracking granularity, a power of two.
	// Default Size/64, at least 4 KiB.
	BlockSize int
	// FlushBytes is how many claimed bytes the flusher aims to write at a
	// time: it paces its own wake-ups by the claim rate it observes, so
	// that producers in the steady state never wake it (waking an idle
	// thread is a futex call, far dearer than a claim). A producer wakes
	// it only when the ring is more than half full, when it waits, or
	// when the flusher was idle. Default Size/4.
	FlushBytes int
	// MaxWrite bounds the bytes of one Sink.Write; space is released after
	// each. Default max(Size/8, min(Size/2, 1 MiB)): large rings release
	// space every MiB, small ones still batch half the ring per write (a
	// sink with a fixed cost per write needs the batching).
	MaxWrite int
	// FlushInterval bounds how long committed bytes wait in the ring before
	// the flusher writes them when no other trigger fires. Default
	// DefaultFlushInterval.
	FlushInterval time.Duration
	// Sync selects the flusher's own sync policy. Default SyncNever.
	Sync SyncMode
	// SyncEvery is the period of SyncInterval.
	SyncEvery time.Duration
	// BatchBytes and BatchAge bound a group-commit batch in SyncBatch mode.
	BatchBytes int
	BatchAge   time.Duration
	// FirstSeq is the sequence number of the first claimed record.
	FirstSeq uint64
	// StartPos is the log position of the first claimed byte (default 0).
	// It need not be block-aligned: a sink that writes a file can make log
	// positions equal file offsets, so ring addresses and file offsets agree
	// modulo the (4 KiB-aligned) ring, which O_DIRECT needs. Tests set it
	// near 1<<32 to exercise the packed word's wrap.
	StartPos uint64
	// Clock is the engine's source of time and timers: flush and sync
	// timers, claim deadlines, the pacing and lateness estimates. Nil means
	// the system clock. Tests set a clock.Fake and advance it instead of
	// sleeping.
	Clock clock.Clock

	// onPark, if set, is called by the flusher with true as it parks
	// between passes and with false as it wakes: a test that moves a fake
	// clock waits for it to park, so that it never moves the clock under
	// a pass (a test hook).
	onPark func(parked bool)
}

func (c *Config) fill() error {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.Size < MinSize || c.Size > MaxSize || c.Size&(c.Size-1) != 0 {
		return fmt.Errorf("engine: size %d is not a power of two in [%d, %d]", c.Size, MinSize, MaxSize)
	}
	if c.BlockSize == 0 {
		c.BlockSize = max(c.Size/64, 4<<10)
	}
	if c.BlockSize&(c.BlockSize-1) != 0 || c.BlockSize > c.Size/4 || c.BlockSize < 64 {
		return fmt.Errorf("engine: block size %d is not a power of two in [64, size/4]", c.BlockSize)
	}
	if c.FlushBytes <= 0 {
		c.FlushBytes = c.Size / 4
	}
	if c.MaxWrite <= 0 {
		c.MaxWrite = max(c.Size/8, min(c.Size/2, 1<<20))
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	switch c.Sync {
	case 0:
		c.Sync = SyncNever
	case SyncNever:
	case SyncInterval:
		if c.SyncEvery <= 0 {
			return errors.New("engine: SyncInterval needs SyncEvery > 0")
		}
	case SyncBatch:
		if c.BatchBytes <= 0 || c.BatchAge <= 0 {
			return errors.New("engine: SyncBatch needs BatchBytes > 0 and BatchAge > 0")
		}
	default:
		return fmt.Errorf("engine: unknown sync mode %d", c.Sync)
	}
	return nil
}

const (
	closedBit = 1 << 63
	seqMask   = 1<<31 - 1
)

// counter is a block's commit counter: committed bytes in the low 32 bits,
// records that start in the block in the high 32 bits. Padded so producers
// committing in neighbouring blocks do not share a cache line.
type counter struct {
	v atomic.Uint64
	_ [56]byte
}

// Claim is a reservation in the ring. Pos and Seq are the log position of its
// first byte and the sequence number of its first record.
type Claim struct {
	Pos uint64
	Seq uint64
	n   uint64
	k   uint64
}

// Len returns the number of bytes claimed.
func (c Claim) Len() int { return int(c.n) }

// Engine is a claim/commit ring drained by one flusher goroutine into a Sink.
// Claim, Put, Commit, Flush, Sync, WaitSynced and the accessors are safe for
// concurrent use; a Claim must be committed by the goroutine that made it
// before that goroutine waits on anything the flusher does.
type Engine struct {
	cfg  Config
	sink Sink
	buf  []byte // aligned to sys.BlockSize; huge pages when large (sys.HugeBuffer)
	// freeBuf releases buf. Close calls it once no claim can touch buf.
	freeBuf func() error
	mask    uint64
	half    uint64 // Size/2: a commit past released+half wakes the flusher
	shift   uint   // log2(BlockSize)
	blk     []counter

	// The fields below are grouped by who writes them, one cache line per
	// group, so that a producer's claim and commit read lines that the
	// flusher writes rarely (once per MaxWrite, or on a state change).

	_ [64]byte
	// tail is the packed claim word (see the package doc). Written by
	// producers.
	tail atomic.Uint64
	_    [56]byte
	// released is the position below which the ring may be overwritten.
	// Written only under the sink lock (see sinkMu), after resetting the
	// counters of the blocks it releases; a multiple of BlockSize, except
	// for StartPos rounded down before the first release.
	released atomic.Uint64
	// releasedSeq counts the records of the claims whose first block lies
	// below released, so it never exceeds the sequence number of a claim
	// not yet made, and lags the tail's by fewer than 2^31 (a record has at
	// least one byte and at most 2*MaxSize bytes flow between the reads in
	// claim). Stored before released.
	releasedSeq atomic.Uint64
	failed      atomic.Pointer[error]
	_           [40]byte
	// waiters counts goroutines waiting on the flusher (space, flush or
	// sync); while non-zero every commit kicks the flusher.
	waiters atomic.Int32
	// idle is set by the flusher when it sleeps with nothing to write, or
	// with nothing committed to write for a request that waits on bytes
	// still being copied; the commit that clears it kicks the flusher.
	idle atomic.Bool
	// idleTimer is set with idle when the flusher sleeps with a timer
	// armed: with nothing to write but a timer (its sync policy's, or a
	// TimedSink's) that fires later than FlushInterval, or with claimed
	// bytes not yet committed. Idle is then false.
	idleTimer atomic.Bool
	_         [58]byte
	// due is when the flusher should next be seen running (nanoseconds
	// since epoch; MaxInt64 while it sleeps until kicked): see Late.
	due atomic.Int64
	_   [56]byte
	// writeEst estimates how long a Sink.Write takes. Flusher only.
	writeEst minWindow
	epoch    time.Time
	// clk is Config.Clock; nil for the system clock, which now calls
	// directly.
	clk clock.Clock

	written atomic.Uint64 // bytes handed to the sink. Written only under the sink lock.
	synced  atomic.Uint64 // bytes covered by a completed Sink.Sync. Raised with StoreMax.

	// Requests from waiters, raised with StoreMax.
	flushReq atomic.Uint64
	syncReq  atomic.Uint64
	// arrivals counts waits begun (for group-commit gathering).
	arrivals atomic.Uint64

	// sinkMu makes the Sink's callers take turns. The flusher holds it
	// except while it waits (park, awaitCommit); SyncInline holds it for
	// its write and sync. Producers never take it. The flusher-only state
	// that SyncInline touches (written, synced, released, releasedSeq,
	// writeEst) is guarded by it.
	sinkMu sync.Mutex
	// syncBusy is set while a pipelined sync runs, on the syncer or, outside
	// the sink lock, in SyncInline: no other sync starts until it ends (the
	// engine never has two in flight).
	syncBusy atomic.Bool

	kick chan struct{} // capacity 1: a pending wake-up is one token.
	stop chan struct{}
	done chan struct{}

	// progress is broadcast whenever written, synced or released advance,
	// and on failure and close.
	progress Broadcaster

	closeOnce sync.Once
	closeErr  error
	// onCommitWait, if set, is called when the stopping flusher or Close
	// starts to wait for claims not yet committed (a test hook).
	onCommitWait func()
	// onInlineSynced, if set, is called by SyncInline once its sync has
	// returned and the sink lock is released (a test hook).
	onInlineSynced func()

	stats struct {
		flushes     atomic.Uint64
		syncs       atomic.Uint64
		inlineSyncs atomic.Uint64
		blockedNS   atomic.Int64
		blockedWait atomic.Uint64
	}
}

// New returns a running Engine that drains into sink. Close stops it.
func New(cfg Config, sink Sink) (*Engine, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	buf, release, err := sys.HugeBuffer(cfg.Size)
	if err != nil {
		return nil, fmt.Errorf("engine: ring of %d bytes: %w", cfg.Size, err)
	}
	e := &Engine{
		cfg:     cfg,
		sink:    sink,
		buf:     buf,
		freeBuf: release,
		mask:    uint64(cfg.Size - 1),
		half:    uint64(cfg.Size / 2),
		shift:   uint(bits.TrailingZeros(uint(cfg.BlockSize))),
		blk:     make([]counter, cfg.Size/cfg.BlockSize),
		clk:     cfg.Clock,
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	// The bytes of the first block before StartPos count as committed and
	// are never written: released starts at the block boundary, written at
	// StartPos.
	bs := uint64(cfg.BlockSize)
	start := cfg.StartPos
	e.blk[(start&e.mask)>>e.shift].v.Store(start & (bs - 1))
	e.tail.Store(pack(start, cfg.FirstSeq))
	e.releasedSeq.Store(cfg.FirstSeq)
	e.released.Store(start &^ (bs - 1))
	e.written.Store(start)
	e.synced.Store(start)
	e.idle.Store(true) // the flusher starts asleep: the first commit wakes it
	e.epoch = e.now()
	e.due.Store(math.MaxInt64)
	// The flusher goroutine and, for a PipelinedSink, the syncer beside
	// it. The flusher joins the syncer as it exits; Close joins the
	// flusher (done).
	f := newFlusher(e)
	if f.syncer != nil {
		go f.syncer.run()
	}
	go f.run()
	return e, nil
}

func pack(pos, seq uint64) uint64 {
	return (seq&seqMask)<<32 | pos&(1<<32-1)
}

// MaxClaim returns the largest n that Claim accepts: a claim of this size
// always fits once the flusher has drained the ring.
func (e *Engine) MaxClaim() int { return e.cfg.Size - e.cfg.BlockSize }

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Claim reserves n bytes for k records, waiting for space while the ring is
// full. It fails only when the engine is closed or failed, or n is out of
// range.
func (e *Engine) Claim(n, k int) (Claim, error) {
	return e.claim(n, k, true, time.Time{})
}

// TryClaim reserves n bytes for k records if they fit now. ok is false, with
// a nil error, when the ring is full.
func (e *Engine) TryClaim(n, k int) (c Claim, ok bool, err error) {
	c, err = e.claim(n, k, false, time.Time{})
	if err == errFull {
		return Claim{}, false, nil
	}
	return c, err == nil, err
}

// ClaimBy is Claim that gives up at deadline, a time on the engine's clock
// (Now); ok is false, with a nil error, when space did not come in time.
// A deadline already past still takes space that is free now; a zero
// deadline never passes (ClaimBy is then Claim).
func (e *Engine) ClaimBy(n, k int, deadline time.Time) (c Claim, ok bool, err error) {
	c, err = e.claim(n, k, true, deadline)
	if err == errFull {
		return Claim{}, false, nil
	}
	return c, err == nil, err
}

var errFull = errors.New("engine: full")

// FastClaim reserves n bytes for one record with a single try: ok is false
// when that try did not succeed, for any reason (the ring is full, another
// producer moved the tail, the engine is closed or failed, n is out of
// range), and nothing was reserved; the caller then calls Claim, TryClaim
// or ClaimBy, which retry, wait or say why. It is the uncontended claim of
// a producer's write path, without claim's loop and wait.
func (e *Engine) FastClaim(n int) (c Claim, ok bool) {
	r1 := e.released.Load()
	rs := e.releasedSeq.Load()
	t := e.tail.Load()
	pos := r1 + uint64(uint32(t)-uint32(r1))
	un := uint64(n)
	r2 := e.released.Load()
	// claim's checks in one test. r2 <= pos and pos+un <= r1+Size
	// together bound r2-r1 by Size, which makes pos exact (see claim); a
	// fit against r1 rather than r2 only refuses more.
	if t&closedBit != 0 || un-1 >= uint64(e.cfg.Size-e.cfg.BlockSize) || r2 > pos || pos+un > r1+uint64(e.cfg.Size) || e.failed.Load() != nil {
		return Claim{}, false
	}
	seq := rs + (uint64(uint32(t>>32)&seqMask-uint32(rs)&seqMask) & seqMask)
	if !e.tail.CompareAndSwap(t, pack(pos+un, seq+1)) {
		return Claim{}, false
	}
	return Claim{Pos: pos, Seq: seq, n: un, k: 1}, true
}

func (e *Engine) claim(n, k int, wait bool, deadline time.Time) (Claim, error) {
	if n <= 0 || n > e.MaxClaim() || k < 0 || k > n {
		return Claim{}, ErrTooLarge
	}
	size := uint64(e.cfg.Size)
	un := uint64(n)
	var waitStart time.Time
	for spins := 0; ; spins++ {
		if p := e.failed.Load(); p != nil {
			e.countBlocked(waitStart)
			return Claim{}, *p
		}
		// Reference first, then the tail, then the reference again: see the
		// package doc. r1 <= every position claimable from t, and a stale r1
		// (one older than the flow of more than Size bytes) is caught below
		// because r2 would then exceed the rebuilt position.
		r1 := e.released.Load()
		rs := e.releasedSeq.Load()
		t := e.tail.Load()
		if t&closedBit != 0 {
			e.countBlocked(waitStart)
			return Claim{}, ErrClosed
		}
		pos := r1 + uint64(uint32(t)-uint32(r1))
		seq := rs + (uint64(uint32(t>>32)&seqMask-uint32(rs)&seqMask) & seqMask)
		r2 := e.released.Load()
		if r2 > pos || r2-r1 > size {
			continue // the reference moved too far while we read; retry
		}
		if pos+un > r2+size {
			// Full.
			if !wait {
				// A producer that never waits (TryClaim, Drop mode) kicks
				// the flusher only from Commit, past half a ring. A claim
				// larger than the free space of a ring less than half full
				// is refused with no kick at all, and so would be every
				// one like it until FlushInterval: ask for the unwritten
				// bytes to be written, as Flush does.
				if pos-r2 <= e.half && pos > e.written.Load() {
					StoreMax(&e.flushReq, pos)
					e.wake()
				}
				return Claim{}, errFull
			}
			if !deadline.IsZero() && !e.now().Before(deadline) {
				e.countBlocked(waitStart) // a wait that timed out counts too
				return Claim{}, errFull
			}
			if waitStart.IsZero() {
				waitStart = e.now()
			}
			e.waitSpace(pos+un-size, deadline, spins)
			continue
		}
		if e.tail.CompareAndSwap(t, pack(pos+un, seq+uint64(k))) {
			e.countBlocked(waitStart)
			return Claim{Pos: pos, Seq: seq, n: un, k: uint64(k)}, nil
		}
	}
}

// countBlocked counts a claim that waited for space since waitStart,
// however the wait ended (space, deadline, Close, failure); nothing when
// waitStart is zero (the claim did not wait).
func (e *Engine) countBlocked(waitStart time.Time) {
	if !waitStart.IsZero() {
		e.stats.blockedNS.Add(int64(e.now().Sub(waitStart)))
		e.stats.blockedWait.Add(1)
	}
}

// waitSpace waits until released reaches need, the engine fails or closes,
// or deadline passes.
func (e *Engine) waitSpace(need uint64, deadline time.Time, spins int) {
	if spins < 4 {
		e.wake()
		runtime.Gosched()
		return
	}
	e.waiters.Add(1)
	defer e.waiters.Add(-1)
	e.wake()
	var tc <-chan time.Time
	if !deadline.IsZero() {
		timer := e.newTimer(deadline.Sub(e.now()))
		defer timer.Stop()
		tc = timer.C()
	}
	for {
		ch := e.progress.Wait()
		if e.released.Load() >= need || e.failed.Load() != nil || e.tail.Load()&closedBit != 0 {
			return
		}
		select {
		case <-ch:
		case <-tc:
			return
		}
	}
}

// Put copies p into the claim at byte offset off. REQUIRES: off+len(p) <=
// c.Len(), and c not yet committed.
func (e *Engine) Put(c Claim, off int, p []byte) {
	start := (c.Pos + uint64(off)) & e.mask
	n := copy(e.buf[start:], p)
	if n < len(p) {
		copy(e.buf, p[n:])
	}
}

// Slice returns the ring bytes of the claim's range [off, off+n), split in
// two when it wraps around the end of the ring (b is then non-empty). Write
// into them directly to avoid a staging copy; they must not be used after
// Commit. REQUIRES: off+n <= c.Len().
func (e *Engine) Slice(c Claim, off, n int) (a, b []byte) {
	start := c.Pos + uint64(off)
	return e.slices(start, start+uint64(n))
}

// Commit publishes the claim to the flusher. Every byte of the claim must
// have been written with Put.
func (e *Engine) Commit(c Claim) {
	end := c.Pos + c.n
	if (c.Pos^(end-1))>>e.shift == 0 {
		// The common case: the claim lies in one block.
		e.blk[(c.Pos&e.mask)>>e.shift].v.Add(c.n | c.k<<32)
	} else {
		e.commitBlocks(c)
	}
	// Only the producer that clears idle wakes an idle flusher and reads
	// the clock: until the flusher runs, every other commit would pay a
	// clock read and a wake-up attempt (BenchmarkWrite, sink=null).
	idle := e.idle.Load() && e.idle.CompareAndSwap(true, false)
	if idle {
		e.due.Store(e.nanos(e.now()) + int64(_lateSlack)) // see Late
	}
	if idle || end-e.released.Load() > e.half || e.waiters.Load() != 0 {
		e.wake()
	}
}

// _lateSlack is how long past its expected return the flusher may take to
// get a CPU before Late reports it.
const _lateSlack = 50 * time.Microsecond

// nanos returns t as nanoseconds since the engine's epoch (monotonic).
func (e *Engine) nanos(t time.Time) int64 { return int64(t.Sub(e.epoch)) }

// now returns the time on the engine's clock.
func (e *Engine) now() time.Time {
	if e.clk == nil {
		return time.Now()
	}
	return e.clk.Now()
}

// newTimer returns a timer of the engine's clock that fires after d.
func (e *Engine) newTimer(d time.Duration) clock.Timer {
	if e.clk == nil {
		return clock.Real().NewTimer(d)
	}
	return e.clk.NewTimer(d)
}

// Now returns the time on the engine's clock (Config.Clock). Deadlines
// passed to ClaimBy are read on this clock.
func (e *Engine) Now() time.Time { return e.now() }

// Late reports whether the flusher has work and has not run by when it was
// expected to: it is runnable but waiting for a CPU (its sink call, timer or
// wake-up is over), or it is slow. A producer that never blocks (Drop) can
// then yield its processor, once, instead of yielding on a schedule:
// goroutines that spin on every CPU keep the flusher, the one that can make
// room, off the CPU for a scheduler time slice. It costs a clock read.
func (e *Engine) Late() bool {
	var now time.Time
	if e.clk == nil { // not e.now(): too large to inline, and Late is on a Drop producer's path
		now = time.Now()
	} else {
		now = e.clk.Now()
	}
	return e.nanos(now) > e.due.Load()
}

// commitBlocks commits a claim that spans blocks: one add per block, the
// record count to the first.
func (e *Engine) commitBlocks(c Claim) {
	bs := uint64(e.cfg.BlockSize)
	pos, end := c.Pos, c.Pos+c.n
	first := true
	for pos < end {
		blockEnd := (pos | (bs - 1)) + 1
		n := min(end, blockEnd) - pos
		d := n
		if first {
			d |= c.k << 32
			first = false
		}
		e.blk[(pos&e.mask)>>e.shift].v.Add(d)
		pos += n
	}
}

// wake gives the flusher a wake-up token if it has none.
func (e *Engine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Tail returns the next position and sequence number to be claimed.
func (e *Engine) Tail() (pos, seq uint64) {
	for {
		r1 := e.released.Load()
		rs := e.releasedSeq.Load()
		t := e.tail.Load()
		pos = r1 + uint64(uint32(t)-uint32(r1))
		seq = rs + (uint64(uint32(t>>32)&seqMask-uint32(rs)&seqMask) & seqMask)
		if r2 := e.released.Load(); r2 <= pos && r2-r1 <= uint64(e.cfg.Size) {
			return pos, seq
		}
	}
}

// Written returns the number of bytes handed to the sink.
func (e *Engine) Written() uint64 { return e.written.Load() }

// Synced returns the number of bytes covered by a completed Sink.Sync.
func (e *Engine) Synced() uint64 { return e.synced.Load() }

// Progress returns a channel that is closed the next time the flusher
// makes progress: it writes, syncs or releases space, goes idle, fails, or
// the engine closes. Read it before the state it guards, then wait on it,
// and no change is missed. Unlike Flush or AwaitAtLeast it does not count
// as a waiter, so it does not wake the flusher: tests use it to watch the
// engine's own timing (with a clock.Fake) without changing it.
func (e *Engine) Progress() <-chan struct{} { return e.progress.Wait() }

// Idle reports whether the flusher is asleep with nothing to do: every
// claimed byte it has seen is written, its sync policy has nothing due, and
// no timer of its own is armed. Only a producer's commit (or a waiter)
// wakes it. Going idle is broadcast on Progress, so a test with a
// clock.Fake can wait for Idle to know that no timer will fire.
func (e *Engine) Idle() bool { return e.idle.Load() && !e.idleTimer.Load() }

// Err returns the sticky error that failed the engine, or nil.
func (e *Engine) Err() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Flush waits until every byte claimed before the call has been handed to
// the sink. Cancelling ctx abandons the wait, not the write.
func (e *Engine) Flush(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Flush")
	}
	if err := e.closedErr(); err != nil {
		return err
	}
	pos, _ := e.Tail()
	StoreMax(&e.flushReq, pos)
	return e.await(ctx, &e.written, pos, nil)
}

// Sync waits until every byte claimed before the call is durable.
func (e *Engine) Sync(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Sync")
	}
	if err := e.closedErr(); err != nil {
		return err
	}
	pos, _ := e.Tail()
	return e.WaitSynced(ctx, pos)
}

// closedErr returns the sticky error, or ErrClosed after Close, or nil.
func (e *Engine) closedErr() error {
	if err := e.Err(); err != nil {
		return err
	}
	if e.tail.Load()&closedBit != 0 {
		return ErrClosed
	}
	return nil
}

// WaitSynced waits until the bytes below pos are durable. Only a Sink.Sync
// that started after those bytes were written releases the wait. A lone
// waiter whose ctx can never be cancelled (its Done is nil, as for
// context.Background) may run that sync itself (SyncInline); a wait that
// can be cancelled never runs I/O on its caller's goroutine, so that
// cancelling it returns even while the sink is stuck.
func (e *Engine) WaitSynced(ctx context.Context, pos uint64) error {
	if ctx == nil {
		return nilContext("WaitSynced")
	}
	if e.synced.Load() >= pos || ctx.Done() == nil && e.SyncInline(pos) {
		return nil
	}
	StoreMax(&e.syncReq, pos)
	return e.await(ctx, &e.synced, pos, nil)
}

// AwaitAtLeast waits until *v >= want, the engine fails, or ctx is done. v
// is re-read each time the flusher makes progress: use it to wait on a
// counter the Sink maintains (the flusher broadcasts after its Sink calls
// return).
func (e *Engine) AwaitAtLeast(ctx context.Context, v *atomic.Uint64, want uint64) error {
	if ctx == nil {
		return nilContext("AwaitAtLeast")
	}
	return e.await(ctx, v, want, nil)
}

// AwaitAtLeastOrWake is AwaitAtLeast that also returns ErrWoken when wake
// can be received from (a nil wake never is). It lets a caller that waits
// for data be interrupted by events of its own without a goroutine or a
// context per wait.
func (e *Engine) AwaitAtLeastOrWake(ctx context.Context, v *atomic.Uint64, want uint64, wake <-chan struct{}) error {
	if ctx == nil {
		return nilContext("AwaitAtLeastOrWake")
	}
	return e.await(ctx, v, want, wake)
}

// ErrWoken is returned by AwaitAtLeastOrWake when its wake channel fired
// before the condition held.
var ErrWoken = errors.New("engine: woken")

// RequestSync asks the flusher to sync once the bytes below pos are written,
// without waiting.
func (e *Engine) RequestSync(pos uint64) {
	StoreMax(&e.syncReq, pos)
	e.wake()
}

func (e *Engine) await(ctx context.Context, v *atomic.Uint64, want uint64, wake <-chan struct{}) error {
	cond := func() bool { return v.Load() >= want }
	e.arrivals.Add(1)
	e.waiters.Add(1)
	defer e.waiters.Add(-1)
	e.wake()
	w := e.progress.Waiter()
	defer w.Release()
	done := ctx.Done()
	for {
		w.Arm()
		if cond() {
			return nil
		}
		if err := e.Err(); err != nil {
			return err
		}
		select {
		case <-e.done:
			if cond() {
				return nil
			}
			if err := e.Err(); err != nil {
				return err
			}
			return ErrClosed
		default:
		}
		if done == nil && wake == nil {
			// Nothing to watch but the broadcast: a receive on one
			// channel costs a fraction of a select on four. The flusher
			// broadcasts when it fails and before it exits, and Close
			// broadcasts after it has, so done closing is seen at the
			// checks above.
			<-w.C()
			if cond() { // the usual wake-up: return without arming again
				return nil
			}
			continue
		}
		select {
		case <-w.C():
			if cond() {
				return nil
			}
		case <-e.done:
		case <-done:
			return ctx.Err()
		case <-wake:
			if cond() {
				return nil
			}
			return ErrWoken
		}
	}
}

// SyncInline makes the bytes below pos durable on the caller's goroutine,
// and reports whether it did. It does so only when nobody else waits on the
// flusher and no sync is in flight: then it writes every committed byte, as
// the flusher's pass would, and syncs. Otherwise, or when the bytes below
// pos are not all committed yet, or the engine has failed or is closing, it
// does nothing and the caller waits as usual.
//
// It is the leader-based commit of LevelDB and raft-wal for the one case
// where it wins: a lone synced writer. A sync the flusher runs costs
// hand-offs between goroutines (to the flusher, to its syncer and back,
// and to the waiter), each a thread wake-up when the other CPU sleeps;
// done here, a sync costs none.
// With other waiters present the flusher's group commit serves them all
// with one sync, and SyncInline steps aside.
//
// A PipelinedSink's sync runs outside the sink lock, counted as the sync in
// flight (syncBusy), so the flusher goes on writing while it runs, as it
// does beside its syncer; a plain Sink's runs under the lock.
func (e *Engine) SyncInline(pos uint64) bool {
	if e.waiters.Load() != 0 || e.syncBusy.Load() || !e.sinkMu.TryLock() {
		return false
	}
	if e.syncBusy.Load() || e.failed.Load() != nil || e.tail.Load()&closedBit != 0 {
		e.sinkMu.Unlock()
		return false
	}
	if e.synced.Load() >= pos {
		e.sinkMu.Unlock()
		return true
	}
	if e.written.Load() < pos {
		// The flusher is parked: its due time (see Late) stays as it set
		// it, not the one the writes below set for a flusher that runs.
		due := e.due.Load()
		e.writeCommitted()
		e.due.Store(due)
		if e.failed.Load() != nil || e.written.Load() < pos {
			e.sinkMu.Unlock()
			return false
		}
	}
	w := e.written.Load()
	var err error
	tick := false // a TimedSink wants a call before the flusher would make one
	if ps, ok := e.sink.(PipelinedSink); ok {
		e.syncBusy.Store(true)
		fn := ps.PrepareSync()
		e.sinkMu.Unlock()
		if err = fn(); err != nil {
			e.fail(err)
		} else if tick = !e.sinkMu.TryLock(); !tick {
			// The flusher may have looked at TickIn during the sync (it
			// then holds the lock, or held it): see tickUncovered.
			tick = e.tickUncovered()
			e.sinkMu.Unlock()
		}
	} else {
		// Failed before the lock is released: the flusher, which may
		// take it next, must not sync again.
		if err = e.sink.Sync(); err != nil {
			e.fail(err)
		} else {
			tick = e.tickUncovered()
		}
		e.sinkMu.Unlock()
	}
	if e.onInlineSynced != nil {
		e.onInlineSynced()
	}
	if err == nil {
		e.stats.syncs.Add(1)
		e.stats.inlineSyncs.Add(1)
		StoreMax(&e.synced, w)
	}
	e.syncBusy.Store(false)
	e.progress.Broadcast()
	// The flusher skips a sync it wants while this one runs (see flush),
	// its policy's included (see wakeAfter), a TimedSink may want a call
	// sooner than the flusher's timer comes (a durable mark), and a
	// closing flusher waits for it (finished): bring it round.
	if err != nil || tick || e.waiters.Load() != 0 || e.syncReq.Load() > w || e.written.Load() > w || e.tail.Load()&closedBit != 0 {
		e.wake()
	}
	return err == nil
}

// tickUncovered reports whether a TimedSink wants its TimedTick more than
// FlushInterval before the parked flusher will come round (its due time,
// see park): a sync gives the sink work for later (the wal's durable
// mark), and the flusher's last look at TickIn came before the sync ended.
// A flusher that made its pass while an inline sync ran comes round within
// FlushInterval (see sleep), so a lone writer syncing again and again does
// not wake it after every sync, which would cost a wake-up and a contended
// sink lock per sync. REQUIRES: sinkMu held.
func (e *Engine) tickUncovered() bool {
	ts, ok := e.sink.(TimedSink)
	if !ok {
		return false
	}
	now := e.now()
	d := ts.TickIn(now)
	return d >= 0 && e.nanos(now)+int64(d)+int64(e.cfg.FlushInterval) < e.due.Load()
}

// StoreMax raises a to v unless it already holds v or more: a counter that
// several goroutines push forward, none back.
func StoreMax(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// Close stops new claims, waits for every claimed byte to be committed,
// writes and syncs it, and joins the flusher. REQUIRES: every successful
// Claim is committed (Close waits for it). It is idempotent; it returns
// the engine's sticky error, if any. REQUIRES: not called from a Sink
// method (see Sink).
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		for {
			t := e.tail.Load()
			if e.tail.CompareAndSwap(t, t|closedBit) {
				break
			}
		}
		// While waiters is non-zero every commit kicks: the flusher, and
		// after it this goroutine, wait for the last commits on kick.
		e.waiters.Add(1)
		defer e.waiters.Add(-1)
		close(e.stop)
		<-e.done
		e.progress.Broadcast()
		// No claim succeeds after the closed bit was set. A failed
		// flusher exits without waiting for the claims made before it;
		// their producers are still copying (a claim is committed without
		// blocking): wait for them before the ring is unmapped. The
		// flusher is gone, so the kicks are ours.
		if !e.allCommitted() {
			if e.onCommitWait != nil {
				e.onCommitWait()
			}
			for !e.allCommitted() {
				<-e.kick
			}
		}
		e.closeErr = e.Err()
		if err := e.freeBuf(); err != nil && e.closeErr == nil {
			e.closeErr = fmt.Errorf("engine: release ring: %w", err)
		}
	})
	return e.closeErr
}

// allCommitted reports whether every claimed byte has been committed.
func (e *Engine) allCommitted() bool {
	pos, _ := e.Tail()
	return e.frontier(e.written.Load()) >= pos
}

// fail records the first sink error and wakes everyone.
func (e *Engine) fail(err error) {
	e.failed.CompareAndSwap(nil, &err)
	e.progress.Broadcast()
}

// Stats is a snapshot of the engine's counters.
type Stats struct {
	Claimed, Written, Synced uint64 // log positions
	Flushes, Syncs           uint64
	// InlineSyncs counts the Syncs that a lone waiter ran on its own
	// goroutine (SyncInline).
	InlineSyncs  uint64
	BlockedWaits uint64        // claims that had to wait for space, however the wait ended
	Blocked      time.Duration // total time claims waited for space
}

// Stats returns a snapshot of the engine's counters. It is cheap and safe at
// any time.
func (e *Engine) Stats() Stats {
	// Loaded in the order opposite to the one they advance in, so that a
	// snapshot never shows Synced > Written or Written > Claimed.
	// inlineSyncs before syncs: SyncInline counts in the other order, so
	// a snapshot never shows more inline syncs than syncs.
	inline := e.stats.inlineSyncs.Load()
	synced := e.synced.Load()
	written := e.written.Load()
	pos, _ := e.Tail()
	return Stats{
		Claimed:      pos,
		Written:      written,
		Synced:       synced,
		Flushes:      e.stats.flushes.Load(),
		Syncs:        e.stats.syncs.Load(),
		InlineSyncs:  inline,
		BlockedWaits: e.stats.blockedWait.Load(),
		Blocked:      time.Duration(e.stats.blockedNS.Load()),
	}
}

// Broadcaster wakes every goroutine waiting on it. The zero value is ready
// to use. The pattern: ch := b.Wait() (or w := b.Waiter() and w.C()),
// check the condition, then block on the channel; whoever changes the
// condition calls Broadcast after changing it, so no wake-up is lost.
//
// Wait hands out a channel that Broadcast closes, so a new one is made
// for each round with waiters. A Waiter is a reusable slot instead: hot
// paths that wait once per operation (WaitSynced at one goroutine) take
// one from a pool and wait without allocating.
type Broadcaster struct {
	mu sync.Mutex
	ch chan struct{} // Protected by mu; nil when nobody waits.
	ws []*Waiter     // armed Waiters; Protected by mu.
	// spare is the slice a Broadcast in progress will hand back, or one it
	// handed back, for the next round's Waiters (no allocation per round);
	// nil while a Broadcast holds it. Protected by mu.
	spare []*Waiter
}

// A Waiter is a wake-up slot of a Broadcaster: Arm it, check the
// condition, then block on C; Broadcast sends to every armed Waiter and
// disarms it. Release returns it to the pool.
type Waiter struct {
	c chan struct{} // capacity 1
	b *Broadcaster
	// armed says w is in b.ws. It is changed only under b.mu, and set only
	// by the goroutine that owns w (Arm), so that goroutine may read it
	// without the lock: once Broadcast has cleared it, it stays clear until
	// the owner arms w again.
	armed atomic.Bool
}

var waiterPool = sync.Pool{New: func() any { return &Waiter{c: make(chan struct{}, 1)} }}

// Waiter returns a disarmed Waiter of b, from a pool.
func (b *Broadcaster) Waiter() *Waiter {
	w := waiterPool.Get().(*Waiter)
	w.b = b
	return w
}

// Arm makes the next Broadcast wake w, dropping a wake-up of an earlier
// round that was not received.
func (w *Waiter) Arm() {
	select {
	case <-w.c:
	default:
	}
	b := w.b
	b.mu.Lock()
	if !w.armed.Load() {
		w.armed.Store(true)
		b.ws = append(b.ws, w)
	}
	b.mu.Unlock()
}

// C returns the channel the next Broadcast after Arm sends on.
func (w *Waiter) C() <-chan struct{} { return w.c }

// Release disarms w and returns it to the pool; w must not be used after.
func (w *Waiter) Release() {
	b := w.b
	if w.armed.Load() { // a Waiter a Broadcast disarmed needs no lock
		b.mu.Lock()
		if w.armed.Load() {
			w.armed.Store(false)
			i := slices.Index(b.ws, w)
			b.ws[i] = b.ws[len(b.ws)-1]
			b.ws[len(b.ws)-1] = nil
			b.ws = b.ws[:len(b.ws)-1]
		}
		b.mu.Unlock()
	}
	w.b = nil
	waiterPool.Put(w)
}

// Wait returns a channel that the next Broadcast closes.
func (b *Broadcaster) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Broadcast wakes every goroutine waiting on a channel from Wait and every
// armed Waiter. It disarms the Waiters under the lock but sends to them
// after it: a woken goroutine goes straight for the lock (Release, Arm),
// and must not queue behind the rest of the round. A Waiter armed again
// in between may so get a token meant for the round before: a spurious
// wake-up, which the pattern (check the condition again) absorbs.
func (b *Broadcaster) Broadcast() {
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	ws := b.ws
	if len(ws) == 0 {
		b.mu.Unlock()
		return
	}
	for _, w := range ws {
		w.armed.Store(false)
	}
	b.ws, b.spare = b.spare[:0], nil
	b.mu.Unlock()
	for i, w := range ws {
		select {
		case w.c <- struct{}{}:
		default:
		}
		ws[i] = nil
	}
	b.mu.Lock()
	if b.spare == nil {
		b.spare = ws[:0]
	}
	b.mu.Unlock()
}
