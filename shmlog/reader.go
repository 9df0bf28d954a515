package shmlog

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
)

// Record is a record read from the log.
type Record struct {
	// Pos is the record's position (see the package doc).
	Pos uint64
	// Payload aliases the shared mapping; valid until the Reader's next
	// call.
	Payload []byte
}

// Reader follows the committed records of a log in position order,
// skipping padding and padding over frames of dead writers (see the
// package doc). It holds its own mappings and a shared lock on file 0. Not
// safe for concurrent use.
type Reader struct {
	path     string
	o        Options
	alive    func(pid int, start uint64) bool
	capacity uint64
	id       uint32 // the log's id (file 0's), 0 if unknown

	f0  *os.File
	hdr header
	f   *mfile // current file; nil after Close
	off uint64 // data offset of the next frame in f

	pending    bool
	rec        Record
	stuck      bool
	stuckAt    uint64 // position the reader waits at
	stuckSince time.Time
	padded     uint64
	claims     claimSnap // at a zero word: the claims to wait for
}

// OpenReader opens the log at path for reading from its first record. The
// files must be writable: a reader pads over the frames of dead writers.
// Of o, only CommitTimeout and LiveTimeout matter.
func OpenReader(path string, o *Options) (*Reader, error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return openReader(path, opts, processAlive, 0)
}

// NewReader returns a Reader of l's log starting at position from: 0, or a
// position Append returned. A position where no frame starts is refused.
// Close it before or after l.
func (l *Log) NewReader(from uint64) (*Reader, error) {
	return openReader(l.path, l.o, l.alive, from)
}

func openReader(path string, o Options, alive func(int, uint64) bool, from uint64) (*Reader, error) {
	path, err := logName(path)
	if err != nil {
		return nil, err
	}
	f0, hdr, p, _, err := joinFile0(path, false)
	r := &Reader{path: path, o: o, alive: alive, capacity: p.capacity, id: p.id, f0: f0, hdr: hdr}
	if err == nil {
		if from&(1<<32-1)%_align != 0 || from&(1<<32-1) > p.capacity {
			err = fmt.Errorf("shmlog: reader: position %#x is not a frame boundary", from)
		} else {
			r.f, err = mapFile(path, from>>32, p.capacity, p.id, false)
			r.off = from & (1<<32 - 1)
			if err == nil {
				err = r.checkStart()
			}
		}
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// checkStart refuses to start at r.off unless a frame starts there (or
// the file's last frame ends there, or the file ends too soon after it for
// another frame): a Reader started inside a frame would take the bytes
// there for frames, and could pad over a committed record's payload, taking
// its zero words for a dead writer's claim.
func (r *Reader) checkStart() error {
	if r.off == 0 || r.capacity-r.off < frame.HeaderSize || r.off == r.f.tail.Load() {
		return nil
	}
	pos := r.f.idx<<32 | r.off
	bad := fmt.Errorf("shmlog: reader: position %#x is not the start of a frame of %s", pos, r.f.name)
	if r.off > r.f.tail.Load() || !r.f.backed(r.off+frame.HeaderSize) {
		return bad
	}
	at := _hdrSize + int(r.off)
	w := sys.Uint64At(r.f.m, at).Load()
	n := (w >> 32) & _lenMask
	if w == 0 || binary.LittleEndian.Uint64(r.f.m[at+8:]) != pos || r.off+frameSize(int(n)) > r.capacity {
		return bad
	}
	switch w >> _kindShift {
	case 0: // in progress: its seq is stored, as Reserve does
		return nil
	case _kindPadding:
		if paddingWord(n, pos) == w {
			return nil
		}
	case _kindRecord:
		if r.f.backed(r.off+frameSize(int(n))) && recordWord(r.f.m[at+frame.HeaderSize:at+frame.HeaderSize+int(n)], pos) == w {
			return nil
		}
	}
	return bad
}

// Padded returns how many frames this Reader padded over for dead writers.
func (r *Reader) Padded() uint64 { return r.padded }

// Next returns the next committed record, or ok false if there is none yet.
// Damage is a *CorruptError naming the file and offset.
func (r *Reader) Next() (rec Record, ok bool, err error) {
	if r.pending {
		r.pending = false
		return r.rec, true, nil
	}
	return r.next()
}

// Wait waits until Next has a record or ctx is done. It polls the shared
// tail briefly, then sleeps on the log's wake word (a futex on Linux) until
// a writer commits, waking at least every _parkTimeout to check for dead
// writers and ctx.
func (r *Reader) Wait(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if r.pending {
		return nil
	}
	for i := 0; ; i++ {
		rec, ok, err := r.next()
		if err == nil && !ok && i >= _spins && ctx.Err() == nil {
			rec, ok, err = r.park(ctx)
		}
		if err != nil {
			return err
		}
		if ok {
			r.rec, r.pending = rec, true
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if i < _spins {
			runtime.Gosched()
		}
	}
}

// Wait's schedule: polls before parking, and the longest park.
const (
	_spins       = 200
	_parkTimeout = 10 * time.Millisecond
)

// park registers as a waiter, looks once more, and sleeps on the wake word
// unless a record came. Writers that see a waiter bump the word and wake
// it; a commit before the registration is seen by the look.
func (r *Reader) park(ctx context.Context) (Record, bool, error) {
	r.hdr.waiters().Add(1)
	defer r.hdr.waiters().Add(^uint64(0))
	seq := r.hdr.wake().Load()
	rec, ok, err := r.next()
	if ok || err != nil {
		return rec, ok, err
	}
	timeout := _parkTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(d)), 0)
	}
	sys.FutexWait(r.hdr.b, _offWake, uint32(seq), timeout)
	return r.next()
}

