package writer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/hist"
	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/internal/vfs"
)

// Defaults for zero RingOptions fields.
const (
	// DefaultSize is the default ring size: the memory a Ring holds.
	DefaultSize = 8 << 20
	// DefaultFlushInterval bounds how long a record waits in an idle ring
	// before the flusher writes it.
	DefaultFlushInterval = 100 * time.Millisecond
	// DefaultRetryBackoff and DefaultRetryMaxBackoff bound the pauses
	// between retries of a failed write to an io.Writer sink; the pause
	// doubles from the first to the second.
	DefaultRetryBackoff    = 10 * time.Millisecond
	DefaultRetryMaxBackoff = time.Second
	// DefaultCloseTimeout is how long Close lets a failing io.Writer sink
	// retry before it gives up on the bytes still buffered.
	DefaultCloseTimeout = 10 * time.Second
	// DefaultPerm is the permission bits OpenFile creates files with.
	DefaultPerm os.FileMode = 0o644
)

// FullPolicy says what Ring.Write does when the ring is full. The zero value
// means Block.
type FullPolicy int

// Full policies.
const (
	// Block makes Write wait for space; with RingOptions.BlockTimeout the
	// wait is bounded and a record that still does not fit is dropped and
	// counted, as with Drop.
	Block FullPolicy = iota + 1
	// Drop makes Write return at once, dropping the record and counting it
	// (Stats.DroppedRecords), when it does not fit. Write still returns
	// len(p) and a nil error: the record was accepted and dropped. A
	// dropping Write never waits for the flusher. It may yield the
	// processor once (runtime.Gosched: the goroutine is rescheduled, it
	// waits for nothing): only if the flusher is late, that is it has work
	// and has not run by when it was expected to, and then only if 50 µs
	// have passed since a producer of the Ring last yielded, so at most one
	// dropping Write in 50 µs yields. Producers dropping in a tight loop
	// would otherwise keep the flusher, the one goroutine that can make
	// room, off the CPU for a scheduler time slice. Most dropping Writes do
	// not yield. A Write that drops after its BlockTimeout does not yield:
	// it has already waited.
	Drop
)

// String returns "block" or "drop".
func (p FullPolicy) String() string {
	switch p {
	case Block:
		return "block"
	case Drop:
		return "drop"
	default:
		return "FullPolicy(" + strconv.Itoa(int(p)) + ")"
	}
}

