package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
)

// Visibility says which records a Reader of an open Log may see.
type Visibility int

// Visibilities.
const (
	// ReadWritten (the default) shows a record once it was handed to the
	// OS (written to the page cache): a crash of this process cannot take
	// it back, but a power cut or OS crash can, unless it was also synced.
	ReadWritten Visibility = iota + 1
	// ReadDurable shows a record only once it survived fdatasync: nothing
	// a Reader sees is ever taken back.
	ReadDurable
)

// ReaderOptions configures a Reader of an open Log. A nil *ReaderOptions,
// or a zero field, means the default.
type ReaderOptions struct {
	// Visibility is ReadWritten by default.
	Visibility Visibility
}

// NewReader returns a Reader of the open log that follows its tail,
// positioned before record from (0 means the log's first record). It reads
// through the log's own list of segments, each mapped read-only where the
// platform allows (ReadAt otherwise), and CRC-checks every record.
//
// Next returns false when no further record is visible yet, with Err nil;
// Wait then blocks until one is. Records are visible as
// ReaderOptions.Visibility says. A Reader waiting in Wait makes the
// flusher write (and for ReadDurable, sync) at once, as WaitDurable does.
//
// from below FirstSeq is a *TruncatedError naming the first record
// available; from past NextSeq is ErrNotAppended. Many Readers may follow
// one log, each at its own position and each used by one goroutine, while
// appends, rotation and retention go on. Close releases the Reader's
// segment; it is needed even after the Log is closed.
func (l *Log) NewReader(from uint64, opts *ReaderOptions) (*Reader, error) {
	vis := ReadWritten
	if opts != nil && opts.Visibility != 0 {
		vis = opts.Visibility
	}
	if vis != ReadWritten && vis != ReadDurable {
		return nil, fmt.Errorf("wal: new reader: unknown visibility %d", vis)
	}
	if err := l.mapErr(l.eng.Err()); err != nil {
		return nil, err
	}
	if from == 0 {
		from = l.FirstSeq()
	}
	if next := l.NextSeq(); from > next {
		return nil, fmt.Errorf("%w: new reader from %d (next is %d)", ErrNotAppended, from, next)
	}
	ls, err := l.segs.acquire(from)
	if err != nil {
		return nil, err
	}
	r := &Reader{dir: l.dir, from: from, maxRec: l.maxRec, liveState: liveState{l: l, tab: l.segs, vis: &l.w.written, ls: ls, window: l.opts.ReaderWindow}}
	if vis == ReadDurable {
		r.vis = &l.w.durable
	}
	r.cur = segInfo{name: ls.name, firstSeq: ls.firstSeq}
	r.off, r.expect, r.hintCRC = ls.seek(l.segs, from, r.vis.Load(), l.maxRec)
	r.hinted = r.off != headerPage
	return r, nil
}

// liveState is the part of a Reader that follows an open Log, or, for a
// Reader from OpenReader once Wait was called, a log another process
// writes.
type liveState struct {
	// l is the open Log followed; nil for a Reader from OpenReader.
	l *Log
	// tab lists the segments read: l.segs, or the follower's own table.
	// nil while a Reader from OpenReader reads with its scanner.
	tab *segTable
	// fol is set for a Reader from OpenReader that follows the files.
	fol *followState
	// followPoll is a follower's fallback poll interval; 0 means
	// _followPoll. Tests set it to prove that change events alone wake
	// the follower.
	followPoll time.Duration
	// vis is the visibility frontier: the sequence number after the last
	// visible record (the segWriter's written or durable); nil for a
	// follower, which sees every whole record in the files.
	vis *atomic.Uint64
	// ls is the segment read, with a reference held; off is the offset of
	// the next frame in it.
	ls  *liveSeg
	off int64
	// released is the offset in ls below which the Reader has told the
	// kernel it no longer needs the mapping's pages, and window how far
	// past it the Reader reads before it does so again (see
	// releaseBehind and Options.ReaderWindow).
	released, window int64
	// hinted is set while off came from the sparse index and no frame was
	// read there yet: a wrong hint sends the Reader back to the segment's
	// start instead of failing. hintCRC is the checksum field the index
	// entry says the frame at off has.
	hinted  bool
	hintCRC uint32
	// buf holds a frame read with ReadAt where ls is not mapped, and
	// hdr its header.
	buf []byte
	hdr [frame.HeaderSize]byte
	// dmg is the *frame.Damage frameAt returns, reused: a follower meets
	// one at the end of what the writer wrote on every wait. corrupt keeps
	// a copy of it.
	dmg frame.Damage
}

