package shmlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync/atomic"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
)

// These constants are part of the layout (see the package doc); they must
// not change.
const (
	_hdrSize    = frame.FileHeaderSize
	_offParams  = 128
	_offCap     = 128
	_offIndex   = 136
	_offAlign   = 144
	_offSlotN   = 148
	_offLogID   = 152
	_offParCRC  = 156
	_offTail    = 256
	_offActive  = 320
	_offPadded  = 384
	_offWaiters = 448
	_offWake    = 512
	_offSlots   = 1024
	_slotSize   = 64
	_slots      = 48
	_align      = 8
	_slotState  = 0
	_slotStart  = 8
	_slotEnter  = 16
	_slotLeave  = 24
	_slotFirst  = 32

	_kindShift = 62
	_lenMask   = frame.MaxPayload
)

// Shared words as they sit in a frame header's first 8 bytes.
const (
	_kindRecord  = uint64(frame.KindRecord)
	_kindPadding = uint64(frame.KindPadding)
)

var _crc = crc32.MakeTable(crc32.Castagnoli)

// frameSize returns the aligned size of a frame with n payload bytes.
func frameSize(n int) uint64 { return uint64(frame.HeaderSize+n+_align-1) &^ (_align - 1) }

// fileName returns the name of file idx of the log at path.
func fileName(path string, idx uint64) string {
	if idx == 0 {
		return path
	}
	return fmt.Sprintf("%s.%08d", path, idx)
}

// params are the fixed fields of a header page.
type params struct {
	capacity uint64
	index    uint64
	// id is the log's: drawn when file 0 is made and copied into every
	// later file, so that a file of another log under this log's name is
	// told apart. 0 is unknown (a file made by a writer that predates it).
	id uint32
}

// putHeader fills the header page b for a file of the given params.
func putHeader(b []byte, p params) {
	clear(b[:_hdrSize])
	frame.PutFileHeader(b, frame.FileHeader{Kind: frame.FileShm, FirstSeq: p.index << 32})
	binary.LittleEndian.PutUint64(b[_offCap:], p.capacity)
	binary.LittleEndian.PutUint64(b[_offIndex:], p.index)
	binary.LittleEndian.PutUint32(b[_offAlign:], _align)
	binary.LittleEndian.PutUint32(b[_offSlotN:], _slots)
	binary.LittleEndian.PutUint32(b[_offLogID:], p.id)
	binary.LittleEndian.PutUint32(b[_offParCRC:], frame.Mask(crc32.Checksum(b[_offParams:_offParCRC], _crc)))
}

// decodeHeader checks the header page at the start of b, read from the file
// name, and returns its params. Errors are *CorruptError naming the offset.
// It never panics.
func decodeHeader(name string, b []byte) (params, error) {
	if len(b) < _hdrSize {
		// A short file is a truncated log only if what it holds could
		// start one.
		var page [_hdrSize]byte
		copy(page[:], b)
		if _, err := frame.DecodeFileHeader(page[:]); len(b) > 0 && errors.Is(err, frame.ErrBadMagic) {
			return params{}, corrupt(name, 0, err)
		}
		return params{}, corrupt(name, int64(len(b)), fmt.Errorf("%w: %d bytes, shorter than the %d-byte header page", ErrTruncated, len(b), _hdrSize))
	}
	h, err := frame.DecodeFileHeader(b)
	if err != nil {
		off := int64(0)
		if errors.Is(err, frame.ErrVersion) {
			off = 8
		} else if errors.Is(err, frame.ErrChecksum) {
			off = 24
		}
		return params{}, corrupt(name, off, err)
	}
	if h.Kind != frame.FileShm {
		return params{}, corrupt(name, 10, fmt.Errorf("%w: file kind %v", ErrNotShm, h.Kind))
	}
	if got, want := binary.LittleEndian.Uint32(b[_offParCRC:]), frame.Mask(crc32.Checksum(b[_offParams:_offParCRC], _crc)); got != want {
		return params{}, corrupt(name, _offParCRC, fmt.Errorf("%w: checksum mismatch", ErrHeader))
	}
	p := params{capacity: binary.LittleEndian.Uint64(b[_offCap:]), index: binary.LittleEndian.Uint64(b[_offIndex:]), id: binary.LittleEndian.Uint32(b[_offLogID:])}
	switch {
	case p.capacity < minCapacity || p.capacity > maxCapacity || p.capacity%_align != 0:
		return params{}, corrupt(name, _offCap, fmt.Errorf("%w: data size %d", ErrHeader, p.capacity))
	case p.index >= 1<<31:
		return params{}, corrupt(name, _offIndex, fmt.Errorf("%w: file index %d", ErrHeader, p.index))
	case binary.LittleEndian.Uint32(b[_offAlign:]) != _align:
		return params{}, corrupt(name, _offAlign, fmt.Errorf("%w: alignment %d", ErrHeader, binary.LittleEndian.Uint32(b[_offAlign:])))
	case binary.LittleEndian.Uint32(b[_offSlotN:]) != _slots:
		return params{}, corrupt(name, _offSlotN, fmt.Errorf("%w: %d slots", ErrHeader, binary.LittleEndian.Uint32(b[_offSlotN:])))
	case h.FirstSeq != p.index<<32:
		return params{}, corrupt(name, 16, fmt.Errorf("%w: first position %#x in file %d", ErrHeader, h.FirstSeq, p.index))
	}
	return p, nil
}