// RingOptions configures a Ring. A nil *RingOptions and zero fields mean the
// defaults. NewRing and OpenFile copy the options; later changes to the
// caller's struct have no effect.
type RingOptions struct {
	// Size is the ring size in bytes: a power of two in [64 KiB, 512 MiB].
	// It bounds the memory of the Ring (plus 64 KiB of staging with
	// Direct) and the largest record (Size minus max(Size/64, 4 KiB);
	// see Ring.MaxRecord). Default DefaultSize (8 MiB).
	Size int
	// FlushInterval bounds how long a record waits in the ring when no
	// other trigger (a quarter of the ring filling up, Flush, Sync, Close)
	// writes it. Default DefaultFlushInterval (100 ms).
	FlushInterval time.Duration
	// SyncEvery, if positive, makes the flusher fdatasync the written bytes
	// this often. Zero syncs only on Sync and Close.
	SyncEvery time.Duration

	// Full selects what Write does when the ring is full. Default Block.
	Full FullPolicy
	// BlockTimeout, with Full == Block, bounds the wait for space; a
	// record that does not fit in time is dropped and counted. Zero waits
	// as long as it takes.
	BlockTimeout time.Duration
	// DropMarkers makes the Ring report drops in the stream: the first
	// record written after one or more drops is preceded by the line
	// "appendlog: N records dropped\n", and Close writes one for drops not
	// yet reported. Marker lines are not records (see Stats.Markers).
	DropMarkers bool
	// SplitWrites lets a Ring from NewRing hand its io.Writer bytes cut
	// anywhere, inside a record too. By default each Write call it makes
	// holds whole records only, so a writer that keeps or frames what each
	// call gives it (lumberjack's size-based rotation, a datagram socket)
	// never splits a record; the producers then note where records start,
	// once per 4 KiB. A writer that only stores bytes in order (a pipe, a
	// terminal) may save that. OpenFile's Rings write at offsets and ignore
	// it.
	SplitWrites bool

	// Direct makes OpenFile open the file with O_DIRECT. If the platform or
	// file system does not support it, OpenFile fails with an error
	// wrapping ErrDirectUnsupported. NewRing ignores it.
	Direct bool
	// Perm is the permission of a file OpenFile creates. Default
	// DefaultPerm (0644).
	Perm os.FileMode
	// Rotate, if set, makes OpenFile rotate the file (see Rotate): at a
	// record boundary, renamed to a backup and replaced by a new file,
	// backups compressed and pruned in the background. Not with Direct;
	// NewRing refuses it.
	Rotate *Rotate

	// The fields below apply to io.Writer sinks (NewRing). A failed write
	// is retried (the bytes not yet written, in order) after a pause that
	// starts at RetryBackoff and doubles up to RetryMaxBackoff; every
	// failure is counted (Stats.Retries) and passed to OnError.

	// OnError, if set, is called with every failed write to the io.Writer
	// sink and, for OpenFile with Rotate, with every error met syncing,
	// compressing or pruning rotated files, and with a rotation's finding
	// that another program deleted or renamed the file. It is called on a
	// goroutine of its own, one error at a time, in order, so it may write
	// to the Ring (a logger that logs through it) without holding up the
	// flusher, which makes the room such a write may wait for. While it
	// runs, up to 64 more errors wait for it; errors beyond those are
	// counted (Stats.Retries, Stats.RotationErrors) but not passed on. It
	// must not call the Ring's Close.
	OnError func(error)
	// RetryBackoff and RetryMaxBackoff: defaults DefaultRetryBackoff and
	// DefaultRetryMaxBackoff.
	RetryBackoff, RetryMaxBackoff time.Duration
	// RetryLimit, if positive, is the number of consecutive failures after
	// which the Ring gives up: the error becomes sticky (every later call
	// returns it) and the buffered bytes are lost. Zero retries until Close
	// gives up (see CloseTimeout).
	RetryLimit int
	// CloseTimeout bounds how long Close lets a failing io.Writer sink
	// retry; CloseContext uses its context instead. Default
	// DefaultCloseTimeout; negative means no bound.
	CloseTimeout time.Duration

	// fsys opens regular (not Direct) files in OpenFile. Tests inject
	// faults through it. Default vfs.OS().
	fsys vfs.FS
	// lockFile takes OpenFile's lock on the file. Default lockFile; tests
	// whose fsys holds no real files replace it.
	lockFile func(path string, perm os.FileMode) (io.Closer, error)
	// syncDir makes the directory entry of a file OpenFile created with
	// Direct durable (the buffered file syncs through fsys). Default
	// sys.SyncDir; tests watch or fail it.
	syncDir func(dir string) error
	// clock is the engine's clock (flush and sync timers, BlockTimeout
	// deadlines, the drop yield's schedule). Nil means the system clock;
	// tests advance a clock.Fake instead of sleeping.
	clock clock.Clock
}

// Validate reports whether the options are usable.
func (o *RingOptions) Validate() error {
	if o == nil {
		return nil
	}
	s := o.Size
	if s != 0 && (s < engine.MinSize || s > engine.MaxSize || s&(s-1) != 0) {
		return fmt.Errorf("writer: ring size %d is not a power of two in [%d, %d]", s, engine.MinSize, engine.MaxSize)
	}
	switch o.Full {
	case 0, Block, Drop:
	default:
		return fmt.Errorf("writer: unknown full policy %d", int(o.Full))
	}
	if o.Rotate != nil {
		if o.Direct {
			return errors.New("writer: Rotate with Direct is not supported")
		}
		if err := o.Rotate.validate(); err != nil {
			return err
		}
	}
	if o.FlushInterval < 0 || o.SyncEvery < 0 || o.BlockTimeout < 0 || o.RetryBackoff < 0 || o.RetryMaxBackoff < 0 || o.RetryLimit < 0 {
		return errors.New("writer: negative duration or limit in RingOptions")
	}
	return nil
}

