package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// Reader reads a log's records in sequence order. A Reader from
// Log.NewReader follows an open log (see NewReader and the package
// documentation's Reading section). A Reader from OpenReader takes no lock
// and never writes: it reads a closed log (dump, verify, tests) with
// ReadAt, and with Wait follows a log another process writes (see
// OpenReader). A Reader is not safe for concurrent use.
//
// It checks as it goes: every frame's checksum, consecutive sequence numbers
// across segments, and each sealed segment's footer. Damage in the unsealed
// tail segment past its durable mark is a torn tail: the Reader stops there
// without error and reports it in Torn. Any other damage is a
// *CorruptionError from Err.
//
// A gap that a forced Repair recorded (records lost to damage, see
// GapError) is never skipped silently: Next returns false and Err returns
// the *GapError. Calling Next again continues with the first record after
// the gap. A gap wholly before the Reader's from is not reported.
type Reader struct {
	fsys    vfs.FS
	dir     string
	segs    []segInfo
	i       int
	from    uint64
	maxRec  int
	foreign []string
	// dirInfo is the log directory as OpenReader found it, nil if it
	// could not be looked at: a follower checks that it is still there
	// (checkDir).
	dirInfo fs.FileInfo
	// sealedOnly stops the Reader before the last segment: it checks the
	// sealed segments only (Options.VerifyOnOpen; recovery scans the tail
	// itself).
	sealedOnly bool
	// ids is the log's ID, from the segment headers read (or given by
	// recovery).
	ids logIDs
	// spare makes the Reader go on, after a last segment that ends in its
	// footer, into the rotation's new segment under spareName if there is
	// one, as Open names it (see adoptSpare). Set by OpenReader.
	spare bool
	// unnamed is the last segment's footer the Reader went on past into
	// such a segment, nil if none (Repair names it first).
	unnamed *unnamedSeg

	f       vfs.File
	sc      *frame.Scanner
	scBuf   *frame.Scanner // a finished segment's scanner, kept for its buffer
	cur     segInfo
	sealed  bool
	footer  frame.Footer
	mark    frame.Mark
	expect  uint64 // sequence number the next record must have
	dataEnd int64  // end of the last good frame in the current segment

	// What ended the last segment, for recovery: a footer frame at
	// footerAt (-1 if none), or an unfinished creation.
	footerAt   int64
	unfinished bool

	// gap is the recorded gap Next stopped at, reported by Err until the
	// next call to Next; gaps lists every gap passed.
	gap  *GapError
	gaps []GapError

	seq     uint64
	rec     []byte
	offset  int64
	records uint64
	bytes   int64
	torn    *TornTail
	err     error
	done    bool
	// closed is set by Close: Next returns false and Wait ErrClosed from
	// then on (Err keeps what stopped Next).
	closed bool

	// liveState follows an open Log (NewReader); zero for OpenReader.
	liveState
}

// TornTail is a torn tail found in the last segment: damage past the last
// durable mark, which Open cuts.
type TornTail struct {
	Segment string
	Offset  int64 // where valid data ends
	Bytes   int64 // non-zero bytes from Offset on
	// Damage says what the bytes at Offset are: a *frame.Damage when they
	// do not decode, or an error naming a frame that decodes but does not
	// belong there (a wrong sequence number or kind).
	Damage error
}