// sameLog reports whether files with the log ids a and b may be of one
// log: the ids are equal, or one is unknown.
func sameLog(a, b uint32) bool { return a == b || a == 0 || b == 0 }

// newLogID returns a log id for a new log: random, never 0.
func newLogID() uint32 {
	for {
		if id := rand.Uint32(); id != 0 {
			return id
		}
	}
}

// Capacity bounds: a file holds at least one page of data, and offsets fit
// in the low 32 bits of a position.
const (
	minCapacity = 4096
	maxCapacity = 1<<32 - _hdrSize
)

// createFile creates file p.index of the log at path, preallocated and with
// its header page written, under a temporary name of its own linked into
// place, so other processes see either no file or a whole one. It never
// replaces a file of that name: one there is kept (it returns nil), as a
// process whose lock of path.lock did not exclude this one (path.lock was
// removed while one held it) may have made it and appended to it since.
// The header is made durable (sync, fdatasync(2)) before the file is
// linked: page writeback keeps no order, and a power cut that kept the
// name but not the header page would leave a file no Open, roll or Reader
// can map. The directory entry is made durable by the next Log.Sync.
// REQUIRES: the caller holds the exclusive lock of path.lock.
func createFile(path string, p params, perm os.FileMode, sync func(*os.File) error) error {
	name := fileName(path, p.index)
	var (
		tmp string
		f   *os.File
		err error
	)
	for i := 0; ; i++ {
		// A name of this process's own: another creator's file is never
		// truncated or linked in its place.
		tmp = fmt.Sprintf("%s.%d-%d.tmp", name, os.Getpid(), i)
		f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i >= 100 {
			return err
		}
	}
	defer os.Remove(tmp)
	fail := func(err error) error {
		f.Close()
		return err
	}
	if err := sys.Fallocate(f, 0, int64(_hdrSize+p.capacity)); err != nil {
		return fail(fmt.Errorf("shmlog: preallocate %s (%d bytes): %w", name, _hdrSize+p.capacity, err))
	}
	b := make([]byte, _hdrSize)
	putHeader(b, p)
	if _, err := f.WriteAt(b, 0); err != nil {
		return fail(err)
	}
	if err := sync(f); err != nil {
		return fail(fmt.Errorf("shmlog: sync %s: %w", tmp, err))
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, name); err != nil && !errors.Is(err, fs.ErrExist) {
		// A file system with no hard links: rename, which would replace a
		// file made since by a process the lock did not exclude.
		return os.Rename(tmp, name)
	}
	return nil
}

// header gives typed access to the shared words of a mapped file 0 header
// page.
type header struct{ b []byte }