// withDefaults returns a copy of o with zero fields filled in.
func (o *RingOptions) withDefaults() RingOptions {
	var c RingOptions
	if o != nil {
		c = *o
	}
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.Rotate != nil {
		r := *c.Rotate
		c.Rotate = &r
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.Full == 0 {
		c.Full = Block
	}
	if c.Perm == 0 {
		c.Perm = DefaultPerm
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.RetryMaxBackoff == 0 {
		c.RetryMaxBackoff = DefaultRetryMaxBackoff
	}
	c.RetryMaxBackoff = max(c.RetryMaxBackoff, c.RetryBackoff)
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.fsys == nil {
		c.fsys = vfs.OS()
	}
	if c.lockFile == nil {
		c.lockFile = lockFile
	}
	if c.syncDir == nil {
		c.syncDir = sys.SyncDir
	}
	return c
}

// _maxPendingErrors bounds the errors that wait for a running OnError.
const _maxPendingErrors = 64

// reporter passes errors to OnError on a goroutine of its own. An OnError
// that writes to the Ring waits for room when the Ring is full, and only
// the flusher makes room: called on the flusher (or on the closer, which
// the flusher's Sync waits for), it would hang the Ring for good.
type reporter struct {
	w       *worker[error]
	pending atomic.Int32 // errors queued or being reported
}

// startReporter starts the reporter of o.OnError, if set, and puts its
// report in o.OnError for the sinks to call. It returns nil without
// OnError.
func (o *RingOptions) startReporter() *reporter {
	if o.OnError == nil {
		return nil
	}
	fn := o.OnError
	rep := &reporter{}
	rep.w = newWorker(func(err error) {
		defer rep.pending.Add(-1)
		fn(err)
	})
	o.OnError = rep.report
	return rep
}

// report queues err for OnError, unless _maxPendingErrors errors are
// waiting already. It never blocks.
func (r *reporter) report(err error) {
	if r.pending.Add(1) > _maxPendingErrors {
		r.pending.Add(-1)
		return
	}
	r.w.push(err)
}

// stop reports the errors queued, then joins the goroutine. A nil
// reporter does nothing.
func (r *reporter) stop() {
	if r != nil {
		r.w.stop()
	}
}

// ringSink is an engine.Sink that the Ring releases after the engine
// stopped.
type ringSink interface {
	engine.Sink
	// close releases the sink. It is called once, after the engine's
	// flusher has exited.
	close() error
}

// Ring is an asynchronous io.Writer for logs: Write copies the record into a
// lock-free ring buffer and returns; one flusher goroutine writes the
// buffered records to the sink in large batches. See the package doc for
// the durability contract.
//
// Every Write is one record: it is written whole, never split or
// interleaved with another, and the sink receives records in the order
// their Write calls reserved space (one total order across goroutines).
// Write copies p; the caller may reuse it as soon as Write returns. All
// methods are safe for concurrent use.
type Ring struct {
	e       *engine.Engine
	sink    ringSink
	meter   *meter
	drop    bool          // Full == Drop
	timeout time.Duration // BlockTimeout with Block
	markers bool
	cut     *marks // record starts, for rotation and NewRing's whole-record writes; nil for a file without Rotate
	// sinkFailed, if not nil, is set by the sink when it fails off the
	// flusher (a rotated file's fdatasync, on the closer): the engine
	// learns of such a failure only when its flusher next calls the
	// sink, which a Ring with nothing left to write never does, so
	// Write, Flush, Sync, Reopen and Close check it themselves (state).
	// Nil for sinks that fail only on the flusher.
	sinkFailed *atomic.Bool
	opts       RingOptions

	_ [64]byte
	// pending counts drops not yet reported by a marker line.
	pending      atomic.Uint64
	_            [56]byte
	dropped      atomic.Uint64
	droppedBytes atomic.Uint64
	lastYield    atomic.Int64 // UnixNano of the last yield to a late flusher
	markersN     atomic.Uint64
	markerBytes  atomic.Uint64

	rep    *reporter // calls OnError; nil without it
	lock   io.Closer // OpenFile's lock on the file; nil for NewRing
	closed atomic.Bool
	// reportMu is held for reading by a Write that may take pending's
	// report, and for writing by Close while it takes the rest for its
	// final marker.
	reportMu   sync.RWMutex
	closeOnce  sync.Once
	closeErr   error
	giveUpOnce sync.Once
	giveUp     chan struct{} // closed when Close stops waiting for a failing sink
}

var (
	_ Writer = (*Ring)(nil)
	_ interface {
		io.Writer
		Sync() error
	} = (*Ring)(nil) // zapcore.WriteSyncer
	_ interface{ Flush(context.Context) error } = (*Ring)(nil)
)

// NewRing returns a Ring that writes to w, which is typically a network
// connection, a pipe or os.Stderr. w receives one Write call per batch, from
// one goroutine at a time; a failed write is retried (see RingOptions.OnError).
// Sync calls w.Sync if w has one (fdatasync for an *os.File). The Ring does
// not close w. To write a file, OpenFile is faster (positional writes,
// optional O_DIRECT).
func NewRing(w io.Writer, opts *RingOptions) (*Ring, error) {
	if w == nil {
		return nil, errors.New("writer: NewRing with a nil io.Writer")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts != nil && opts.Rotate != nil {
		return nil, errors.New("writer: NewRing cannot rotate an io.Writer: Rotate needs OpenFile")
	}
	o := opts.withDefaults()
	rep := o.startReporter()
	giveUp := make(chan struct{})
	s := newStreamSink(w, &o, giveUp)
	if !o.SplitWrites {
		s.marks, s.maxClaim = newMarks(o.Size), maxClaim(o.Size)
	}
	r, err := newRing(s, o, giveUp)
	if err != nil {
		rep.stop()
		return nil, err
	}
	r.cut = s.marks
	r.rep = rep
	return r, nil
}

// OpenFile opens (creating if needed) the file at path and returns a Ring
// that appends to it. The Ring owns the file: Close syncs and closes it.
// OpenFile syncs the file's directory, so a new file's name survives a
// power cut together with the records Sync acknowledged.
//
// The Ring is the only writer of the file while open: OpenFile takes an
// exclusive lock on it (flock(2)), released by Close, before writing
// anything. If another writer (a Ring, an Mmap, in this process or
// another) holds it, OpenFile fails with an error wrapping ErrInUse that
// names the file and the holder's pid. See the package doc for many
// processes writing one log.
//
// With opts.Rotate the Ring rotates the file itself (see Rotate and the
// package doc); a symbolic link at path is then followed once, here: the
// file it names rotates, in that file's directory, and the link is left
// naming the live file. Without Direct, Ring.Reopen reopens the file after
// logrotate renamed it. The Ring refuses to write on after another program
// truncated the file (ErrTruncated).
//
// With opts.Direct the file is written with O_DIRECT in whole 4 KiB blocks
// straight from the ring (only the partial blocks at the ends of a flush
// are copied); the last, partial block is rewritten in place by the next
// flush, so the file never has padding in the middle.
// Until Close truncates it to its true length, the file's size is rounded up
// to a block with zero bytes (a crash can leave up to 4095 zero bytes at the
// end).
func OpenFile(path string, opts *RingOptions) (*Ring, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	if !o.Direct {
		return openRotating(path, o)
	}
	s, lock, err := lockedOpen(o.lockFile, path, o.Perm, func() (*directSink, error) { return openDirectSink(path, o.Perm, o.syncDir) })
	if err != nil {
		return nil, err
	}
	r, err := newRing(s, o, make(chan struct{}))
	if err != nil {
		s.close()
		lock.Close()
		return nil, err
	}
	r.lock = lock
	return r, nil
}

// openRotating is OpenFile without Direct: the sink takes the file's lock
// and that of every later file (Rotate, Reopen).
func openRotating(path string, o RingOptions) (*Ring, error) {
	var m *marks
	if o.Rotate != nil {
		m = newMarks(o.Size)
	}
	rep := o.startReporter()
	s, err := openRotSink(path, &o, m, maxClaim(o.Size))
	if err != nil {
		rep.stop()
		return nil, err
	}
	r, err := newRing(s, o, make(chan struct{}))
	if err != nil {
		s.close()
		rep.stop()
		return nil, err
	}
	r.cut = m
	r.rep = rep
	r.sinkFailed = &s.closeFailed
	s.startSchedule(func() uint64 { pos, _ := r.e.Tail(); return pos })
	return r, nil
}

// maxClaim is engine.Engine.MaxClaim for a ring of size bytes with the
// default block size.
func maxClaim(size int) int { return size - max(size/64, 4<<10) }

func newRing(s ringSink, o RingOptions, giveUp chan struct{}) (*Ring, error) {
	cfg := engine.Config{
		Size:          o.Size,
		FlushInterval: o.FlushInterval,
		Sync:          engine.SyncNever,
		Clock:         o.clock,
	}
	if o.SyncEvery > 0 {
		cfg.Sync, cfg.SyncEvery = engine.SyncInterval, o.SyncEvery
	}
	if d, ok := s.(*directSink); ok {
		// Log positions are file offsets, so the aligned part of every
		// flush is aligned in the ring too (see directSink).
		cfg.StartPos = uint64(d.size())
		// O_DIRECT writes go to the device one at a time: the larger
		// they are, the less the gaps between them cost
		// (BenchmarkFileLarge). Half the ring: producers fill one half
		// while the other is written.
		cfg.MaxWrite = o.Size / 2
	}
	if rs, ok := s.(*rotSink); ok {
		cfg.StartPos = rs.startPos()
	}
	m := &meter{inner: s}
	e, err := engine.New(cfg, m)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	m.e.Store(e)
	r := &Ring{
		e:       e,
		sink:    s,
		meter:   m,
		drop:    o.Full == Drop,
		markers: o.DropMarkers,
		opts:    o,
		giveUp:  giveUp,
	}
	if o.Full == Block {
		r.timeout = o.BlockTimeout
	}
	return r, nil
}

// Write writes p as one record. It returns len(p) and a nil error when the
// record was stored in the ring, or dropped and counted under the Drop
// policy (or a BlockTimeout). It returns ErrClosed after Close, ErrTooLarge
// for a record the ring cannot hold, and the sticky error after a sink
// failure. An empty p is not a record: Write returns 0 and writes nothing.
//
// With DropMarkers, the record that follows drops carries the marker line
// in the same claim, ahead of it, so the marker lands where writing
// resumed. Every record, marked or not, takes one claim.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 || r.sinkFailed != nil && r.sinkFailed.Load() || r.markers && r.pending.Load() != 0 {
		return r.write(p)
	}
	// The common case: no marker to add, and the first try at the claim
	// succeeds (BenchmarkProducer).
	c, ok := r.e.FastClaim(n)
	if !ok {
		return r.write(p)
	}
	r.e.Put(c, 0, p)
	if r.cut != nil {
		r.cut.mark(c.Pos, n)
	}
	r.e.Commit(c)
	return n, nil
}

// write is Write for every case: an empty p, a marker to add, a claim that
// retries, waits or drops.
func (r *Ring) write(p []byte) (int, error) {
	n := len(p)
	if n == 0 || r.closed.Load() || r.sinkFailed != nil && r.sinkFailed.Load() {
		// After Close began, no record is dropped: a drop it did not
		// see before its final marker would go unreported.
		return 0, r.state()
	}
	var (
		k    uint64 // drops reported by a marker ahead of p; 0: no marker
		mlen int    // the marker's length
	)
	if r.markers && r.pending.Load() != 0 {
		// Close takes what is pending for its final marker only once no
		// Write holds a report it took: one whose claim then failed
		// because Close had closed the engine would leave drops counted
		// but never reported.
		r.reportMu.RLock()
		defer r.reportMu.RUnlock()
		if r.closed.Load() {
			return 0, r.state()
		}
		k, mlen = r.takePending(n)
	}
	c, ok, err := r.claim(mlen + n)
	if !ok {
		if k != 0 {
			r.pending.Add(k) // still to be reported
		}
		if err != nil {
			return 0, mapErr(err)
		}
		r.countDrop(n)
		return n, nil
	}
	if k != 0 {
		r.putMarker(c, k, mlen)
	}
	r.e.Put(c, mlen, p)
	if r.cut != nil {
		r.cut.mark(c.Pos, c.Len())
	}
	r.e.Commit(c)
	return n, nil
}

// claim reserves n bytes for one record under the full policy: Block
// waits for space as long as it takes; Drop does not wait; Block with a
// BlockTimeout tries first, then waits until the timeout (reading the
// clock only when the ring is full). ok is false with a nil error when the
// record is to be dropped.
func (r *Ring) claim(n int) (c engine.Claim, ok bool, err error) {
	if r.drop || r.timeout > 0 {
		c, ok, err = r.e.TryClaim(n, 1)
		if !ok && err == nil && !r.drop {
			c, ok, err = r.e.ClaimBy(n, 1, r.e.Now().Add(r.timeout))
		}
		return c, ok, err
	}
	c, err = r.e.Claim(n, 1)
	return c, err == nil, err
}

// _dropYieldEvery bounds how often dropping producers yield the processor
// to a late flusher (all producers together).
const _dropYieldEvery = 50 * time.Microsecond

// countDrop counts one dropped record of n bytes. In Drop mode it then
// yields the processor (runtime.Gosched) if the flusher is late
// (engine.Late), at most once per _dropYieldEvery among all producers:
// producers that never wait would otherwise keep the flusher goroutine, the
// one that can make room, off the CPU for a whole scheduler time slice.
// Yielding only when the flusher is late keeps yields rare, so they stay
// out of the latency tail. BenchmarkDropLatency measures the share dropped
// and the latency tail of this schedule (see BENCHMARKS.md for it against
// a yield every 256 drops and one every 200 µs).
func (r *Ring) countDrop(n int) {
	r.dropped.Add(1)
	r.droppedBytes.Add(uint64(n))
	if r.markers {
		r.pending.Add(1)
	}
	if r.drop && r.e.Late() {
		now := r.e.Now().UnixNano()
		last := r.lastYield.Load()
		if now-last >= int64(_dropYieldEvery) && r.lastYield.CompareAndSwap(last, now) {
			runtime.Gosched()
		}
	}
}

// _markerMax is enough for the longest marker line.
const _markerMax = 64

// appendMarker appends the drop marker for k records to b.
func appendMarker(b []byte, k uint64) []byte {
	b = append(b, "appendlog: "...)
	b = strconv.AppendUint(b, k, 10)
	return append(b, " records dropped\n"...)
}

// takePending takes the report of the pending drops for a record of n
// bytes and returns their number k and the length of their marker line.
// It returns k == 0 if another producer took the report first, or if the
// record leaves no room for the marker in one claim; the count then stays
// pending.
func (r *Ring) takePending(n int) (k uint64, mlen int) {
	k = r.pending.Swap(0)
	if k == 0 {
		return 0, 0
	}
	var buf [_markerMax]byte
	mlen = len(appendMarker(buf[:0], k))
	if n+mlen > r.e.MaxClaim() {
		r.pending.Add(k)
		return 0, 0
	}
	return k, mlen
}

// putMarker copies the marker for k drops, mlen bytes, to the front of c
// and counts it.
func (r *Ring) putMarker(c engine.Claim, k uint64, mlen int) {
	var buf [_markerMax]byte
	m := appendMarker(buf[:0], k)
	r.e.Put(c, 0, m[:mlen])
	r.markersN.Add(1)
	r.markerBytes.Add(uint64(mlen))
}

// state returns the error a call would get now: the sticky error, ErrClosed
// or nil.
func (r *Ring) state() error {
	if err := r.Err(); err != nil {
		return err
	}
	if r.closed.Load() {
		return ErrClosed
	}
	return nil
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrClosed):
		return ErrClosed
	case errors.Is(err, engine.ErrTooLarge):
		return ErrTooLarge
	}
	return err
}