// damage returns the Damage at off, in r.dmg.
func (r *Reader) damage(off int64, err error) error {
	r.dmg = frame.Damage{Offset: off, Err: err}
	return &r.dmg
}

// nextLive is Next for a Reader of an open Log.
func (r *Reader) nextLive() bool {
	r.gap = nil
	r.rec = nil
	if r.done {
		return false
	}
	if r.off-r.released >= r.window && r.ls != nil {
		r.releaseBehind()
	}
	for {
		if r.ls == nil {
			// A follower of a log that had no segment yet.
			if !r.followStart() {
				return false
			}
			continue
		}
		if r.vis != nil && r.expect >= r.vis.Load() {
			return false
		}
		if end := r.ls.end.Load(); end != 0 && r.expect >= end {
			if !r.advance() {
				return false
			}
			continue
		}
		if r.fastRecord() {
			if r.seq < r.from {
				continue
			}
			return true
		}
		fr, n, err := r.frameAt(r.off)
		if err == nil && fr.Seq != r.expect {
			err = &misplacedFrame{Offset: r.off, Err: fmt.Errorf("%v frame has seq %d, want %d", fr.Kind, fr.Seq, r.expect)}
		}
		if err == nil && r.hinted && !r.ls.frameIs(r.off, r.expect, r.hintCRC) {
			// A frame with the right sequence number, but not the one the
			// index entry names: one inside a record's payload, found
			// through an index of another segment (see index.go).
			err = &misplacedFrame{Offset: r.off, Err: errors.New("not the frame the index names")}
		}
		if err != nil && r.hinted {
			// The index pointed at the wrong place: scan from the start.
			r.hinted = false
			r.off, r.expect = headerPage, r.ls.firstSeq
			continue
		}
		r.hinted = false
		if err != nil && errors.Is(err, frame.ErrTooLarge) {
			if big := oversizedRecord(r.ls.f, r.ls.name, r.off, r.maxRec); big != nil {
				r.finish(big)
				return false
			}
		}
		if err != nil && r.fol != nil {
			r.followDamage(err)
			return false
		}
		if err != nil {
			r.finish(r.corrupt(r.off, err))
			return false
		}
		if fr.Kind == frame.KindFooter && r.fol != nil {
			// The writer sealed the segment: the next one starts here. The
			// table may already give the segment an end, and a later one:
			// the start of the next segment its listing showed, where a
			// listing that ran while the writer renamed segments into place
			// (it is not a snapshot) can have missed the ones between. The
			// footer, which must describe the records before it, is the
			// truth; advance lists the directory again.
			if err := r.checkFooterFrame(fr, r.off); err != nil {
				r.finish(r.corrupt(r.off, &misplacedFrame{Offset: r.off, Err: err}))
				return false
			}
			r.ls.end.Store(r.expect)
			continue
		}
		if cnt, ok := decodeGap(fr); ok {
			g := GapError{Segment: r.ls.name, Offset: r.off, First: fr.Seq, End: fr.Seq + cnt}
			r.off += int64(n)
			r.expect = g.End
			if g.End > r.from {
				r.gap = &g
				return false
			}
			continue
		}
		if fr.Kind != frame.KindRecord {
			r.finish(r.corrupt(r.off, &misplacedFrame{Offset: r.off, Err: fmt.Errorf("unexpected %v frame", fr.Kind)}))
			return false
		}
		off := r.off
		r.off += int64(n)
		r.expect++
		if fr.Seq < r.from {
			continue
		}
		r.seq, r.rec, r.offset = fr.Seq, fr.Payload, off
		return true
	}
}

// _pageSize is the size of a page of a mapping.
var _pageSize = int64(os.Getpagesize())