func (r *Reader) next() (Record, bool, error) {
	if r.f == nil {
		return Record{}, false, ErrClosed
	}
	for {
		if r.capacity-r.off < frame.HeaderSize {
			if r.hdr.active().Load() <= r.f.idx {
				return Record{}, false, nil
			}
			if err := r.moveTo(r.f.idx + 1); err != nil {
				return Record{}, false, err
			}
			continue
		}
		tail := r.f.tail.Load()
		if r.off >= tail {
			return Record{}, false, nil
		}
		at := _hdrSize + int(r.off)
		if !r.f.backed(r.off + frame.HeaderSize) {
			return Record{}, false, r.f.pastEnd(r.off, frame.HeaderSize)
		}
		w := sys.Uint64At(r.f.m, at).Load()
		kind := w >> _kindShift
		if w != 0 && kind == 0 && !slotOK(w) {
			return Record{}, false, corrupt(r.f.name, int64(at), fmt.Errorf("%w: in-progress word %#x names no slot", ErrFrame, w))
		}
		if w == 0 || kind == 0 {
			moved, err := r.stalled(w)
			if err != nil || !moved {
				return Record{}, false, err
			}
			continue
		}
		n := (w >> 32) & _lenMask
		size := frameSize(int(n))
		if r.off+size > r.capacity {
			return Record{}, false, corrupt(r.f.name, int64(at), fmt.Errorf("%w: %d-byte frame runs past the end of the file", ErrFrame, size))
		}
		pos := r.f.idx<<32 | r.off
		r.stuck = false
		switch kind {
		case _kindRecord:
			if !r.f.backed(r.off + size) {
				return Record{}, false, r.f.pastEnd(r.off, size)
			}
			p := r.f.m[at+frame.HeaderSize : at+frame.HeaderSize+int(n) : at+frame.HeaderSize+int(n)]
			if recordWord(p, pos) != w || binary.LittleEndian.Uint64(r.f.m[at+8:]) != pos {
				return Record{}, false, corrupt(r.f.name, int64(at), fmt.Errorf("%w: %w", ErrFrame, frame.ErrChecksum))
			}
			r.off += size
			return Record{Pos: pos, Payload: p}, true, nil
		case _kindPadding:
			if paddingWord(n, pos) != w {
				return Record{}, false, corrupt(r.f.name, int64(at), fmt.Errorf("%w: padding: %w", ErrFrame, frame.ErrChecksum))
			}
			r.off += size
		default:
			return Record{}, false, corrupt(r.f.name, int64(at), fmt.Errorf("%w: %w %d", ErrFrame, frame.ErrKind, kind))
		}
	}
}

