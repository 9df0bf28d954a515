package writer

import (
	"context"
	"fmt"
	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/engine/clock"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for zero SlabOptions fields.
const (
	DefaultSlabs    = 4
	DefaultSlabSize = 1 << 20
)

// MaxSlabMemory bounds a Slab's memory, Slabs*SlabSize: the largest ring a
// Ring may have (engine.MaxSize).
const MaxSlabMemory = engine.MaxSize

// SlabOptions configures a Slab. A nil *SlabOptions and zero fields mean the
// defaults.
type SlabOptions struct {
	// Slabs is the number of slabs, at least 2. Default DefaultSlabs.
	Slabs int
	// SlabSize is the size of each slab in bytes; it bounds the batch
	// written by one Write call on the sink. Records larger than a slab
	// are written directly, in order. Default DefaultSlabSize (1 MiB).
	// Slabs*SlabSize is at most MaxSlabMemory.
	SlabSize int
	// FlushInterval bounds how long a record waits in a slab that is not
	// filling up. Default DefaultFlushInterval.
	FlushInterval time.Duration

	// clock times FlushInterval. Nil means the system clock; tests advance
	// a clock.Fake instead of sleeping.
	clock clock.Clock
}

// slab is one buffer of the pool.
type slab struct {
	batch
	seq uint64 // order in which it was handed to the flusher, from 1
}

// Slab is the classic double (N-) buffering writer: producers append
// records to the current slab under a mutex; a full slab is handed to a
// flusher goroutine, which writes it with one Write call on the sink and
// returns it to the pool. When every slab is in flight, producers wait. The
// flusher also hands off a partly filled slab every FlushInterval.
//
// Memory is Slabs*SlabSize. A write error is sticky: later calls return it
// and the slabs still queued are discarded. Slab does not close w.
type Slab struct {
	w        io.Writer
	sync     func() error
	size     int
	interval time.Duration
	clock    clock.Clock
	c        flushCounters

	// free holds every slab neither being filled nor queued, full the
	// slabs handed to the flusher, in order. Each has capacity Slabs, the
	// number of slabs there are, so sends never block.
	free chan *slab
	full chan *slab
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		cur            *slab // being filled; nil until a producer takes a free one
		seq            uint64
		closed         bool
		records, bytes uint64 // accepted
	}

	// flushed is the seq of the last slab the flusher finished with.
	flushed  atomic.Uint64
	progress engine.Broadcaster
	err      atomic.Pointer[error] // sticky sink error
	// syncMu runs syncs one at a time, so that none starts after one
	// failed (a second fsync would report success for what the first lost).
	syncMu sync.Mutex

	blockedWaits atomic.Uint64
	blockedNS    atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// NewSlab returns a Slab writing to w and starts its flusher goroutine;
// Close stops it.
func NewSlab(w io.Writer, opts *SlabOptions) (*Slab, error) {
	var o SlabOptions
	if opts != nil {
		o = *opts
	}
	if o.Slabs == 0 {
		o.Slabs = DefaultSlabs
	}
	if o.SlabSize == 0 {
		o.SlabSize = DefaultSlabSize
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Slabs < 2 || o.SlabSize < 1 || o.FlushInterval < 0 {
		return nil, fmt.Errorf("writer: invalid SlabOptions %+v", o)
	}
	if o.SlabSize > MaxSlabMemory/o.Slabs {
		return nil, fmt.Errorf("writer: SlabOptions: %d slabs of %d bytes exceed MaxSlabMemory (%d bytes)", o.Slabs, o.SlabSize, MaxSlabMemory)
	}
	if o.clock == nil {
		o.clock = clock.Real()
	}
	s := &Slab{
		w:        w,
		sync:     syncFunc(w),
		size:     o.SlabSize,
		interval: o.FlushInterval,
		clock:    o.clock,
		free:     make(chan *slab, o.Slabs),
		full:     make(chan *slab, o.Slabs),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for range o.Slabs {
		s.free <- &slab{batch: batch{buf: make([]byte, 0, o.SlabSize)}}
	}
	go s.run()
	return s, nil
}

func (s *Slab) loadErr() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Slab) fail(err error) {
	s.err.CompareAndSwap(nil, &err)
	s.progress.Broadcast()
}

func (s *Slab) stateLocked() error {
	if err := s.loadErr(); err != nil {
		return err
	}
	if s.mu.closed {
		return ErrClosed
	}
	return nil
}

// Write appends p to the current slab as one record. An empty p is not a
// record: Write returns 0 and counts nothing.
func (s *Slab) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stateLocked(); err != nil || len(p) == 0 {
		return 0, err
	}
	if len(p) > s.size {
		if err := s.writeLargeLocked(p); err != nil {
			return 0, err
		}
	} else {
		cur := s.mu.cur
		if cur == nil || !cur.fits(len(p)) {
			s.handoffLocked()
			cur = s.takeLocked()
		}
		cur.add(p)
	}
	s.mu.records++
	s.mu.bytes += uint64(len(p))
	return len(p), nil
}

// handoffLocked queues the current slab, if it holds anything, for the
// flusher. REQUIRES: s.mu held.
func (s *Slab) handoffLocked() {
	cur := s.mu.cur
	if cur == nil || len(cur.buf) == 0 {
		return
	}
	s.mu.seq++
	cur.seq = s.mu.seq
	s.full <- cur
	s.mu.cur = nil
}

// takeLocked makes a free slab current, waiting for the flusher to return
// one if they are all in flight. REQUIRES: s.mu held, s.mu.cur empty or nil.
func (s *Slab) takeLocked() *slab {
	if s.mu.cur != nil {
		return s.mu.cur
	}
	var sl *slab
	select {
	case sl = <-s.free:
	default:
		start := time.Now()
		sl = <-s.free
		s.blockedWaits.Add(1)
		s.blockedNS.Add(int64(time.Since(start)))
	}
	s.mu.cur = sl
	return sl
}

// writeLargeLocked writes a record larger than a slab directly, after every
// queued slab. REQUIRES: s.mu held.
func (s *Slab) writeLargeLocked(p []byte) error {
	s.handoffLocked()
	target := s.mu.seq
	err := await(context.Background(), &s.progress, func() (bool, error) {
		done := s.flushed.Load() >= target
		err := s.loadErr()
		return done || err != nil, err
	})
	if err != nil {
		return err
	}
	if err := s.c.write(s.w, p, 1); err != nil {
		err = fmt.Errorf("writer: write: %w", err)
		s.fail(err)
		return err
	}
	return nil
}

// run is the flusher goroutine.
func (s *Slab) run() {
	defer close(s.done)
	timer := s.clock.NewTimer(s.interval)
	defer timer.Stop()
	for {
		select {
		case sl := <-s.full:
			s.writeSlab(sl)
		case <-timer.C():
			s.idleFlush()
			timer.Reset(s.interval)
		case <-s.stop:
			// Close queued the last slab before closing stop.
			for {
				select {
				case sl := <-s.full:
					s.writeSlab(sl)
				default:
					return
				}
			}
		}
	}
}

// idleFlush hands off the current slab. Producers may hold s.mu while they
// wait for a free slab, which only this goroutine returns, so it must not
// block on s.mu: it keeps writing queued slabs until the lock is free.
func (s *Slab) idleFlush() {
	for !s.mu.TryLock() {
		select {
		case sl := <-s.full:
			s.writeSlab(sl)
		case <-s.stop:
			return // Close queues the last slab itself
		case <-time.After(50 * time.Microsecond): // a pause between tries, on the system clock
		}
	}
	if !s.mu.closed {
		s.handoffLocked()
	}
	s.mu.Unlock()
}

// writeSlab writes sl (unless the sink already failed) and returns it to
// the pool.
func (s *Slab) writeSlab(sl *slab) {
	if s.loadErr() == nil {
		if err := s.c.write(s.w, sl.buf, sl.recs); err != nil {
			s.fail(fmt.Errorf("writer: write: %w", err))
		}
	}
	sl.reset()
	s.flushed.Store(sl.seq)
	s.progress.Broadcast()
	s.free <- sl
}

// Flush waits until every record written before the call has been handed
// to the sink, or ctx is done.
func (s *Slab) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Slab.Flush")
	}
	s.mu.Lock()
	if err := s.stateLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.handoffLocked()
	target := s.mu.seq
	s.mu.Unlock()
	return await(ctx, &s.progress, func() (bool, error) {
		// A failed slab sets the error before it counts as flushed.
		done := s.flushed.Load() >= target
		err := s.loadErr()
		return done || err != nil, err
	})
}