// releaseBehind tells the kernel that the whole pages of the mapping before
// the Reader's position are not needed (MADV_DONTNEED). Every page a Reader
// touches counts in the process's RSS until it is unmapped: without this,
// a process reading many streams holds each active segment's read bytes
// resident (up to SegmentSize apiece). The data stays in the file and the
// page cache: a Reader of the same mapping that is further behind, or a
// record slice handed out earlier, faults the page back in.
//
// It runs every ReaderWindow bytes, not when the Reader waits at the end:
// there each release is followed at once by a fault on the page the next
// record lands in, the kernel maps that page's whole folio again (released
// pages with it), and the shootdown of the other CPUs' TLB entries on every
// record delayed deliveries (e2e p99 at 330k msg/s over 20 streams doubled)
// while RSS rose.
func (r *Reader) releaseBehind() {
	if r.ls.m == nil {
		return
	}
	end := min(r.off, int64(len(r.ls.m))) &^ (_pageSize - 1)
	if end <= r.released {
		return
	}
	// Advice on our own read-only mapping: an error would only mean the
	// pages stay resident.
	_ = sys.Madvise(r.ls.m[r.released:end], sys.AdviceDontNeed)
	r.released = end
}

// quick is nextLive's common case, without its loop: the next record is
// visible, at or past from, and whole in the current segment's mapping
// (see fastRecord). It reports false, having changed nothing, for
// anything else.
func (r *Reader) quick() bool {
	ls := r.ls
	if ls == nil || r.done || r.gap != nil || r.expect < r.from || r.off-r.released >= r.window {
		return false
	}
	if r.vis != nil && r.expect >= r.vis.Load() {
		return false
	}
	if end := ls.end.Load(); end != 0 && r.expect >= end {
		return false
	}
	return r.fastRecord()
}

// _castagnoli is the CRC-32C table (hardware accelerated). Never written.
var _castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fastRecord reads the next record straight from the mapping when it is
// an intact record frame with the expected sequence number: one CRC over
// the contiguous header fields and payload, as frame.Decode computes it.
// Anything else (no mapping, a gap, damage, an index hint whose frame
// nextLive must check) it leaves to the general path in nextLive, which
// decodes and reports.
func (r *Reader) fastRecord() bool {
	m, off := r.ls.m, r.off
	if r.hinted || m == nil || off+frame.HeaderSize > int64(len(m)) {
		return false
	}
	b := m[off:]
	word := binary.LittleEndian.Uint32(b[4:8])
	n := int64(frame.HeaderSize) + int64(word&frame.MaxPayload)
	if frame.Kind(word>>30) != frame.KindRecord || n-frame.HeaderSize > int64(r.maxRec) || n > int64(len(b)) ||
		binary.LittleEndian.Uint64(b[8:16]) != r.expect {
		return false
	}
	b = b[:n:n]
	if frame.Mask(crc32.Update(0, _castagnoli, b[4:])) != binary.LittleEndian.Uint32(b[0:4]) {
		return false
	}
	r.seq, r.rec, r.offset = r.expect, b[frame.HeaderSize:], off
	r.off += n
	r.expect++
	return true
}

// frameAt decodes the frame at off of the current segment: in place in
// the mapping, or read into r.buf. It reads only a visible record's bytes:
// the header's length is checked against MaxRecordSize and the mapping
// before the payload is touched.
func (r *Reader) frameAt(off int64) (frame.Frame, int, error) {
	h, ok := r.ls.peek(r.hdr[:], off)
	if !ok {
		return frame.Frame{}, 0, r.damage(off, frame.ErrTruncated)
	}
	length := int(binary.LittleEndian.Uint32(h[4:8]) & frame.MaxPayload)
	if length > max(r.maxRec, _gapPayloadSize) {
		return frame.Frame{}, 0, r.damage(off, frame.ErrTooLarge)
	}
	n := frame.HeaderSize + length
	var b []byte
	if m := r.ls.m; m != nil {
		if off+int64(n) > int64(len(m)) {
			return frame.Frame{}, 0, r.damage(off, frame.ErrTruncated)
		}
		b = m[off : off+int64(n)]
	} else {
		if cap(r.buf) < n {
			r.buf = make([]byte, n)
		}
		b = r.buf[:n]
		k, err := r.ls.f.ReadAt(b, off)
		if k < n {
			if err == nil || errors.Is(err, io.EOF) {
				return frame.Frame{}, 0, r.damage(off, frame.ErrTruncated)
			}
			return frame.Frame{}, 0, fmt.Errorf("read at %d: %w", off, err)
		}
	}
	fr, _, err := frame.Decode(b)
	if err != nil {
		return frame.Frame{}, 0, r.damage(off, err)
	}
	return fr, n, nil
}