// Flush waits until every record written before the call has been handed
// to the sink (the OS, for a file). Cancelling ctx abandons the wait, not
// the write.
func (r *Ring) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Ring.Flush")
	}
	if err := r.state(); err != nil {
		return err
	}
	return mapErr(r.e.Flush(ctx))
}

// Sync writes every record written before the call and makes it durable
// (fdatasync for files, w.Sync for an io.Writer that has it). It is
// SyncContext with a background context; with it a Ring is a
// zapcore.WriteSyncer.
func (r *Ring) Sync() error { return r.SyncContext(context.Background()) }

// SyncContext is Sync that stops waiting when ctx is done. The sync itself
// runs on the flusher goroutine and covers every waiter (group commit).
// While an io.Writer sink keeps failing, Sync waits for it to recover (or
// for RetryLimit); bound the wait with SyncContext.
func (r *Ring) SyncContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Ring.SyncContext")
	}
	if err := r.state(); err != nil {
		return err
	}
	return mapErr(r.e.Sync(ctx))
}

// Close stops accepting records, writes and syncs every record accepted
// before it, joins the flusher goroutine and, for OpenFile, closes the file.
// A failing io.Writer sink is retried for at most RingOptions.CloseTimeout.
// Close is idempotent: later calls return the first call's result. Writes
// racing with Close either succeed (and are written) or return ErrClosed.
func (r *Ring) Close() error {
	ctx := context.Background()
	if r.opts.CloseTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.CloseTimeout)
		defer cancel()
	}
	return r.CloseContext(ctx)
}

