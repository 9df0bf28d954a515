package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// segTable is an open Log's list of segments, oldest first; the last one
// is the active segment the flusher writes. Readers of the open Log
// (NewReader) find segments through it, never through the directory: the
// active segment may still be under its temporary name (see rotate).
//
// Each segment is reference-counted: the table holds one reference while
// the segment is listed, and each Reader positioned in it holds one. The
// segment's read-only file handle and mapping are released with the last
// reference, so a Reader in a segment that retention deleted finishes it
// from its mapping (the file is unlinked, never truncated, while mapped).
type segTable struct {
	fsys   vfs.FS
	dir    string
	maxRec int
	// activeLen is the least mapping length of an active segment: it may
	// grow to SegmentSize plus one record and a footer.
	activeLen int64
	// sealedOnly maps only sealed segments: a follower's table (see
	// refresh), whose active segment another process may truncate when it
	// seals or closes it, and is read with ReadAt.
	sealedOnly bool

	mu struct {
		sync.Mutex
		segs   []*liveSeg // Protected by mu.
		closed bool       // Protected by mu.
	}
	// first is the first sequence number of the oldest listed segment:
	// Log.FirstSeq.
	first atomic.Uint64
}

// liveSeg is one segment of an open Log.
type liveSeg struct {
	firstSeq uint64
	name     string
	// end is the sequence number after the segment's last record once it
	// is sealed (the next segment's first), 0 while it is active. The
	// flusher stores it before any record of the next segment is visible.
	end atomic.Uint64

	// size is the file size once sealed, and sealedAt when it was sealed
	// (zero if unknown), for retention. Protected by the table's mu.
	size     int64
	sealedAt time.Time

	// refs counts the table's reference and the Readers'; dropped is set
	// once the table let go of its own. Protected by the table's mu.
	refs    int
	dropped bool
	// f is a read-only handle, opened by the first Reader (or, for a
	// segment created by rotation, by the flusher). m maps the file (nil
	// where mapping is unavailable: Readers then use f.ReadAt). Both are
	// set while the table's mu is held, and not changed while a Reader
	// holds a reference: it reads them without the lock. The last Reader
	// to let go closes both (release).
	f     vfs.File
	m     []byte
	unmap func() error

	idx segIndex

	// named is nil for a segment whose name is durable, and for one a
	// rotation created (still under spareName) a channel the sealer
	// closes once it gave the file its name and fsynced the directory,
	// or failed to (then nameErr, set before, says why). Until then a
	// power cut leaves the segment without its name, so the segment
	// before it must not be deleted: it would leave the log empty.
	named   chan struct{}
	nameErr error
}

// nameDurable reports whether s's name survives a power cut.
func (s *liveSeg) nameDurable() bool {
	if s.named == nil {
		return true
	}
	select {
	case <-s.named:
		return s.nameErr == nil
	default:
		return false
	}
}

// _indexEvery is how many bytes of frames lie between two entries of a
// segment's sparse index: 16 bytes of memory per 16 KiB of log, and a
// positioning walks at most that far.
const _indexEvery = 16 << 10

// newSegTable lists the segments in dir after recovery: every one but the
// last is sealed.
func newSegTable(fsys vfs.FS, dir string, o *Options) (*segTable, error) {
	t := &segTable{fsys: fsys, dir: dir, maxRec: o.MaxRecordSize}
	t.activeLen = o.SegmentSize + int64(frame.HeaderSize+o.MaxRecordSize+frame.FooterSize)
	segs, _, _, err := listSegments(fsys, dir)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("wal: open %s: no segment after recovery", dir)
	}
	// An index file whose segment is gone (deleted before its index was
	// written) is removed; it is only a hint.
	if names, err := fsys.List(dir); err == nil {
		have := make(map[string]bool, len(segs))
		for _, s := range segs {
			have[s.name] = true
		}
		for _, n := range names {
			if seg, ok := strings.CutSuffix(n, idxSuffix); ok && !have[seg] {
				_ = fsys.Remove(filepath.Join(dir, n)) // a leftover hint: harmless if it stays
			}
		}
	}
	for i, s := range segs {
		ls := &liveSeg{firstSeq: s.firstSeq, name: s.name, refs: 1}
		if i < len(segs)-1 {
			ls.end.Store(segs[i+1].firstSeq)
			st, err := fsys.Stat(filepath.Join(dir, s.name))
			if err != nil {
				return nil, fmt.Errorf("wal: stat %s: %w", s.name, err)
			}
			ls.size, ls.sealedAt = st.Size(), st.ModTime()
		}
		t.mu.segs = append(t.mu.segs, ls)
	}
	t.first.Store(segs[0].firstSeq)
	return t, nil
}