// advance moves to the segment after the current one, which ended. A
// follower whose next segment is not named yet stays where it is.
func (r *Reader) advance() bool {
	end := r.ls.end.Load()
	if r.fol != nil {
		if err := r.tab.refresh(); err != nil {
			r.finish(err)
			return false
		}
	}
	next, err := r.tab.acquire(end)
	if err == nil && next.firstSeq != end && r.fol != nil && r.tab.after(next.firstSeq) {
		// A listing is not a snapshot: one that ran while the writer
		// renamed segments into place can show a later segment and miss
		// the one starting at end. A listing that starts after it saw the
		// later one shows it, unless it is missing.
		r.tab.release(next)
		if err := r.tab.refresh(); err != nil {
			r.finish(err)
			return false
		}
		next, err = r.tab.acquire(end)
	}
	if err != nil {
		if _, ok := errors.AsType[*TruncatedError](err); ok && r.fol != nil && r.from > end {
			// Deleted, but the Reader wants only records from r.from on
			// (it began past the log's end): position finds them.
			r.tab.release(r.ls)
			r.ls, r.expect = nil, end
			if err := r.position("", 0); err != nil {
				r.finish(err)
				return false
			}
			return true
		}
		r.finish(err)
		return false
	}
	if next.firstSeq != end {
		// Only a follower gets here: the segment after this one is not
		// listed yet (the writer names it after sealing this one), or it
		// is missing.
		later := r.tab.after(next.firstSeq)
		r.tab.release(next)
		if later {
			r.finish(r.corrupt(r.off, fmt.Errorf("gap in the log: %s ends before seq %d, but no segment starts there (a segment is missing)", r.ls.name, end)))
		}
		return false
	}
	if r.fol != nil {
		if err := r.sameLog(next); err != nil {
			r.tab.release(next)
			r.finish(err)
			return false
		}
	}
	r.tab.release(r.ls)
	r.ls = next
	r.cur = segInfo{name: next.name, firstSeq: next.firstSeq}
	r.off, r.released = headerPage, 0
	return true
}

// sameLog checks that the segment a follower moves into belongs to the
// log it read so far (the log ID in its header, see logIDs): the files of
// a log removed and a new log created in the directory would otherwise
// be read on as the same log, from a position in the old one.
// REQUIRES: a reference to ls held.
func (r *Reader) sameLog(ls *liveSeg) error {
	h, _, err := readHeader(ls.f)
	if err != nil {
		return nil // a header that does not read is Next's to report
	}
	if !h.Log.Matches(r.ids.id) {
		return fmt.Errorf("wal: follow %s: segment %s has log id %s, but the log the Reader followed has log id %s (from %s): the log's files were removed and a new log created in the directory: %w",
			r.dir, ls.name, h.Log, r.ids.id, r.ids.from, ErrForeign)
	}
	if r.ids.id.IsZero() {
		r.ids.id, r.ids.from = h.Log, filepath.Join(r.dir, ls.name)
	}
	return nil
}

// Wait blocks until a record after the last one Next returned is visible
// (Next then returns it), ctx is done, or the log is closed (ErrClosed) or
// failed. While it waits, the flusher hands new records to the OS at once
// (with ReadDurable, syncs them at once), so a record appended to an idle
// log reaches a waiting Reader without waiting for FlushInterval. A nil
// ctx is ErrNilContext.
//
// On a Reader from OpenReader, Wait follows the files of a log that
// another process (or another Log in this process) writes: see Following
// in OpenReader's documentation. It returns once the files hold something
// past the Reader's position (Next then returns the next record, or
// reports a gap, damage or a *TruncatedError), ctx is done, or the
// Reader's end is final (an error: Err). It may also return after a
// change that turns out to hold no whole record; Next then returns false
// and Err nil, and the caller waits again.
func (r *Reader) Wait(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Wait", ErrNilContext)
	}
	return r.wait(ctx, nil)
}