// CloseContext is Close with the wait for a failing io.Writer sink bounded
// by ctx instead of CloseTimeout: when ctx is done the sink stops retrying,
// the bytes still buffered are lost (Stats.QueuedBytes counts them) and
// CloseContext returns the sink's error. A sink that is making progress is
// not interrupted, but a write blocked in a sink with SetWriteDeadline (a
// net.Conn whose peer stopped reading) is: the deadline is set in the past,
// and left so, to make the write return. A write blocked in any other sink
// (an io.Writer without SetWriteDeadline, a file on a hung disk) holds
// CloseContext until it returns. A nil ctx is refused (ErrNilContext) and
// leaves the Ring open.
func (r *Ring) CloseContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Ring.CloseContext")
	}
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		stop := context.AfterFunc(ctx, r.abandon)
		defer stop()
		if r.markers {
			// Waits for the Writes that took a report of drops to write
			// their marker or put the report back (see write).
			r.reportMu.Lock()
			if k := r.pending.Swap(0); k > 0 {
				r.writeFinalMarker(k)
			}
			r.reportMu.Unlock()
		}
		err := mapErr(r.e.Close())
		if err == ErrClosed {
			err = nil
		}
		if cerr := r.sink.close(); err == nil {
			err = cerr
		}
		if err == nil {
			// A rotated file's fdatasync that failed after the
			// flusher's last call to the sink: the closer has stopped,
			// so every such failure is in.
			err = r.Err()
		}
		if r.lock != nil {
			// After the sink's last write and sync: no other writer
			// can open the file before this one is done with it.
			if lerr := r.lock.Close(); err == nil {
				err = lerr
			}
		}
		r.rep.stop() // after the last error was reported
		r.closeErr = err
	})
	return r.closeErr
}