// rotated records, on the flusher, that the active segment was sealed
// with its records ending before end in a file of size bytes, and that
// next (whose read-only handle is f) is now active.
func (t *segTable) rotated(end uint64, size int64, at time.Time, next *liveSeg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.mu.segs[len(t.mu.segs)-1]
	old.size = size
	if old.sealedAt.IsZero() { // else dated by dateSeal
		old.sealedAt = at
	}
	old.end.Store(end)
	if old.refs == 1 && !old.dropped {
		// Sealed (and renamed) with no Reader on it: a log must not hold
		// a handle per segment.
		t.unmapLocked(old)
	}
	t.mu.segs = append(t.mu.segs, next)
}

// unnamedTail returns the active segment if its name is not durable yet
// (see liveSeg.named), else nil.
func (t *segTable) unnamedTail() *liveSeg {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.mu.segs); n > 0 && !t.mu.segs[n-1].nameDurable() {
		return t.mu.segs[n-1]
	}
	return nil
}

// dateSeal dates the active segment s, about to be sealed, by its last
// write at, for retention.
func (t *segTable) dateSeal(s *liveSeg, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.sealedAt = at
}

// acquire returns the segment holding seq with a reference the caller
// releases, opening and mapping it if needed. A seq below the oldest
// segment is a *TruncatedError.
func (t *segTable) acquire(seq uint64) (*liveSeg, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	segs := t.mu.segs
	if t.mu.closed {
		return nil, ErrClosed
	}
	if len(segs) == 0 && t.sealedOnly {
		// A follower's table lists what the directory holds: a log whose
		// files were there when it began to follow has none left (retention
		// never deletes the last segment).
		return nil, fmt.Errorf("wal: follow %s: no segment is left in the directory before seq %d: the log's files were removed: %w", t.dir, seq, fs.ErrNotExist)
	}
	if len(segs) == 0 || seq < segs[0].firstSeq {
		first := t.first.Load()
		return nil, &TruncatedError{Seq: seq, First: first}
	}
	k := sort.Search(len(segs), func(i int) bool { return segs[i].firstSeq > seq }) - 1
	s := segs[k]
	if s.f == nil {
		f, err := t.fsys.OpenRegular(filepath.Join(t.dir, s.name), os.O_RDONLY, 0)
		if err != nil && t.sealedOnly && k+1 < len(segs) && errors.Is(err, fs.ErrNotExist) {
			// A follower's table lists a segment that retention has deleted
			// since.
			return nil, &TruncatedError{Seq: seq, First: segs[k+1].firstSeq}
		}
		if err != nil && t.sealedOnly && errors.Is(err, fs.ErrNotExist) {
			// The last segment listed is gone. Retention deletes a segment
			// only once a later one exists: unless a listing now shows one
			// (which the table's missed), the log's files were removed.
			if now, _, _, lerr := listSegments(t.fsys, t.dir); lerr == nil && len(now) > 0 && now[0].firstSeq > seq {
				return nil, &TruncatedError{Seq: seq, First: now[0].firstSeq}
			} else if lerr == nil && (len(now) == 0 || now[len(now)-1].firstSeq <= s.firstSeq) {
				return nil, fmt.Errorf("wal: follow %s: segment %s is gone and no later segment is there: the log's files were removed: %w", t.dir, s.name, err)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("wal: open %s for reading: %w", s.name, err)
		}
		s.f = f
	}
	if s.m == nil {
		if err := t.mapSeg(s); err != nil {
			return nil, err
		}
	}
	s.refs++
	return s, nil
}

// mapSeg maps s read-only if its file can be mapped. A sealed segment is
// mapped at its size; the active one at the most it can grow to, of which
// a Reader touches only the bytes of visible records. REQUIRES: t.mu held.
func (t *segTable) mapSeg(s *liveSeg) error {
	mp, ok := s.f.(vfs.Mapper)
	if !ok || t.sealedOnly && s.end.Load() == 0 {
		return nil
	}
	size, err := s.f.Size()
	if err != nil {
		return fmt.Errorf("wal: stat %s: %w", s.name, err)
	}
	n := size
	if s.end.Load() == 0 {
		n = max(size+int64(frame.HeaderSize+t.maxRec+frame.FooterSize), t.activeLen)
	}
	if n <= 0 {
		return nil
	}
	m, unmap, err := mp.MapRead(int(n))
	if err != nil {
		return nil // fall back to ReadAt
	}
	s.m, s.unmap = m, unmap
	return nil
}

// release drops a Reader's reference to s. When no Reader is left on a
// sealed segment, its mapping and file are closed, even though the table
// still lists it: pages a Reader touched count in the process's resident
// memory for as long as they are mapped, so a log read from end to end
// must not keep every segment mapped. The next acquire maps it again, by
// its name. The active segment stays open: until the sealer renames it,
// the handle the flusher opened is the only way to it, and Readers
// waiting at the tail keep coming back to it.
func (t *segTable) release(s *liveSeg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.refs--
	if s.refs == 0 || s.refs == 1 && !s.dropped && s.end.Load() != 0 {
		t.unmapLocked(s)
	}
}

// dropLocked drops the table's reference to s (it was deleted, or the
// table closed); the last reference closes its file and mapping.
// REQUIRES: t.mu is held.
func (t *segTable) dropLocked(s *liveSeg) {
	s.dropped = true
	s.refs--
	if s.refs == 0 {
		t.unmapLocked(s)
	}
}

// unmapLocked closes s's mapping and file. REQUIRES: t.mu is held, and
// no Reader holds a reference to s.
func (t *segTable) unmapLocked(s *liveSeg) {
	if s.unmap != nil {
		_ = s.unmap() // a mapping of our own making: it cannot fail but for a bug
		s.m, s.unmap = nil, nil
	}
	if s.f != nil {
		_ = s.f.Close() // read-only: nothing to lose
		s.f = nil
	}
}

// refresh brings a follower's table up to the segments in the directory:
// a segment that appeared is added, one that is gone (deleted by
// retention; Readers in it keep their reference) is dropped, and a
// segment with a successor is sealed: its end is the successor's first
// sequence number. It never changes a listed segment's file or mapping.
func (t *segTable) refresh() error {
	segs, _, _, err := listSegments(t.fsys, t.dir)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	old := t.mu.segs
	next := make([]*liveSeg, 0, len(segs))
	i := 0
	for _, s := range segs {
		for i < len(old) && old[i].firstSeq < s.firstSeq {
			t.dropLocked(old[i])
			i++
		}
		if i < len(old) && old[i].firstSeq == s.firstSeq {
			next = append(next, old[i])
			i++
			continue
		}
		next = append(next, &liveSeg{firstSeq: s.firstSeq, name: s.name, refs: 1})
	}
	for ; i < len(old); i++ {
		t.dropLocked(old[i])
	}
	for k := 0; k+1 < len(next); k++ {
		if next[k].end.Load() == 0 {
			next[k].end.Store(next[k+1].firstSeq)
		}
	}
	t.mu.segs = next
	if len(next) > 0 {
		t.first.Store(next[0].firstSeq)
	}
	return nil
}

// after reports whether the table lists a segment after the one whose
// first record is seq.
func (t *segTable) after(seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	segs := t.mu.segs
	return len(segs) > 0 && segs[len(segs)-1].firstSeq > seq
}

// close drops the table's references (Log.Close). Readers keep theirs.
func (t *segTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return
	}
	t.mu.closed = true
	for _, s := range t.mu.segs {
		t.dropLocked(s)
	}
	t.mu.segs = nil
}