func (h header) word(off int) *atomic.Uint64 { return sys.Uint64At(h.b, off) }
func (h header) active() *atomic.Uint64      { return h.word(_offActive) }
func (h header) padded() *atomic.Uint64      { return h.word(_offPadded) }
func (h header) waiters() *atomic.Uint64     { return h.word(_offWaiters) }
func (h header) wake() *atomic.Uint64        { return h.word(_offWake) }
func (h header) slot(s, field int) *atomic.Uint64 {
	return h.word(_offSlots + s*_slotSize + field)
}

// slotOK reports whether the in-progress word w names a slot, as every
// word a writer stores does; another is damage, never a dead writer's.
func slotOK(w uint64) bool { return w&0xffff >= 1 && w&0xffff <= _slots }

// ownerGone reports whether the owner named by the in-progress word w at
// position pos is gone: its slot was freed or taken again, or its process
// is gone.
//
// w holds only the low 16 bits of the slot's generation, which come round
// again after 65,536 takes of the slot (an Open and its Close take two):
// a claim left by a writer that died or closed without committing could
// then name the slot's live owner, and readers would wait behind it for
// as long as that process lives. The slot's first word rules this out: it
// is the position where appends stood when the owner took the slot, and
// every claim of the owner is at or after it, while a claim of an earlier
// owner is before it. A first word not yet stored by an Open taking the
// slot is a smaller, earlier owner's, so the claim is waited for until it
// is stored; never is a live owner's claim taken for gone.
func (h header) ownerGone(w, pos uint64, alive func(pid int, start uint64) bool) bool {
	s := int(w&0xffff) - 1
	if s < 0 || s >= _slots {
		return true
	}
	st := h.slot(s, _slotState).Load()
	if uint32(st) == 0 || uint64(uint16(st>>32)) != (w>>16)&0xffff {
		return true
	}
	if pos < h.slot(s, _slotFirst).Load() {
		return true // claimed before the owner took the slot: an earlier owner's
	}
	return !alive(int(uint32(st)), h.slot(s, _slotStart).Load())
}

// claimSnap is a reader's view, at one zero word, of the claims that may
// still write their headers below tail: for each slot, its state and how
// many claims its process had entered, read after tail, and whether the
// reader has since seen the slot with no claim in flight.
type claimSnap struct {
	valid   bool
	pos     uint64 // the zero word's position
	tail    uint64
	state   [_slots]uint64
	entered [_slots]uint64
	quiet   [_slots]bool
}

// snap fills c for the zero word at pos of a file whose tail word is t.
func (h header) snap(c *claimSnap, pos uint64, t *atomic.Uint64) {
	c.valid, c.pos, c.tail = true, pos, t.Load()
	for s := range _slots {
		c.state[s] = h.slot(s, _slotState).Load()
		c.entered[s] = h.slot(s, _slotEnter).Load()
		c.quiet[s] = false
	}
}

// claimsDone reports whether every claim entered before snapshot c was
// taken has left (written its header, or found its file full), or belongs
// to a process that is gone. left ≥ c.entered would not tell: the
// process's goroutines leave in any order, so claims entered since may
// stand in for one entered before and still between its tail add and its
// header. So a live slot counts once it is seen with left = entered, no
// claim in flight; it need not be at the same moment as the others'.
func (h header) claimsDone(c *claimSnap, alive func(pid int, start uint64) bool) bool {
	done := true
	for s := range _slots {
		st := c.state[s]
		if c.quiet[s] || uint32(st) == 0 || h.slot(s, _slotState).Load() != st {
			continue // free then, or since freed or taken over: no claim of its owner is pending
		}
		// left first: left ≤ entered always, so equal loads mean no claim
		// was in flight when left was loaded.
		left := h.slot(s, _slotLeave).Load()
		entered := h.slot(s, _slotEnter).Load()
		if left == entered {
			c.quiet[s] = true
			continue
		}
		if entered < c.entered[s] {
			// The counts were zeroed since: Open took the slot over between
			// its state CAS and its stores, and c holds the entered count of
			// the gone process it took over from.
			c.quiet[s] = true
			continue
		}
		if alive(int(uint32(st)), h.slot(s, _slotStart).Load()) {
			done = false
		}
	}
	return done
}

// processAlive is the default liveness check: the process exists, is not
// a zombie, and started when the slot says (0: still registering), or its
// start time cannot be read (0: procfs hides it).
func processAlive(pid int, start uint64) bool {
	st, ok := sys.ProcStart(pid)
	return ok && (start == 0 || st == 0 || st == start)
}