// writeFinalMarker reports k drops at Close. It counts as no record.
func (r *Ring) writeFinalMarker(k uint64) {
	var buf [_markerMax]byte
	m := appendMarker(buf[:0], k)
	c, err := r.e.Claim(len(m), 0)
	if err != nil {
		return // failed or closed: the drops stay counted in Stats
	}
	r.e.Put(c, 0, m)
	if r.cut != nil {
		r.cut.mark(c.Pos, c.Len())
	}
	r.e.Commit(c)
	r.markersN.Add(1)
	r.markerBytes.Add(uint64(len(m)))
}

// abandon tells a retrying sink to give up, and interrupts a write blocked
// in it.
func (r *Ring) abandon() {
	r.giveUpOnce.Do(func() {
		close(r.giveUp)
		if s, ok := r.sink.(*streamSink); ok {
			s.abandon()
		}
	})
}

// Reopen closes the Ring's file and opens its path again, for logrotate's
// rename-and-create (its default "create" mode, then a postrotate script
// that sends the process a SIGHUP) and for SIGHUP handlers: records
// written before Reopen is called go to the old file, wherever it was
// renamed, and records written after it returns go to the file now at the
// path (created if missing); records written meanwhile go to one or the
// other, whole. Reopen returns once the old file has been written, synced
// and closed, and its lock released; the new file is locked as OpenFile
// locks it. If nothing was renamed, the file is simply opened again, and
// goes on toward Rotate.MaxBytes from where it began. A file Reopen finds
// at the path with bytes in it already is appended to, and those bytes do
// not count toward MaxBytes (OpenFile counts them: it starts a file at its
// size).
//
// Only a Ring from OpenFile without Direct can reopen; for others Reopen
// returns an error and does nothing. If the new file cannot be opened (a
// directory made read-only, another writer holding the file), Reopen
// returns the error and the Ring writes on to the file it has, whole
// records, wherever it was renamed: nothing is lost, and Reopen may be
// called again.
func (r *Ring) Reopen() error {
	s, ok := r.sink.(*rotSink)
	if !ok {
		return errors.New("writer: Reopen needs a Ring opened by OpenFile without Direct")
	}
	if err := r.state(); err != nil {
		return err
	}
	req := s.requestReopen(func() uint64 { pos, _ := r.e.Tail(); return pos })
	if err := r.e.Flush(context.Background()); err != nil {
		return mapErr(err)
	}
	gen, err := s.finishReopen(req)
	if err != nil {
		return err
	}
	return s.awaitClosed(gen)
}