// segIndex is a segment's sparse index: the offset and sequence number of
// a frame every _indexEvery bytes, built by walking frame headers the
// first time a Reader positions itself in the segment, and extended as
// records become visible. It is only a hint: a Reader checks the frame it
// points at (checksum and sequence number) and scans from the segment's
// start when the hint is wrong.
type segIndex struct {
	mu   sync.Mutex
	seqs []uint64 // Protected by mu.
	offs []int64  // Protected by mu.
	// crcs[i] is the checksum field of the frame at offs[i] (0 for the
	// first entry, the start of the data): a Reader positioned at an entry
	// checks that the frame there has it (see frameIs). Protected by mu.
	crcs []uint32
	// The walk resumes at offset off, whose frame should have seq.
	// Protected by mu.
	off     int64
	seq     uint64
	started bool
	stuck   bool // the walk met a header it cannot follow
	// deleted is set when retention deleted the segment: its index file
	// must not be written any more (the sealer may get there after the
	// deletion). Protected by mu.
	deleted bool
}

// note records, for the flusher, that the frame of record seq, whose
// checksum field is crc, starts at off: it becomes an index entry, and the
// walk resumes there, if it lies past the walk. The segWriter calls it
// every _indexEvery bytes, so positioning in a segment this Log wrote
// walks at most that far.
func (s *liveSeg) note(seq uint64, off int64, crc uint32) {
	x := &s.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.started {
		x.start(s.firstSeq)
	}
	if x.stuck || seq <= x.seq || off <= x.off {
		return
	}
	x.seqs, x.offs, x.crcs = append(x.seqs, seq), append(x.offs, off), append(x.crcs, crc)
	x.off, x.seq = off, seq
}