// OpenReader returns a Reader positioned before record from; 0 means the
// log's first record. A from below the first record the log still holds
// (the records before it were deleted by retention or TruncateFront) is a
// *TruncatedError naming that first record, as for NewReader: a reader
// that resumes where it stopped learns that records were deleted instead
// of skipping them. A from past the end waits there (see Following). A
// directory that is not a log is a *NotLogError (see Open).
//
// Following. Next returns false at the end of what the files hold. Wait
// then follows the log as another process (or another Log in this
// process) appends to it, and Next goes on from there:
//
//	r, err := wal.OpenReader(dir, from, nil)
//	for {
//		for r.Next() {
//			use(r.Seq(), r.Record())
//		}
//		if err := r.Err(); err != nil && !wal.IsGap(err) {
//			return err // damage, or a *TruncatedError
//		}
//		if err := r.Wait(ctx); err != nil {
//			return err
//		}
//	}
//
// A following Reader is woken by change events on the directory (inotify
// on Linux) and looks at the files at least every 100ms in any case. It
// sees a record once the writer handed it to the OS: a power cut can take
// back what it saw above the writer's durable mark. It reads the active
// segment with ReadAt and maps a segment only once it is sealed, whose
// size never changes again, so a writer that seals, closes or recovers the
// log never makes it touch bytes past a file's end: no SIGBUS. It moves to
// the next segment once the writer named it (after sealing the previous
// one durably). A segment that retention deletes under it is finished
// from its open file or mapping; the segment after it, if deleted too, is
// a *TruncatedError naming the first record left. A frame that does not
// decode where the writer has not written yet (zeros, a frame being
// written) is waited on; one that the segment's durable mark covers, or in
// a sealed segment, is a *CorruptionError. A log whose directory is removed
// or replaced, or whose files are removed while the directory stays (rm
// DIR/*), perhaps with a new log created in their place, stops the Reader
// with an error naming the directory (wrapping fs.ErrNotExist where the
// files are gone, ErrForeign where a segment of the new log was met),
// where it would wait for ever or read another log's records: Wait looks
// at the segment the Reader is in at most once per poll interval.
func OpenReader(dir string, from uint64, opts *Options) (*Reader, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	segs, foreign, err := openDir(o.fsys, dir, "open reader")
	if err != nil {
		return nil, err
	}
	r := &Reader{fsys: o.fsys, dir: dir, segs: segs, from: from, maxRec: o.MaxRecordSize, foreign: foreign, footerAt: -1, spare: true}
	r.window = o.ReaderWindow // used once Wait makes the Reader a follower
	if fi, err := o.fsys.Stat(dir); err == nil {
		r.dirInfo = fi
	}
	if len(segs) > 0 {
		if from != 0 && from < segs[0].firstSeq {
			// Records from `from` on were deleted (retention, TruncateFront):
			// starting at the first left would skip them unsaid.
			return nil, &TruncatedError{Seq: from, First: segs[0].firstSeq}
		}
		r.expect = segs[0].firstSeq
		// Start at the last segment whose first record is <= from.
		if k := sort.Search(len(segs), func(i int) bool { return segs[i].firstSeq > from }); k > 1 {
			r.i = k - 1
			r.expect = segs[r.i].firstSeq
		}
	}
	return r, nil
}