// stalled handles an unfinished frame (w is 0 or in progress) at r.off
// below tail: once it has stayed so for CommitTimeout, it pads it over if
// that is safe. It reports whether the word at r.off changed.
func (r *Reader) stalled(w uint64) (bool, error) {
	pos := r.f.idx<<32 | r.off
	now := time.Now()
	if !r.stuck || r.stuckAt != pos {
		r.stuck, r.stuckAt, r.stuckSince = true, pos, now
		return false, nil
	}
	waited := now.Sub(r.stuckSince)
	if waited < r.o.CommitTimeout {
		return false, nil
	}
	at := _hdrSize + int(r.off)
	if w == 0 {
		if !r.claims.valid || r.claims.pos != pos {
			r.hdr.snap(&r.claims, pos, r.f.tail)
		}
		if !r.hdr.claimsDone(&r.claims, r.alive) {
			return false, nil
		}
		end := min(r.claims.tail, r.capacity)
		if !r.f.backed(end) {
			return false, r.f.pastEnd(r.off, end-r.off)
		}
		x := deadClaimEnd(func(o uint64) uint64 { return sys.Uint64At(r.f.m, _hdrSize+int(o)).Load() }, r.off, pos, end)
		if x-r.off < frame.HeaderSize {
			return false, corrupt(r.f.name, int64(at), fmt.Errorf("%w: %d-byte hole", ErrFrame, x-r.off))
		}
		// One padding frame, or several if the run is longer than a frame
		// can be. Each starts where the one before ends, and is CASed from
		// 0: if another reader padded there first, its frames stand and
		// this one stops.
		for o := r.off; o < x; {
			size := padFrame(x - o)
			p := r.f.idx<<32 | o
			at := _hdrSize + int(o)
			putSeq(r.f.m[at+8:], p)
			if !sys.Uint64At(r.f.m, at).CompareAndSwap(0, paddingWord(size-frame.HeaderSize, p)) {
				break
			}
			r.padded++
			r.hdr.padded().Add(1)
			o += size
		}
		return true, nil
	}
	if !r.hdr.ownerGone(w, pos, r.alive) && (r.o.LiveTimeout == 0 || waited < r.o.LiveTimeout) {
		return false, nil
	}
	n := (w >> 32) & _lenMask
	if r.off+frameSize(int(n)) > r.capacity {
		return false, corrupt(r.f.name, int64(at), fmt.Errorf("%w: in-progress frame of %d bytes runs past the end of the file", ErrFrame, n))
	}
	putSeq(r.f.m[at+8:], pos)
	if sys.Uint64At(r.f.m, at).CompareAndSwap(w, paddingWord(n, pos)) {
		r.padded++
		r.hdr.padded().Add(1)
	}
	return true, nil
}

func (r *Reader) moveTo(idx uint64) error {
	f, err := mapFile(r.path, idx, r.capacity, r.id, false)
	if err != nil {
		return err
	}
	// The file was found by name: if the log's path no longer names the
	// file 0 this Reader opened (checked after the open), it may be the
	// file of a log made at the path since.
	if err := checkPath(r.path, r.f0, "Reader"); err != nil {
		f.unmap()
		return fmt.Errorf("shmlog: reader: move to file %d: %w", idx, err)
	}
	r.f.unmap()
	r.f, r.off, r.stuck = f, 0, false
	return nil
}

// atEnd reports whether the reader has read everything claimed.
func (r *Reader) atEnd() bool {
	if r.f.idx < r.hdr.active().Load() {
		return false
	}
	return r.off >= r.f.tail.Load() || r.capacity-r.off < frame.HeaderSize
}

// Close releases the Reader's mappings and lock.
func (r *Reader) Close() error {
	if r.f != nil {
		r.f.unmap()
		r.f = nil
	}
	if r.hdr.b != nil {
		sys.Munmap(r.hdr.b)
		r.hdr.b = nil
	}
	if r.f0 != nil {
		err := r.f0.Close()
		r.f0 = nil
		return err
	}
	return nil
}

// Stats are what Verify found.
type Stats struct {
	// Records counts the committed records.
	Records uint64
	// Padded counts the frames Verify padded over for dead writers.
	Padded uint64
	// Files counts the files read.
	Files uint64
}

// Verify reads every record of the log at path in order, calling fn (if
// not nil) for each, and pads over frames whose writers are gone without
// waiting for a CommitTimeout: it is recovery for a log no live process is
// appending to. A frame still in progress by a live process after a short
// wait is an error, as is any damage (*CorruptError).
func Verify(path string, fn func(Record) error) (Stats, error) {
	r, err := openReader(path, Options{CommitTimeout: time.Nanosecond}, processAlive, 0)
	if err != nil {
		return Stats{}, err
	}
	defer r.Close()
	st := Stats{Files: 1}
	for tries := 0; ; {
		idx := r.f.idx
		rec, ok, err := r.next()
		st.Files += r.f.idx - idx
		if err != nil {
			st.Padded = r.padded
			return st, err
		}
		if ok {
			tries = 0
			st.Records++
			if fn != nil {
				if err := fn(rec); err != nil {
					st.Padded = r.padded
					return st, err
				}
			}
			continue
		}
		if r.atEnd() {
			break
		}
		if tries++; tries > 200 {
			st.Padded = r.padded
			return st, corrupt(r.f.name, int64(_hdrSize+r.off), fmt.Errorf("frame still in progress by a live process"))
		}
		if tries > 1 {
			time.Sleep(time.Millisecond)
		}
	}
	st.Padded = r.padded
	return st, nil
}