// start starts the index of a segment whose first record is first with
// its first entry, the start of the data. REQUIRES: x.mu held.
func (x *segIndex) start(first uint64) {
	x.started, x.off, x.seq = true, headerPage, first
	x.seqs, x.offs, x.crcs = append(x.seqs, first), append(x.offs, headerPage), append(x.crcs, 0)
}

// frameIs reports whether the frame header at off of s has sequence
// number seq and checksum field crc. REQUIRES: a reference to s held.
func (s *liveSeg) frameIs(off int64, seq uint64, crc uint32) bool {
	var hdr [frame.HeaderSize]byte
	b, ok := s.peek(hdr[:], off)
	return ok && binary.LittleEndian.Uint32(b[0:4]) == crc && binary.LittleEndian.Uint64(b[8:16]) == seq
}

// seek returns the offset, sequence number and checksum field of an
// indexed frame at or before the first record >= target, walking the
// headers of records below limit (the visible ones) as far as needed.
// The checksum field is 0 for the start of the data. REQUIRES: a
// reference to s is held.
func (s *liveSeg) seek(t *segTable, target, limit uint64, maxRec int) (int64, uint64, uint32) {
	x := &s.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.started && s.end.Load() != 0 {
		if size, err := s.f.Size(); err == nil {
			t.loadIndexFile(s, size)
		}
	}
	if !x.started {
		x.start(s.firstSeq)
	}
	if end := s.end.Load(); end != 0 {
		limit = min(limit, end)
	}
	lastOff := x.offs[len(x.offs)-1]
	var hdr [frame.HeaderSize + _gapPayloadSize]byte
	for !x.stuck && x.seq <= target && x.seq < limit {
		b, ok := s.peek(hdr[:frame.HeaderSize], x.off)
		if !ok {
			x.stuck = true
			break
		}
		word := binary.LittleEndian.Uint32(b[4:8])
		length := int(word & frame.MaxPayload)
		kind := frame.Kind(word >> 30)
		seq := binary.LittleEndian.Uint64(b[8:16])
		next := seq + 1
		switch {
		case seq != x.seq || length > maxRec:
			x.stuck = true
		case kind == frame.KindPadding && length == _gapPayloadSize:
			g, ok := s.peek(hdr[:], x.off)
			if !ok {
				x.stuck = true
				break
			}
			n := binary.LittleEndian.Uint64(g[frame.HeaderSize+8:])
			if string(g[frame.HeaderSize:frame.HeaderSize+8]) != _gapMagic || n == 0 || seq+n < seq {
				x.stuck = true
			}
			next = seq + n
		case kind != frame.KindRecord:
			x.stuck = true
		}
		if x.stuck {
			break
		}
		if x.off-lastOff >= _indexEvery {
			x.seqs, x.offs, x.crcs = append(x.seqs, x.seq), append(x.offs, x.off), append(x.crcs, binary.LittleEndian.Uint32(b[0:4]))
			lastOff = x.off
		}
		x.off += int64(frame.HeaderSize + length)
		x.seq = next
	}
	k := max(sort.Search(len(x.seqs), func(i int) bool { return x.seqs[i] > target })-1, 0)
	return x.offs[k], x.seqs[k], x.crcs[k]
}

// peek returns len(buf) bytes of s at off: a slice of the mapping, or buf
// filled by ReadAt. ok is false if they are not there. REQUIRES: a
// reference to s is held.
func (s *liveSeg) peek(buf []byte, off int64) ([]byte, bool) {
	if s.m != nil {
		if off < 0 || off+int64(len(buf)) > int64(len(s.m)) {
			return nil, false
		}
		return s.m[off : off+int64(len(buf))], true
	}
	n, err := s.f.ReadAt(buf, off)
	if n < len(buf) && (err == nil || errors.Is(err, io.EOF)) {
		return nil, false
	}
	return buf, err == nil || errors.Is(err, io.EOF)
}