// Sync flushes, then syncs the sink (fdatasync for an *os.File) in the
// calling goroutine. A sync error is sticky.
func (s *Slab) Sync() error {
	if err := s.Flush(context.Background()); err != nil {
		return err
	}
	return s.doSync()
}

func (s *Slab) doSync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := s.loadErr(); err != nil {
		return err
	}
	if err := s.sync(); err != nil {
		err = fmt.Errorf("writer: sync: %w", err)
		s.fail(err)
		return err
	}
	s.c.syncs.Add(1)
	return nil
}

// Close writes every slab, stops the flusher, syncs, and makes later calls
// return ErrClosed (or the sticky error). It is idempotent.
func (s *Slab) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.handoffLocked()
		s.mu.Unlock()
		close(s.stop)
		<-s.done
		err := s.loadErr()
		if err == nil {
			err = s.doSync()
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Stats returns the counters.
func (s *Slab) Stats() Stats {
	s.mu.Lock()
	st := Stats{Records: s.mu.records, Bytes: s.mu.bytes}
	s.mu.Unlock()
	s.c.fill(&st)
	st.QueuedBytes = st.Bytes - min(st.WrittenBytes, st.Bytes)
	st.BlockedWaits = s.blockedWaits.Load()
	st.Blocked = time.Duration(s.blockedNS.Load())
	return st
}