// wait is Wait that, on a Reader of an open Log, also returns ErrWoken
// when wake can be received from. A nil wake never fires.
func (r *Reader) wait(ctx context.Context, wake <-chan struct{}) error {
	if r.closed {
		return errReaderClosed
	}
	if r.l == nil {
		return r.waitFollow(ctx)
	}
	if r.done {
		return r.Err()
	}
	want := max(r.expect, r.from) + 1
	if r.vis.Load() >= want {
		return nil
	}
	l := r.l
	if r.vis == &l.w.durable {
		if err := l.mapErr(l.eng.AwaitAtLeastOrWake(ctx, &l.w.written, want, wake)); err != nil {
			return err
		}
		pos, _ := l.eng.Tail()
		l.eng.RequestSync(pos)
	}
	return l.mapErr(l.eng.AwaitAtLeastOrWake(ctx, r.vis, want, wake))
}

// errReaderClosed is returned by Wait on a closed Reader.
var errReaderClosed = fmt.Errorf("%w: reader closed", ErrClosed)

// closeLive releases the Reader's segment, and a follower's table and
// watcher.
func (r *Reader) closeLive() error {
	if r.ls != nil {
		r.tab.release(r.ls)
		r.ls = nil
	}
	if r.fol == nil {
		return nil
	}
	r.tab.close()
	if w := r.fol.w; w != nil {
		r.fol.w = nil
		return w.Close()
	}
	return nil
}

// String returns the visibility's name, e.g. "durable".
func (v Visibility) String() string {
	switch v {
	case ReadWritten:
		return "written"
	case ReadDurable:
		return "durable"
	}
	return fmt.Sprintf("Visibility(%d)", int(v))
}

// _followPoll bounds how long a follower's Wait sleeps without a change
// event before it looks at the files again: the fallback where inotify is
// missing or an event is lost, and how long a cancelled ctx may go
// unnoticed while Wait sleeps.
const _followPoll = 100 * time.Millisecond

// followState is a Reader's state while it follows the files of a log
// that another process writes (OpenReader, then Wait).
type followState struct {
	// w reports changes in the log directory; nil where it cannot be
	// watched (Wait then polls every _followPoll).
	w *sys.Watcher
	// listed is set once the table was refreshed at a segment's end, and
	// cleared by each change event (and poll): Wait rereads the directory
	// once per change.
	listed bool
	// seg is the segment whose file segmentGone last looked at, segFile
	// the file it found at seg's name when the Reader first waited in it
	// (nil if none), and looked when it last looked (see segmentGone).
	seg     *liveSeg
	segFile fs.FileInfo
	looked  time.Time
}

// waitFollow is Wait for a Reader from OpenReader.
func (r *Reader) waitFollow(ctx context.Context) error {
	if r.done && r.fol == nil {
		if r.err != nil {
			return r.err
		}
		if err := r.startFollow(); err != nil {
			r.finish(err)
			return err
		}
	}
	if r.tab == nil {
		// The scanner has not reached the end yet: Next has more.
		return nil
	}
	for {
		if r.done {
			if err := r.Err(); err != nil {
				return err
			}
			return ErrClosed
		}
		if r.gap != nil || r.pending() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		poll := _followPoll
		if r.followPoll > 0 {
			poll = r.followPoll
		}
		if r.fol.seg != r.ls {
			// The first wait in this segment: note its file.
			if err := r.stopIf(r.segmentGone()); err != nil {
				return err
			}
		}
		d := poll
		if dl, ok := ctx.Deadline(); ok {
			d = max(min(d, time.Until(dl)), time.Millisecond)
		}
		if w := r.fol.w; w != nil {
			if _, err := w.Wait(d); err != nil {
				return fmt.Errorf("wal: follow %s: %w", r.dir, err)
			}
			if err := r.lookAgain(poll); err != nil {
				return err
			}
			continue
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
			if err := r.lookAgain(poll); err != nil {
				return err
			}
		}
	}
}

// lookAgain follows a change event or a poll: the directory is listed
// again on the next look, and the Reader stops if its log directory is
// gone (checkDir, every time) or its segment is (segmentGone, at most once
// per poll).
func (r *Reader) lookAgain(poll time.Duration) error {
	r.fol.listed = false
	if err := r.stopIf(r.checkDir()); err != nil {
		return err
	}
	if time.Since(r.fol.looked) >= poll {
		return r.stopIf(r.segmentGone())
	}
	return nil
}

