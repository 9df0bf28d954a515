package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/appendlog/appendlog/frame"
)

// repairTmp is the temporary name a segment is rebuilt under by a forced
// Repair before it is renamed over the old one. A file under this name is
// never part of the log; Open and Repair remove a stale one.
const repairTmp = "repair.tmp"

// salvage is the forced Repair: it rebuilds every damaged segment of the
// log in dir, keeping every intact record, and records the sequence numbers
// lost as gaps. REQUIRES: the log's lock is held.
func salvage(o *Options, dir string, out *RepairReport) error {
	segs, _, _, err := listSegments(o.fsys, dir)
	if err != nil {
		return err
	}
	// A segment of another log is not damage: refuse before anything is
	// moved or rewritten. Rebuilt segments keep the log's ID.
	id, err := segmentsLogID(o.fsys, dir, segs)
	if err != nil {
		return err
	}
	// Trailing segments with nothing to keep (no valid header and no frame
	// where the first should be) are moved aside whole: there is nothing
	// after them to place a gap before.
	moved := false
	for len(segs) > 0 {
		last := segs[len(segs)-1]
		data, err := readWhole(o, dir, last.name)
		if err != nil {
			return err
		}
		if !nothingToKeep(data, last.firstSeq) {
			break
		}
		if err := moveAside(o, dir, last.name); err != nil {
			return err
		}
		out.RemovedSegments = append(out.RemovedSegments, last.name)
		segs = segs[:len(segs)-1]
		moved = true
	}
	if moved {
		if err := o.fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("wal: repair: sync directory: %w", err)
		}
	}
	var next uint64
	for i, s := range segs {
		if i > 0 && s.firstSeq > next {
			// One or more segments are missing: a segment holding only a
			// gap takes their place.
			if err := writeGapSegment(o, dir, next, s.firstSeq, id, out); err != nil {
				return err
			}
			next = s.firstSeq
		}
		if i > 0 && s.firstSeq < next {
			return fmt.Errorf("wal: repair: segment %s starts at seq %d, but %s holds records up to seq %d: cannot tell which is right",
				s.name, s.firstSeq, segs[i-1].name, next-1)
		}
		tail := i == len(segs)-1
		var nextFirst uint64
		if !tail {
			nextFirst = segs[i+1].firstSeq
		}
		if next, err = salvageSegment(o, dir, s, tail, nextFirst, id, out); err != nil {
			return err
		}
	}
	return nil
}