// Next advances to the next record. It returns false at the end of the log,
// on error, or at a recorded gap (see Err); after a gap, Next continues
// with the record after it.
func (r *Reader) Next() bool {
	if r.tab != nil {
		if r.quick() {
			return true
		}
		return r.nextLive()
	}
	r.gap = nil
	for !r.done {
		if r.f == nil {
			if r.i >= len(r.segs) || r.sealedOnly && r.i == len(r.segs)-1 {
				r.finish(nil)
				return false
			}
			if err := r.openSegment(); err != nil {
				r.finish(err)
				return false
			}
			continue
		}
		if r.sc.Next() {
			fr := r.sc.Frame()
			off := r.sc.Offset()
			if fr.Kind == frame.KindFooter && !r.sealed && r.i == len(r.segs)-1 {
				// The last segment was sealed (or being sealed) when the
				// writer stopped: a footer right after its last record.
				// Open finishes the seal.
				if err := r.checkFooterFrame(fr, off); err != nil {
					r.endSegment(&misplacedFrame{Offset: off, Err: err})
					continue
				}
				r.footerAt = off
				r.endSegment(nil)
				if r.spare && !r.done {
					s, ok, err := r.unnamedNext()
					if err != nil {
						r.finish(err)
						return false
					}
					if ok {
						r.unnamed = &unnamedSeg{prev: r.cur, footerAt: off, next: s}
						r.segs = append(slices.Clip(r.segs), s)
					}
				}
				continue
			}
			if n, ok := decodeGap(fr); ok && fr.Seq == r.expect {
				g := GapError{Segment: r.cur.name, Offset: off, First: fr.Seq, End: fr.Seq + n}
				r.expect = g.End
				r.dataEnd = off + gapFrameSize
				r.gaps = append(r.gaps, g)
				if g.End > r.from {
					r.gap, r.rec = &g, nil
					return false
				}
				continue
			}
			var bad error
			switch {
			case fr.Kind != frame.KindRecord:
				bad = fmt.Errorf("unexpected %v frame", fr.Kind)
			case fr.Seq != r.expect:
				bad = fmt.Errorf("record has seq %d, want %d", fr.Seq, r.expect)
			}
			if bad != nil {
				r.endSegment(&misplacedFrame{Offset: off, Err: bad})
				continue
			}
			r.expect++
			r.dataEnd = off + int64(frame.Size(len(fr.Payload)))
			r.records++
			r.bytes += int64(len(fr.Payload))
			if fr.Seq < r.from {
				continue
			}
			r.seq, r.rec, r.offset = fr.Seq, fr.Payload, off
			return true
		}
		err := r.sc.Err()
		if err != nil && !frame.IsDamage(err) {
			r.finish(fmt.Errorf("wal: read %s: %w", r.cur.name, err))
			return false
		}
		if d, ok := errors.AsType[*frame.Damage](err); ok && errors.Is(d.Err, frame.ErrTooLarge) {
			if big := oversizedRecord(r.f, r.cur.name, d.Offset, r.maxRec); big != nil {
				r.finish(big)
				return false
			}
		}
		r.endSegment(err)
	}
	return false
}

// relist lists the directory again after the listing the Reader opened
// with skipped from seq r.expect to r.segs[r.i]: a directory listing is not
// a snapshot (ext4 returns entries in hash order, and one created while
// the listing runs may be left out), so a segment a writer created during
// OpenReader's listing can be missing from it while a later one is there.
// The segments found in between are spliced in; a gap that a fresh listing
// shows too is real.
func (r *Reader) relist() {
	segs, _, _, err := listSegments(r.fsys, r.dir)
	if err != nil {
		return // the gap is reported; the listing error would only hide it
	}
	next := r.segs[r.i].firstSeq
	var missed []segInfo
	for _, s := range segs {
		if s.firstSeq >= r.expect && s.firstSeq < next {
			missed = append(missed, s)
		}
	}
	if len(missed) > 0 {
		r.segs = slices.Insert(slices.Clip(r.segs), r.i, missed...)
	}
}

// deletedBefore reports whether the segment whose first record is seq,
// which the Reader listed but failed to open with err, is gone because
// the log's front was deleted: it is missing and a later segment is
// there. first is the first record of the oldest segment left.
func (r *Reader) deletedBefore(seq uint64, err error) (first uint64, ok bool) {
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, false
	}
	segs, _, _, lerr := listSegments(r.fsys, r.dir)
	if lerr != nil || len(segs) == 0 || segs[0].firstSeq <= seq {
		return 0, false
	}
	return segs[0].firstSeq, true
}

func (r *Reader) corrupt(off int64, err error) error {
	if d, ok := err.(*frame.Damage); ok && d == &r.dmg {
		c := *d // r.dmg is reused
		err = &c
	}
	return &CorruptionError{Dir: r.dir, Segment: r.cur.name, Offset: off, Err: err}
}