// paddingWord returns the first header word of a padding frame with an
// n-byte body at position pos.
func paddingWord(n uint64, pos uint64) uint64 {
	crc := frame.Mask(crc12(uint32(_kindPadding<<30|n), pos))
	return (_kindPadding<<30|n)<<32 | uint64(crc)
}

// _maxPadFrame is the largest padding frame: its body length, like any
// frame's, must fit in the 30 bits of the header's length field
// (frame.MaxPayload), and the frame is a multiple of 8 bytes.
const _maxPadFrame = (frame.HeaderSize + frame.MaxPayload) &^ (_align - 1)

// padFrame returns the size of the first padding frame over a run of r
// dead bytes (a multiple of 8, at least a frame header): the whole run if
// one frame's length can say it, else the largest frame that leaves at
// least a frame header for the next. A run longer than one frame can be
// is padded with several: with files of more than 1 GiB of data, dead
// claims next to each other, or one of the largest record, run past
// frame.MaxPayload+16 bytes, and a longer length would spill into the
// kind bits of the header word.
func padFrame(r uint64) uint64 {
	switch {
	case r-frame.HeaderSize <= frame.MaxPayload:
		return r
	case r-_maxPadFrame < frame.HeaderSize:
		return _maxPadFrame - _align
	}
	return _maxPadFrame
}

// recordWord returns the first header word of a committed record at pos
// with payload p.
func recordWord(p []byte, pos uint64) uint64 {
	n := uint64(len(p))
	crc := frame.Mask(crc32.Update(crc12(uint32(_kindRecord<<30|n), pos), _crc, p))
	return (_kindRecord<<30|n)<<32 | uint64(crc)
}

// crc12 returns the CRC-32C of the 12 bytes of a frame's first header
// word's kind and length (a, little-endian) and of its position (b,
// little-endian), four bytes at a time (slicing-by-4): crc32.Update would
// move a 12-byte array to the heap (its slice argument escapes), and a
// byte-at-a-time loop is a chain of twelve dependent table loads.
func crc12(a uint32, b uint64) uint32 {
	c := ^uint32(0) ^ a
	c = _crc4[3][byte(c)] ^ _crc4[2][byte(c>>8)] ^ _crc4[1][byte(c>>16)] ^ _crc4[0][c>>24]
	c ^= uint32(b)
	c = _crc4[3][byte(c)] ^ _crc4[2][byte(c>>8)] ^ _crc4[1][byte(c>>16)] ^ _crc4[0][c>>24]
	c ^= uint32(b >> 32)
	c = _crc4[3][byte(c)] ^ _crc4[2][byte(c>>8)] ^ _crc4[1][byte(c>>16)] ^ _crc4[0][c>>24]
	return ^c
}

// _crc4 holds the slicing-by-4 tables of CRC-32C: _crc4[k][i] is the CRC
// register after byte i followed by k zero bytes.
var _crc4 = func() (t [4][256]uint32) {
	for i := range 256 {
		c := _crc[i]
		t[0][i] = c
		for k := 1; k < 4; k++ {
			c = _crc[byte(c)] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()

// deadClaimEnd returns where the dead claim at data offset off (position
// pos, header word 0) ends, at most end: at the first non-zero word after
// it, the next frame's header. The word at off+8 may be the claim's seq:
// whoever pads a claim over (a writer whose claim crosses the end of the
// file, a Reader, a recovering Open) stores the seq before the header
// word, and may be killed between the two. It is no frame's header, as no
// frame is 8 bytes. word loads the data word at an offset.
// REQUIRES: off+16 ≤ the data size (the word at off+8 is in the file).
func deadClaimEnd(word func(o uint64) uint64, off, pos, end uint64) uint64 {
	x := off + 8
	if word(x) == pos {
		x += 8
	}
	for x < end && word(x) == 0 {
		x += 8
	}
	return x
}

// putSeq stores a frame's seq (its position) in b[0:8].
func putSeq(b []byte, pos uint64) { binary.LittleEndian.PutUint64(b, pos) }