// readWhole reads a segment file into memory (Repair works offline).
func readWhole(o *Options, dir, name string) ([]byte, error) {
	f, err := o.fsys.OpenRegular(filepath.Join(dir, name), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: repair: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("wal: repair: %w", err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) && err != nil && err != io.EOF {
		return nil, fmt.Errorf("wal: repair: read %s: %w", name, err)
	} else if n < len(b) {
		return nil, fmt.Errorf("wal: repair: read %s: %w", name, io.ErrUnexpectedEOF)
	}
	return b, nil
}

// headerOK reports whether data starts with a valid segment header for
// firstSeq, and returns its durable mark.
func headerOK(data []byte, firstSeq uint64) (ok bool, mark frame.Mark, markOK bool) {
	h, err := frame.DecodeFileHeader(data[:min(len(data), frame.MarkOffset)])
	if err != nil || h.Kind != frame.FileWAL || h.FirstSeq != firstSeq {
		return false, frame.Mark{}, false
	}
	if len(data) >= frame.MarkOffset+frame.MarkSize {
		mark, markOK = frame.DecodeMark(data[frame.MarkOffset:])
	}
	return true, mark, markOK
}

// nothingToKeep reports whether a segment has neither a valid header nor a
// frame at the start of its data.
func nothingToKeep(data []byte, firstSeq uint64) bool {
	if ok, _, _ := headerOK(data, firstSeq); ok {
		return false
	}
	if len(data) <= headerPage {
		return true
	}
	_, _, err := frame.Decode(data[headerPage:])
	return err != nil
}

// rebuild collects the new contents of a segment being salvaged.
type rebuild struct {
	name    string
	body    []byte // the frames after the header page
	lastGap int    // offset in body of the last frame if it is a gap, else -1
	gaps    []GapError
	isNew   []bool     // per gap: recorded by this repair (not kept from before)
	cuts    [][2]int64 // byte ranges of the old file to cut, in order
}

// keep appends frame bytes kept from the old file.
func (b *rebuild) keep(p []byte) {
	b.body = append(b.body, p...)
	b.lastGap = -1
}

// gap records records [first, end) as lost, merging with a gap just before.
// isNew is false for a gap kept from an earlier repair.
func (b *rebuild) gap(first, end uint64, isNew bool) {
	if b.lastGap >= 0 {
		g := &b.gaps[len(b.gaps)-1]
		if g.End == first {
			g.End = end
			b.isNew[len(b.isNew)-1] = true
			putGap(b.body[b.lastGap:], g.First, g.End-g.First)
			return
		}
	}
	b.lastGap = len(b.body)
	b.gaps = append(b.gaps, GapError{Segment: b.name, Offset: headerPage + int64(b.lastGap), First: first, End: end})
	b.isNew = append(b.isNew, isNew)
	var fr [gapFrameSize]byte
	putGap(fr[:], first, end-first)
	b.body = append(b.body, fr[:]...)
}

// salvageSegment scans one segment frame by frame, cuts the ranges that do
// not decode (up to the next frame that does, with a plausible sequence
// number), records the sequence numbers lost there as gaps, and rewrites
// the segment if anything changed. It returns the sequence number after the
// segment's last record or gap.
//
// In the tail segment, damage past the durable mark is a torn tail: cut to
// the end with no gap (no completed sync covered it), as Open does.
func salvageSegment(o *Options, dir string, s segInfo, tail bool, nextFirst uint64, id frame.LogID, out *RepairReport) (uint64, error) {
	data, err := readWhole(o, dir, s.name)
	if err != nil {
		return 0, err
	}
	size := int64(len(data))
	hdrOK, mark, markOK := headerOK(data, s.firstSeq)
	// Where a tail's torn tail may start: its durable mark, the whole file
	// when the header (and so the mark) is lost, or nothing when no sync
	// completed.
	durableEnd := int64(headerPage)
	switch {
	case !hdrOK:
		durableEnd = size
	case markOK:
		durableEnd = mark.DurableEnd
	}

	b := &rebuild{name: s.name, lastGap: -1}
	changed := !hdrOK
	footer := false
	expect := s.firstSeq
	pos := int64(headerPage)
	if size < headerPage {
		pos = size
	}
	// Past lastNZ the file holds only zeros: the end of the data.
	lastNZ := int64(lastNonZeroIn(data))
	for pos < size {
		rest := data[pos:]
		if pos > lastNZ {
			break
		}
		fr, n, err := frame.Decode(rest)
		if err == nil {
			if fr.Kind == frame.KindRecord && fr.Seq == expect {
				b.keep(rest[:n])
				expect++
				pos += int64(n)
				continue
			}
			if count, ok := decodeGap(fr); ok && fr.Seq == expect {
				b.gap(fr.Seq, fr.Seq+count, false)
				expect += count
				pos += int64(n)
				continue
			}
			if fr.Kind == frame.KindFooter && n == frame.FooterSize {
				ft, ferr := frame.DecodeFooter(rest[:n])
				if ferr == nil && ft.FirstSeq == s.firstSeq && ft.FirstSeq+ft.Count == expect && ft.DataEnd == pos {
					footer = true
					pos += int64(n)
					if lastNZ >= pos {
						b.cuts = append(b.cuts, [2]int64{pos, lastNZ + 1})
						changed = true
					} else if pos < size && !tail {
						changed = true // zeros after a sealed footer: truncate
					}
					break
				}
			}
		}
		// Damage at pos.
		changed = true
		end := lastNZ + 1
		if tail && pos >= durableEnd {
			b.cuts = append(b.cuts, [2]int64{pos, end})
			break
		}
		q, seq, ok := skipRecord(data, pos, expect, s.firstSeq)
		if !ok {
			q, seq, ok = resync(data, pos, expect, s.firstSeq)
		}
		if !ok {
			b.cuts = append(b.cuts, [2]int64{pos, end})
			break
		}
		b.cuts = append(b.cuts, [2]int64{pos, q})
		if seq > expect {
			b.gap(expect, seq, true)
			expect = seq
		}
		pos = q
	}
	switch {
	case !tail && footer && expect < nextFirst:
		// The segment is whole; the next one is not its successor: the
		// caller records the missing segments.
	case !tail && expect < nextFirst:
		// Records lost at the end of a sealed segment (its footer with
		// them).
		b.gap(expect, nextFirst, true)
		expect = nextFirst
		changed = true
	case !tail && expect > nextFirst:
		return 0, fmt.Errorf("wal: repair: segment %s holds records up to seq %d, but the next segment starts at seq %d: cannot tell which is right",
			s.name, expect-1, nextFirst)
	case !tail && !footer:
		changed = true
	case tail && markOK && mark.NextSeq > expect:
		// Records a completed sync covered are gone from the tail's end.
		b.gap(expect, mark.NextSeq, true)
		expect = mark.NextSeq
		changed = true
	case tail && markOK && mark.DurableEnd > int64(headerPage+len(b.body)):
		// The mark claims more than the data holds: rewrite it.
		changed = true
	}
	if !changed {
		return expect, nil
	}

	// Side files first, then the rebuilt segment.
	if !hdrOK && size > 0 {
		b.cuts = append([][2]int64{{0, min(size, headerPage)}}, b.cuts...)
	}
	for _, c := range b.cuts {
		side, err := saveCut(o, dir, s.name, c[0], data[c[0]:c[1]])
		if err != nil {
			return 0, err
		}
		out.Cuts = append(out.Cuts, Cut{Segment: s.name, Offset: c[0], Bytes: c[1] - c[0], SideFile: side})
	}
	if err := writeSegment(o, dir, s.name, s.firstSeq, expect, b.body, !tail || footer, id); err != nil {
		return 0, err
	}
	out.Rebuilt = append(out.Rebuilt, s.name)
	for i, g := range b.gaps {
		if b.isNew[i] {
			out.Gaps = append(out.Gaps, g)
		}
	}
	return expect, nil
}

// skipRecord handles damage confined to one record: the header at pos is
// that of record expect, and right after the payload its length gives, a
// frame decodes that continues the segment (record or gap expect+1, or
// the footer). It returns that frame's position and the sequence number
// it starts at. Without it, resync would take the first frame that
// decodes inside the damaged record's payload, and a record that carries
// a frame of its own sequence number (a log of logs) would be replaced by
// the frame it carries, with no gap recorded.
func skipRecord(data []byte, pos int64, expect, segFirst uint64) (int64, uint64, bool) {
	if pos+frame.HeaderSize > int64(len(data)) {
		return 0, 0, false
	}
	h := data[pos : pos+frame.HeaderSize]
	word := binary.LittleEndian.Uint32(h[4:8])
	length := int64(word & frame.MaxPayload)
	if frame.Kind(word>>30) != frame.KindRecord || binary.LittleEndian.Uint64(h[8:16]) != expect {
		return 0, 0, false
	}
	q := pos + frame.HeaderSize + length
	if q >= int64(len(data)) {
		return 0, 0, false
	}
	fr, n, err := frame.Decode(data[q:])
	if err != nil {
		return 0, 0, false
	}
	if _, gap := decodeGap(fr); (fr.Kind == frame.KindRecord || gap) && fr.Seq == expect+1 {
		return q, fr.Seq, true
	}
	if fr.Kind == frame.KindFooter {
		if ft, err := frame.DecodeFooter(data[q : q+int64(n)]); err == nil && ft.FirstSeq == segFirst && ft.DataEnd == q && ft.FirstSeq+ft.Count == expect+1 {
			return q, expect + 1, true
		}
	}
	return 0, 0, false
}

// resync looks for the first position after pos where a frame decodes with
// the right checksum and a plausible sequence number: at least expect, and
// at most expect plus the number of records that could have fit in the
// bytes skipped. It returns that position and the sequence number the frame
// starts at (a footer's: the next segment's first). A frame's length is
// bounded by the bytes there, not by Options.MaxRecordSize: the log may
// have been written with a larger one, and its records are kept.
func resync(data []byte, pos int64, expect, segFirst uint64) (int64, uint64, bool) {
	for q := pos + 1; q+frame.HeaderSize <= int64(len(data)); q++ {
		h := data[q : q+frame.HeaderSize]
		seq := binary.LittleEndian.Uint64(h[8:16])
		maxLost := uint64(q-pos)/frame.HeaderSize + 1
		if seq < expect || seq-expect > maxLost {
			continue
		}
		word := binary.LittleEndian.Uint32(h[4:8])
		if word>>30 == 0 || q+frame.HeaderSize+int64(word&frame.MaxPayload) > int64(len(data)) {
			continue
		}
		fr, n, err := frame.Decode(data[q:])
		if err != nil {
			continue
		}
		if fr.Kind == frame.KindRecord {
			return q, fr.Seq, true
		}
		if _, ok := decodeGap(fr); ok {
			return q, fr.Seq, true
		}
		if fr.Kind == frame.KindFooter {
			if ft, err := frame.DecodeFooter(data[q : q+int64(n)]); err == nil && ft.FirstSeq == segFirst && ft.DataEnd == q {
				return q, fr.Seq, true
			}
		}
	}
	return 0, 0, false
}

// writeGapSegment creates the segment for records [first, end), which are
// all missing: a header, one gap frame and a footer.
func writeGapSegment(o *Options, dir string, first, end uint64, id frame.LogID, out *RepairReport) error {
	name := segmentName(first)
	body := make([]byte, gapFrameSize)
	putGap(body, first, end-first)
	if err := writeSegment(o, dir, name, first, end, body, true, id); err != nil {
		return err
	}
	out.Created = append(out.Created, name)
	out.Gaps = append(out.Gaps, GapError{Segment: name, Offset: headerPage, First: first, End: end})
	return nil
}

// writeSegment writes a segment (header page with a durable mark covering
// it all, body, and a footer if sealed) under repairTmp, syncs it, renames
// it to name and syncs the directory.
func writeSegment(o *Options, dir, name string, first, next uint64, body []byte, sealed bool, id frame.LogID) error {
	dataEnd := int64(headerPage + len(body))
	buf := make([]byte, 0, int(dataEnd)+frame.FooterSize)
	buf = append(buf, headerPageFor(first, id)...)
	frame.PutMark(buf[frame.MarkOffset:], frame.Mark{DurableEnd: dataEnd, NextSeq: next})
	buf = append(buf, body...)
	if sealed {
		var ft [frame.FooterSize]byte
		frame.PutFooter(ft[:], frame.Footer{FirstSeq: first, Count: next - first, DataEnd: dataEnd})
		buf = append(buf, ft[:]...)
	}
	// The old segment's index file points at its old offsets: where a cut
	// shifted the frames it may point into the middle of a record, at a
	// frame embedded in its payload. Its removal is made durable before
	// the rebuilt segment takes the name.
	switch err := o.fsys.Remove(filepath.Join(dir, name+idxSuffix)); {
	case err == nil:
		if err := o.fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("wal: repair: remove index of %s: %w", name, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("wal: repair: remove index of %s: %w", name, err)
	}
	tmp := filepath.Join(dir, repairTmp)
	f, err := o.fsys.OpenRegular(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: repair: rebuild %s: %w", name, err)
	}
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = o.fsys.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = o.fsys.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("wal: repair: rebuild %s: %w", name, err)
	}
	return nil
}

// moveAside renames a whole segment with a .cut suffix.
func moveAside(o *Options, dir, name string) error {
	if err := o.fsys.Rename(filepath.Join(dir, name), filepath.Join(dir, name+cutSuffix)); err != nil {
		return fmt.Errorf("wal: repair: move %s aside: %w", name, err)
	}
	return nil
}