// MaxRecord returns the size of the largest record Write accepts.
func (r *Ring) MaxRecord() int { return r.e.MaxClaim() }

// Err returns the sticky error that stopped the Ring (a failed file write or
// fdatasync, a rotated or reopened file's failed fdatasync, or an io.Writer
// sink that was given up on), or nil.
func (r *Ring) Err() error {
	if err := r.e.Err(); err != nil {
		return err
	}
	if r.sinkFailed != nil && r.sinkFailed.Load() {
		return r.sink.(*rotSink).failure()
	}
	return nil
}

// Stats returns a snapshot of the Ring's counters. It is cheap (a few
// atomic loads) and safe at any time, including after Close.
func (r *Ring) Stats() Stats {
	tailPos, tailSeq := r.e.Tail()
	es := r.e.Stats()
	written := r.e.Written()
	// Byte counts, not log positions.
	start := r.e.Config().StartPos
	tailPos -= start
	written -= start
	if written >= tailPos {
		// Every record claimed before the tail was read is written. Later
		// calls report at least this: WrittenRecords is a counter.
		engine.StoreMax(&r.meter.records, tailSeq)
	}
	wrecs := r.meter.records.Load()
	dropped, droppedBytes := r.dropped.Load(), r.droppedBytes.Load()
	markerBytes := r.markerBytes.Load()
	return Stats{
		Records:        tailSeq + dropped,
		Bytes:          tailPos - min(markerBytes, tailPos) + droppedBytes,
		WrittenRecords: wrecs,
		WrittenBytes:   written - min(markerBytes, written),
		DroppedRecords: dropped,
		DroppedBytes:   droppedBytes,
		Markers:        r.markersN.Load(),
		MarkerBytes:    markerBytes,
		QueuedBytes:    tailPos - min(written, tailPos),
		Flushes:        es.Flushes,
		FlushLatency:   r.meter.latency.Snapshot(),
		Syncs:          es.Syncs,
		BlockedWaits:   es.BlockedWaits,
		Blocked:        es.Blocked,
		Retries:        r.meter.retries(),
		Rotations:      r.meter.rotations(),
		Reopens:        r.meter.reopens(),
		RotationErrors: r.meter.rotationErrors(),
	}
}