func (r *Reader) openSegment() error {
	if r.segs[r.i].firstSeq != r.expect {
		r.relist()
	}
	s := r.segs[r.i]
	r.cur = s
	last := r.i == len(r.segs)-1
	if s.firstSeq != r.expect {
		prev := "the log's start"
		if r.i > 0 {
			prev = r.segs[r.i-1].name
		}
		return r.corrupt(0, chainError(prev, r.expect, s.firstSeq))
	}
	f, err := r.openFile(s)
	if err != nil {
		if first, ok := r.deletedBefore(s.firstSeq, err); ok {
			// Retention deleted it since the listing, in the process
			// that writes the log.
			return &TruncatedError{Seq: max(r.expect, r.from), First: first}
		}
		return fmt.Errorf("wal: open %s: %w", s.name, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return fmt.Errorf("wal: stat %s: %w", s.name, err)
	}
	h, mark, err := readHeader(f)
	if err != nil {
		if last {
			if end, zerr := lastNonZero(f, min(headerPage, size), size); zerr == nil && end <= min(headerPage, size) {
				// A segment whose creation did not finish: Open removes it.
				f.Close()
				r.unfinished = true
				r.torn = &TornTail{Segment: s.name, Offset: 0, Bytes: 0, Damage: fmt.Errorf("unfinished segment (no header, no records): %w", err)}
				r.i++
				return nil
			}
		}
		f.Close()
		return r.corrupt(0, fmt.Errorf("bad header: %w", err))
	}
	if h.FirstSeq != s.firstSeq {
		f.Close()
		return r.corrupt(0, fmt.Errorf("header says first seq %d, name says %d", h.FirstSeq, s.firstSeq))
	}
	if err := r.ids.see(filepath.Join(r.dir, s.name), h.Log); err != nil {
		f.Close()
		return err
	}
	// Only a segment with a successor is known to be sealed (see
	// recoverLog); the last one is scanned to its end, and a footer frame
	// right after its last record ends it.
	ft, ferr := readFooter(f, size)
	r.sealed = ferr == nil && !last
	limit := size
	if r.sealed {
		if ft.FirstSeq != s.firstSeq {
			f.Close()
			return r.corrupt(size-frame.FooterSize, fmt.Errorf("footer says first seq %d, name says %d", ft.FirstSeq, s.firstSeq))
		}
		limit = ft.DataEnd
	}
	r.f, r.footer, r.mark = f, ft, mark
	r.dataEnd = headerPage
	data := io.NewSectionReader(f, headerPage, max(limit-headerPage, 0))
	if r.scBuf != nil {
		r.sc, r.scBuf = r.scBuf, nil
		r.sc.Reset(data, headerPage)
	} else {
		r.sc = frame.NewScanner(data, headerPage, r.maxRec)
	}
	return nil
}

// unnamedSeg is a rotation's new segment, still under spareName, that a
// Reader went on into after prev, which ends in a footer at footerAt.
type unnamedSeg struct {
	prev     segInfo
	footerAt int64
	next     segInfo
}

// unnamedNext returns the rotation's new segment that follows the last
// segment, which ended in its footer before record r.expect, if the
// writer had not named it yet: the file under spareName with a header
// of the log (rotate writes it, createSpare never does) whose first
// record is r.expect. A header that could not be read is an error, as
// for Open (see adoptSpare).
func (r *Reader) unnamedNext() (segInfo, bool, error) {
	f, err := r.fsys.OpenRegular(filepath.Join(r.dir, spareName), os.O_RDONLY, 0)
	if err != nil {
		return segInfo{}, false, nil
	}
	ok, err := isNextSegment(f, r.expect, r.ids.id)
	f.Close()
	if !ok || err != nil {
		return segInfo{}, false, err
	}
	return segInfo{name: segmentName(r.expect), firstSeq: r.expect, file: spareName}, true, nil
}

// openFile opens segment s for reading. A segment under spareName that
// is no longer there with its header was named by its writer since:
// it is opened by its name.
func (r *Reader) openFile(s segInfo) (vfs.File, error) {
	if s.file != "" {
		if f, err := r.fsys.OpenRegular(filepath.Join(r.dir, s.file), os.O_RDONLY, 0); err == nil {
			if h, _, err := readHeader(f); err == nil && h.FirstSeq == s.firstSeq {
				return f, nil
			}
			f.Close()
		}
	}
	return r.fsys.OpenRegular(filepath.Join(r.dir, s.name), os.O_RDONLY, 0)
}

// endSegment closes the current segment after its frames ran out (damage nil
// for a clean end) and decides whether what ended it is acceptable.
func (r *Reader) endSegment(damage error) {
	name := r.cur.name
	defer func() {
		if r.f != nil {
			r.f.Close()
			r.f, r.sc, r.scBuf = nil, nil, r.sc // the next segment reuses the scanner's buffer
		}
		r.i++
	}()
	if r.sealed {
		if damage != nil {
			r.finish(r.corrupt(damageOffset(damage, r.dataEnd), damage))
			return
		}
		if want := r.footer.FirstSeq + r.footer.Count; r.expect != want {
			r.finish(r.corrupt(r.footer.DataEnd, fmt.Errorf("footer counts records up to seq %d, found up to %d", want-1, r.expect-1)))
		}
		return
	}
	if r.i < len(r.segs)-1 {
		// Unsealed but not last: it should have been sealed before the next
		// segment was created.
		why := fmt.Errorf("segment has no valid footer but is followed by %s", r.segs[r.i+1].name)
		if damage != nil {
			why = fmt.Errorf("%w: %w", why, damage)
		}
		r.finish(r.corrupt(r.dataEnd, why))
		return
	}
	// Unsealed: the last segment.
	if r.mark.DurableEnd > r.dataEnd {
		why := fmt.Errorf("records up to offset %d (seq %d) were durable, but valid data ends here", r.mark.DurableEnd, r.mark.NextSeq-1)
		if damage != nil {
			why = fmt.Errorf("%w: %w", why, damage)
		}
		r.finish(r.corrupt(r.dataEnd, why))
		return
	}
	if damage != nil {
		var extent int64
		var d *frame.Damage
		if errors.As(damage, &d) && d.Offset == r.dataEnd && d.Extent > 0 {
			extent = d.Extent
		} else if size, err := r.f.Size(); err == nil {
			if last, err := lastNonZero(r.f, r.dataEnd, size); err == nil {
				extent = last - r.dataEnd
			}
		}
		if extent > 0 {
			r.torn = &TornTail{Segment: name, Offset: r.dataEnd, Bytes: extent, Damage: damage}
		}
	}
}

// checkFooterFrame checks that a footer frame found at off after the last
// record describes the records read.
func (r *Reader) checkFooterFrame(fr frame.Frame, off int64) error {
	b := make([]byte, frame.FooterSize)
	if frame.Size(len(fr.Payload)) != frame.FooterSize {
		return fmt.Errorf("footer frame of %d bytes: %w", frame.Size(len(fr.Payload)), frame.ErrFooter)
	}
	frame.EncodeKind(b, fr.Kind, fr.Seq, fr.Payload)
	ft, err := frame.DecodeFooter(b)
	if err != nil {
		return err
	}
	if ft.FirstSeq != r.cur.firstSeq || ft.FirstSeq+ft.Count != r.expect || ft.DataEnd != off {
		return fmt.Errorf("footer (first %d, count %d, data end %d) does not match the records before it: %w", ft.FirstSeq, ft.Count, ft.DataEnd, frame.ErrFooter)
	}
	return nil
}

// oversizedRecord returns an error wrapping ErrTooLarge if f, segment
// seg, holds at off an intact record frame whose payload is longer than
// maxRec (a record a Log with a larger Options.MaxRecordSize wrote), and
// nil otherwise. A Reader that met a length above its limit calls it
// before taking the bytes for damage: a record is never cut, nor reported
// as corruption, for a smaller MaxRecordSize. It checks the checksum in
// chunks, so a garbage length costs reads, not memory.
func oversizedRecord(f vfs.File, seg string, off int64, maxRec int) error {
	var h [frame.HeaderSize]byte
	if n, _ := f.ReadAt(h[:], off); n < len(h) {
		return nil
	}
	word := binary.LittleEndian.Uint32(h[4:8])
	length := int64(word & frame.MaxPayload)
	size, err := f.Size()
	if err != nil || frame.Kind(word>>30) != frame.KindRecord || length <= int64(maxRec) || off+frame.HeaderSize+length > size {
		return nil
	}
	crc := crc32.Update(0, _castagnoli, h[4:])
	buf := make([]byte, min(length, 1<<20))
	for p, end := off+frame.HeaderSize, off+frame.HeaderSize+length; p < end; {
		b := buf[:min(int64(len(buf)), end-p)]
		if n, _ := f.ReadAt(b, p); n < len(b) {
			return nil
		}
		crc = crc32.Update(crc, _castagnoli, b)
		p += int64(len(b))
	}
	if frame.Mask(crc) != binary.LittleEndian.Uint32(h[0:4]) {
		return nil
	}
	return fmt.Errorf("%w: %s at byte offset %d holds an intact record of %d bytes, more than MaxRecordSize %d: the log was written with a larger MaxRecordSize; open or read it with at least %d",
		ErrTooLarge, seg, off, length, maxRec, length)
}

// misplacedFrame is a frame that decodes (its checksum is right) but does
// not belong where it is: a wrong sequence number, an unexpected kind, a
// footer that does not match. It is the wal's own finding, kept apart from
// *frame.Damage, whose Err is always one of package frame's decode errors.
type misplacedFrame struct {
	Offset int64
	Err    error
}

func (e *misplacedFrame) Error() string {
	return fmt.Sprintf("%v at offset %d", e.Err, e.Offset)
}

func (e *misplacedFrame) Unwrap() error { return e.Err }

// damageOffset returns the offset of a *frame.Damage or *misplacedFrame in
// err, or def.
func damageOffset(err error, def int64) int64 {
	var d *frame.Damage
	if errors.As(err, &d) {
		return d.Offset
	}
	var m *misplacedFrame
	if errors.As(err, &m) {
		return m.Offset
	}
	return def
}

func (r *Reader) finish(err error) {
	if r.err == nil {
		r.err = err
	}
	r.done = true
	r.rec = nil
}

// Seq returns the current record's sequence number.
func (r *Reader) Seq() uint64 { return r.seq }

// Record returns the current record's payload, valid until the next call to
// Next or Close. For a Reader from NewReader it is usually a slice of a
// read-only mapping of the segment: do not write to it.
func (r *Reader) Record() []byte { return r.rec }

// Position returns the segment and byte offset of the current record.
func (r *Reader) Position() (segment string, offset int64) { return r.cur.name, r.offset }

// Err returns the error that stopped Next: nil at a clean end (a torn
// tail included: see Torn), a *GapError at a recorded gap (Next goes on
// after it), or the error that ended the read.
func (r *Reader) Err() error {
	if r.err != nil {
		return r.err
	}
	if r.gap != nil {
		return r.gap
	}
	return nil
}

// readThroughGaps calls Next until the end of the log, passing recorded
// gaps (listed in r.gaps). For Verify and recovery, which read for the
// checks, not the records.
func (r *Reader) readThroughGaps() {
	for r.Next() || r.gap != nil {
	}
}

// Torn returns the torn tail the Reader stopped at, or nil.
func (r *Reader) Torn() *TornTail { return r.torn }

// NextSeq returns the sequence number after the last record read.
func (r *Reader) NextSeq() uint64 { return r.expect }

// Close releases the Reader's file, or its segment and mapping. After
// Close, Next returns false, Record nil, and Wait an error wrapping
// ErrClosed; Err still reports what stopped Next before.
func (r *Reader) Close() error {
	// Record's slice may be of a mapping Close releases: Record returns
	// nil from now on.
	r.done, r.closed, r.rec = true, true, nil
	var err error
	if r.tab != nil {
		err = r.closeLive()
	}
	if r.f != nil {
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
		r.f, r.sc = nil, nil
	}
	return err
}
