package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync/atomic"

	"github.com/appendlog/appendlog/frame"
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
	r := &Reader{dir: l.dir, from: from, maxRec: l.maxRec, liveState: liveState{l: l, vis: &l.w.written, ls: ls}}
	if vis == ReadDurable {
		r.vis = &l.w.durable
	}
	r.cur = segInfo{name: ls.name, firstSeq: ls.firstSeq}
	r.off, r.expect = ls.seek(l.segs, from, r.vis.Load(), l.maxRec)
	r.hinted = r.off != headerPage
	return r, nil
}

// liveState is the part of a Reader that follows an open Log.
type liveState struct {
	// l is the open Log followed; nil for a Reader from OpenReader.
	l *Log
	// vis is the visibility frontier: the sequence number after the last
	// visible record (the segWriter's written or durable).
	vis *atomic.Uint64
	// ls is the segment read, with a reference held; off is the offset of
	// the next frame in it.
	ls  *liveSeg
	off int64
	// hinted is set while off came from the sparse index and no frame was
	// read there yet: a wrong hint sends the Reader back to the segment's
	// start instead of failing.
	hinted bool
	// buf holds a frame read with ReadAt where ls is not mapped, and
	// hdr its header.
	buf []byte
	hdr [frame.HeaderSize]byte
}

// nextLive is Next for a Reader of an open Log.
func (r *Reader) nextLive() bool {
	r.gap = nil
	r.rec = nil
	if r.done {
		return false
	}
	for {
		limit := r.vis.Load()
		if r.expect >= limit {
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
		if err != nil && r.hinted {
			// The index pointed at the wrong place: scan from the start.
			r.hinted = false
			r.off, r.expect = headerPage, r.ls.firstSeq
			continue
		}
		r.hinted = false
		if err != nil {
			r.finish(r.corrupt(r.off, err))
			return false
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

// _castagnoli is the CRC-32C table (hardware accelerated). Never written.
var _castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fastRecord reads the next record straight from the mapping when it is
// an intact record frame with the expected sequence number: one CRC over
// the contiguous header fields and payload, as frame.Decode computes it.
// Anything else (no mapping, a gap, damage) it leaves to the general path
// in nextLive, which decodes and reports.
func (r *Reader) fastRecord() bool {
	m, off := r.ls.m, r.off
	if m == nil || off+frame.HeaderSize > int64(len(m)) {
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
	r.hinted = false
	return true
}

// frameAt decodes the frame at off of the current segment: in place in
// the mapping, or read into r.buf. It reads only a visible record's bytes:
// the header's length is checked against MaxRecordSize and the mapping
// before the payload is touched.
func (r *Reader) frameAt(off int64) (frame.Frame, int, error) {
	h, ok := r.ls.peek(r.hdr[:], off)
	if !ok {
		return frame.Frame{}, 0, &frame.Damage{Offset: off, Err: frame.ErrTruncated}
	}
	length := int(binary.LittleEndian.Uint32(h[4:8]) & frame.MaxPayload)
	if length > max(r.maxRec, _gapPayloadSize) {
		return frame.Frame{}, 0, &frame.Damage{Offset: off, Err: frame.ErrTooLarge}
	}
	n := frame.HeaderSize + length
	var b []byte
	if m := r.ls.m; m != nil {
		if off+int64(n) > int64(len(m)) {
			return frame.Frame{}, 0, &frame.Damage{Offset: off, Err: frame.ErrTruncated}
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
				return frame.Frame{}, 0, &frame.Damage{Offset: off, Err: frame.ErrTruncated}
			}
			return frame.Frame{}, 0, fmt.Errorf("read at %d: %w", off, err)
		}
	}
	fr, _, err := frame.Decode(b)
	if err != nil {
		return frame.Frame{}, 0, &frame.Damage{Offset: off, Err: err}
	}
	return fr, n, nil
}

// advance moves to the segment after the current one, which ended.
func (r *Reader) advance() bool {
	next, err := r.l.segs.acquire(r.ls.end.Load())
	if err != nil {
		r.finish(err)
		return false
	}
	r.l.segs.release(r.ls)
	r.ls = next
	r.cur = segInfo{name: next.name, firstSeq: next.firstSeq}
	r.off = headerPage
	return true
}

// Wait blocks until a record after the last one Next returned is visible
// (Next then returns it), ctx is done, or the log is closed (ErrClosed) or
// failed. While it waits, the flusher hands new records to the OS at once
// (with ReadDurable, syncs them at once), so a record appended to an idle
// log reaches a waiting Reader without waiting for FlushInterval. A nil
// ctx is ErrNilContext. Wait on a Reader from OpenReader returns an error:
// nobody appends to a stopped log.
func (r *Reader) Wait(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Wait", ErrNilContext)
	}
	if r.l == nil {
		return errors.New("wal: Wait: the Reader reads a stopped log (OpenReader); use Log.NewReader to follow an open one")
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
		if err := l.mapErr(l.eng.AwaitAtLeast(ctx, &l.w.written, want)); err != nil {
			return err
		}
		pos, _ := l.eng.Tail()
		l.eng.RequestSync(pos)
	}
	return l.mapErr(l.eng.AwaitAtLeast(ctx, r.vis, want))
}

// closeLive releases the Reader's segment.
func (r *Reader) closeLive() {
	if r.ls != nil {
		r.l.segs.release(r.ls)
		r.ls = nil
	}
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