// meter wraps the Ring's sink to time its writes and follow how many
// records it has written. Its Write and Sync run on the flusher goroutine.
type meter struct {
	inner   ringSink
	e       atomic.Pointer[engine.Engine]
	latency hist.Atomic
	// records is the number of records wholly written, as of the last
	// write that ended at the tail or the last Stats that found every
	// claimed byte written (a lower bound otherwise). It never decreases.
	records atomic.Uint64
}

func (m *meter) Write(pos uint64, a, b []byte) error {
	start := time.Now()
	err := m.inner.Write(pos, a, b)
	m.latency.Record(time.Since(start))
	if err != nil {
		return err
	}
	if e := m.e.Load(); e != nil {
		end := pos + uint64(len(a)+len(b))
		if tp, ts := e.Tail(); tp == end {
			engine.StoreMax(&m.records, ts) // Stats may have raised it past ts meanwhile
		}
	}
	return nil
}

func (m *meter) Sync() error { return m.inner.Sync() }

func (m *meter) rotations() uint64 {
	if s, ok := m.inner.(*rotSink); ok {
		return s.rotations.Load()
	}
	return 0
}

func (m *meter) reopens() uint64 {
	if s, ok := m.inner.(*rotSink); ok {
		return s.reopens.Load()
	}
	return 0
}

func (m *meter) rotationErrors() uint64 {
	if s, ok := m.inner.(*rotSink); ok {
		return s.errs.Load()
	}
	return 0
}

func (m *meter) retries() uint64 {
	if s, ok := m.inner.(*streamSink); ok {
		return s.retries.Load()
	}
	return 0
}