// stopIf stops the Reader with err, if not nil, and returns it.
func (r *Reader) stopIf(err error) error {
	if err != nil {
		r.finish(err)
	}
	return err
}

// segmentGone reports the files of a follower's log removed, or removed
// and a new log created in the directory, while the directory stayed
// (checkDir sees only the directory): the Reader waits at the end of the
// segment it has open, whose file reads on as it was, and would wait for
// ever, or miss the new log's records. Retention deletes a segment only
// once a later one exists under its final name (see TruncateFront), and
// a writer never replaces a segment's file: the Reader's segment gone
// with no later segment listed, or another file at its name, is the log's
// files removed. It costs a stat of the segment, so Wait calls it when it
// first waits in a segment (noting the file there), and then at most
// once per poll interval, not on every change event.
func (r *Reader) segmentGone() error {
	ls := r.ls
	if ls == nil {
		return nil // no segment yet
	}
	r.fol.looked = time.Now()
	fi, err := r.fsys.Stat(filepath.Join(r.dir, ls.name))
	if ls != r.fol.seg {
		r.fol.seg, r.fol.segFile = ls, nil
		if err == nil {
			r.fol.segFile = fi
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A listing is not a snapshot: a segment renamed into place while
		// it ran can be missing from it. Only two that agree count.
		for range 2 {
			segs, _, _, lerr := listSegments(r.fsys, r.dir)
			if lerr != nil {
				return nil // looked at again at the next poll
			}
			if len(segs) > 0 && segs[len(segs)-1].firstSeq > ls.firstSeq {
				return nil // deleted by retention: the Reader goes on to the next
			}
		}
		return fmt.Errorf("wal: follow %s: segment %s, where the Reader was at seq %d, was removed and no later segment is there: the log's files were removed: %w", r.dir, ls.name, r.expect, err)
	case err != nil:
		return nil // looked at again at the next poll
	}
	// os.SameFile tells apart only what os.Stat returned (see checkDir).
	if p := r.fol.segFile; p != nil && os.SameFile(p, p) && !os.SameFile(p, fi) {
		return fmt.Errorf("wal: follow %s: segment %s, where the Reader was at seq %d, was replaced by another file: the log's files were removed and a new log created in the directory", r.dir, ls.name, r.expect)
	}
	return nil
}

// checkDir reports the log directory of a Reader from OpenReader removed,
// or replaced by another at its path, since OpenReader: no record would
// come any more, and Wait would wait for ever (the Reader's open file of
// an unlinked segment reads as it was), or follow another log's records
// from the wrong place. Wait checks as it begins to follow, and after each
// change event or poll (a stat of the directory).
func (r *Reader) checkDir() error {
	fi, err := r.fsys.Stat(r.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: follow %s: the log directory was removed: %w", r.dir, err)
	}
	if err != nil {
		return nil // looked at again at the next poll
	}
	// os.SameFile tells apart only what os.Stat returned; a test file
	// system's directories are never replaced under a follower.
	if d := r.dirInfo; d != nil && os.SameFile(d, d) && !os.SameFile(d, fi) {
		return fmt.Errorf("wal: follow %s: the log directory was replaced by another since the Reader began to follow it", r.dir)
	}
	return nil
}

// startFollow turns a Reader from OpenReader that read to the end of the
// files into a follower at the same position: the next record is r.expect,
// at byte r.dataEnd of segment r.cur if it is there.
func (r *Reader) startFollow() error {
	if err := r.checkDir(); err != nil {
		return err // what is at the path now is no longer the Reader's log
	}
	fol := &followState{}
	if w, err := sys.WatchDir(r.dir); err == nil {
		fol.w = w
	}
	r.fol = fol
	r.tab = &segTable{fsys: r.fsys, dir: r.dir, maxRec: r.maxRec, sealedOnly: true}
	r.done, r.torn, r.rec = false, nil, nil
	if err := r.tab.refresh(); err != nil {
		return err
	}
	if r.expect == 0 {
		return nil // no segment yet: followStart positions the Reader when one appears
	}
	return r.position(r.cur.name, r.dataEnd)
}

// followStart positions a follower that started on a log with no segment
// at its first record, once there is one. It reports whether it did.
func (r *Reader) followStart() bool {
	if err := r.tab.refresh(); err != nil {
		r.finish(err)
		return false
	}
	first := r.tab.first.Load()
	if first == 0 {
		return false
	}
	if r.from != 0 && r.from < first {
		// Records from r.from on were deleted before the follower saw
		// them (retention): say so, as OpenReader does, rather than start
		// at the first left.
		r.finish(&TruncatedError{Seq: r.from, First: first})
		return false
	}
	r.expect = first
	if err := r.position("", 0); err != nil {
		r.finish(err)
		return false
	}
	return true
}

// position places a follower before record r.expect: at byte off of
// segment seg if that is where the record is, else found through the
// segment's index.
func (r *Reader) position(seg string, off int64) error {
	ls, err := r.tab.acquire(r.expect)
	if te, ok := errors.AsType[*TruncatedError](err); ok && r.from > r.expect {
		// The records deleted are below r.from (the Reader began past the
		// log's end): it never wanted them, unless they reach r.from.
		if te.First > r.from {
			return &TruncatedError{Seq: r.from, First: te.First}
		}
		r.expect = r.from
		ls, err = r.tab.acquire(r.expect)
	}
	if err != nil {
		return err
	}
	if err := r.sameLog(ls); err != nil {
		r.tab.release(ls)
		return err
	}
	r.ls, r.released = ls, 0
	r.cur = segInfo{name: ls.name, firstSeq: ls.firstSeq}
	switch {
	case ls.firstSeq == r.expect:
		r.off = headerPage
	case ls.name == seg && off >= headerPage:
		r.off = off
	default:
		// Records before r.expect were returned already: skip them again.
		r.from = max(r.from, r.expect)
		r.off, r.expect, r.hintCRC = ls.seek(r.tab, r.expect, ^uint64(0), r.maxRec)
		r.hinted = r.off != headerPage
	}
	return nil
}

// pending reports whether a follower's files hold something past its
// position: a whole frame at it, the next segment, or damage that Next
// must report. It lists the directory only at a segment's end, and only
// once per change.
func (r *Reader) pending() bool {
	atEnd := r.ls != nil && r.ls.end.Load() != 0 && r.expect >= r.ls.end.Load()
	if r.ls == nil || atEnd {
		// Only a new segment can help: list the directory once per change.
		if r.fol.listed {
			return false
		}
		r.fol.listed = true
		if err := r.tab.refresh(); err != nil {
			r.finish(err)
			return true
		}
		if r.ls == nil {
			return r.tab.first.Load() != 0
		}
		return r.tab.after(r.ls.firstSeq) // the next segment, or a missing one that Next names
	}
	r.fol.listed = false
	if _, _, err := r.frameAt(r.off); err != nil {
		if errors.Is(err, frame.ErrTooLarge) && oversizedRecord(r.ls.f, r.ls.name, r.off, r.maxRec) != nil {
			return true // Next reports it
		}
		return r.followFinal(err)
	}
	return true
}

// followDamage handles a frame that does not decode at a follower's
// position: the end of what the writer wrote so far (zeros, a frame being
// written), or damage. It reports whether the Reader stopped.
func (r *Reader) followDamage(err error) bool {
	if r.followFinal(err) {
		r.finish(r.corrupt(r.off, err))
		return true
	}
	return false
}

// followFinal reports whether the frame at a follower's position, which
// failed to decode with err, is damage rather than the end of what was
// written: it is in a segment with a successor (sealed: every byte of it
// written and synced), the segment's durable mark lies past it, or
// reading failed.
func (r *Reader) followFinal(err error) bool {
	if _, ok := errors.AsType[*frame.Damage](err); !ok {
		return true // an I/O error
	}
	if r.ls.end.Load() != 0 {
		return true
	}
	if errors.Is(err, frame.ErrZeroed) || errors.Is(err, frame.ErrTruncated) {
		return false
	}
	_, mark, herr := readHeader(r.ls.f)
	return herr != nil || mark.DurableEnd > r.off
}
