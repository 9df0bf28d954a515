package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// snapshotDir copies the regular files of a log directory (not its
// subdirectories) to a new directory, as a process killed at that moment
// leaves them in the page cache: what an open Log handed to the OS.
func snapshotDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	noErr(t, err)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		noErr(t, err)
		noErr(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

// checkTooLarge fails unless err is the error for an intact record longer
// than MaxRecordSize: ErrTooLarge, not corruption, naming the segment.
func checkTooLarge(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrTooLarge) || IsCorrupt(err) || !strings.Contains(err.Error(), segmentName(1)) ||
		!strings.Contains(err.Error(), "MaxRecordSize") {
		t.Fatalf("%s: %v, want ErrTooLarge naming the segment and MaxRecordSize", what, err)
	}
}

// TestSmallerMaxRecordSizeCutsNothing: a log reopened or read with a
// smaller MaxRecordSize than it was written with keeps every record. The
// records past the durable mark used to be taken for a torn tail ("payload
// too large" damage) and cut by Open and by Repair, acknowledged ones
// included; the others were reported as corruption.
func TestSmallerMaxRecordSizeCutsNothing(t *testing.T) {
	dir := t.TempDir()
	big := WithMarkEvery(Options{SegmentSize: 1 << 20, BufferSize: 64 << 10}, time.Hour)
	l := mustOpen(t, dir, &big)
	defer l.Close()
	ctx := context.Background()
	small := &Options{SegmentSize: 1 << 20, BufferSize: 64 << 10, MaxRecordSize: 1000}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const n = 20
	var f *Reader
	for i := range n {
		size := 100
		if i >= 5 {
			size = 4000
		}
		if i == 5 {
			// A follower with the smaller limit, at the end of the small
			// records.
			var err error
			f, err = OpenReader(dir, 0, small)
			noErr(t, err)
			defer f.Close()
			noErr(t, followTo(wctx, f, 5))
		}
		seq, err := l.Append(testPayload(1, i, size))
		noErr(t, err)
		noErr(t, l.WaitDurable(ctx, seq)) // acknowledged
	}
	crashed := snapshotDir(t, dir)

	_, err := Open(crashed, small)
	checkTooLarge(t, "Open", err)
	_, err = Verify(crashed, small)
	checkTooLarge(t, "Verify", err)
	_, err = Repair(crashed, false, small)
	checkTooLarge(t, "Repair", err)
	_, err = Repair(crashed, true, small)
	checkTooLarge(t, "forced Repair", err)
	r, err := OpenReader(crashed, 0, small)
	noErr(t, err)
	for r.Next() {
	}
	checkTooLarge(t, "OpenReader", r.Err())
	r.Close()

	// Nothing was cut: the log opens whole with the size it was written
	// with.
	l2, err := Open(crashed, &Options{SegmentSize: 1 << 20, BufferSize: 64 << 10})
	noErr(t, err)
	if rec := l2.Recovery(); rec.NextSeq != n+1 {
		t.Fatalf("reopened with the original MaxRecordSize: records up to %d, want %d (%+v)", rec.NextSeq-1, n, rec)
	}
	noErr(t, l2.Close())
	if got := readAll(t, vfs.OS(), crashed); len(got) != n {
		t.Fatalf("%d records after the reopenings, want %d", len(got), n)
	}

	// The follower reports the record rather than waiting on it or
	// calling it corruption.
	err = followTo(wctx, f, n)
	checkTooLarge(t, "follower", err)
	if f.Seq() != 5 {
		t.Fatalf("follower stopped after %d, want 5", f.Seq())
	}
}

// TestSmallerMaxRecordSizeLargeRecord: a record of more than the 1 MiB
// the check reads at a time is recognised too.
func TestSmallerMaxRecordSizeLargeRecord(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	_, err := l.Append(testPayload(1, 0, 3<<19))
	noErr(t, err)
	noErr(t, l.Close())
	_, err = Open(dir, &Options{MaxRecordSize: 1 << 20})
	checkTooLarge(t, "Open", err)
	l = mustOpen(t, dir, nil)
	noErr(t, l.Close())
}

// TestSmallerMaxRecordSizeLiveReader: a Log reopened with a smaller
// MaxRecordSize than its sealed segments were written with opens (it
// trusts their footers) and its Readers report the larger records as
// ErrTooLarge, not as corruption.
func TestSmallerMaxRecordSizeLiveReader(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	for i := 0; l.Stats().SegmentsCreated < 3; i++ {
		size := 4000
		if l.Stats().SegmentsCreated >= 2 {
			size = 100 // the tail, which Open scans, holds small ones only
		}
		_, err := l.Append(testPayload(1, i, size))
		noErr(t, err)
		noErr(t, l.Flush(context.Background()))
	}
	noErr(t, l.Close())
	l2 := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, MaxRecordSize: 1000})
	defer l2.Close()
	r, err := l2.NewReader(1, nil)
	noErr(t, err)
	defer r.Close()
	if r.Next() {
		t.Fatalf("read record %d of %d bytes past MaxRecordSize 1000", r.Seq(), len(r.Record()))
	}
	checkTooLarge(t, "NewReader", r.Err())
}

// embeddingPayload returns a record for seq whose last 32 bytes are a
// valid frame of seq itself (a log of logs, say: a record that carries
// another log's frame).
func embeddingPayload(seq uint64, size int) []byte {
	p := make([]byte, size)
	for i := range size - 32 {
		p[i] = byte(seq) | 1
	}
	frame.Encode(p[size-32:], seq, []byte("embedded-payload"))
	return p
}

// TestRepairDropsStaleIndex: a forced Repair that cuts bytes from a sealed
// segment shifts the frames after the cut, so the segment's index file
// points at old offsets. It used to stay, and a Reader positioned through
// it could land inside a record, on a frame embedded in the payload with
// the sequence number it looked for, and return that as the record.
func TestRepairDropsStaleIndex(t *testing.T) {
	dir := t.TempDir()
	const size = 200
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	writeEmbedding(t, dir, o, size)
	seg := filepath.Join(dir, segmentName(1))
	b, err := os.ReadFile(seg + idxSuffix)
	noErr(t, err)
	seqs, _, _, err := decodeIndex(b, 1, 1<<30)
	noErr(t, err)
	if len(seqs) < 2 {
		t.Fatalf("index of %d entries: the test needs one past the cut", len(seqs))
	}
	// Damage record 2's payload: Repair cuts it, and the frames after it
	// move.
	flipByte(t, seg, headerPage+frame.HeaderSize+size+frame.HeaderSize+5)
	rep, err := Repair(dir, true, nil)
	noErr(t, err)
	if len(rep.Rebuilt) != 1 {
		t.Fatalf("repair: %+v", rep)
	}
	if _, err := os.Stat(seg + idxSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the rebuilt segment's old index file is still there (%v)", err)
	}
	l2 := mustOpen(t, dir, o)
	defer l2.Close()
	for _, want := range seqs[1:] {
		r, err := l2.NewReader(want, nil)
		noErr(t, err)
		if !r.Next() {
			t.Fatalf("NewReader(%d): no record: %v", want, r.Err())
		}
		if r.Seq() != want || !bytes.Equal(r.Record(), embeddingPayload(want, size)) {
			t.Fatalf("NewReader(%d) returned record %d of %d bytes %q, not the record appended", want, r.Seq(), len(r.Record()), r.Record())
		}
		r.Close()
	}
}

// TestOpenCursorPositionDeleted: a cursor from OpenCursor whose committed
// position retention deleted (Retention.IgnoreCursors) gets a
// *TruncatedError from Next, as a cursor of the open Log does, until Seek
// moves it. It used to deliver the first record left as if nothing had
// been deleted, and its committed position, stuck below the records it
// delivered, refused their acks once they filled the ack window.
func TestOpenCursorPositionDeleted(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, Retention: Retention{IgnoreCursors: true}})
	c, err := l.Cursor("ship")
	noErr(t, err)
	noErr(t, c.Close()) // checkpointed at 1
	for l.Stats().SegmentsCreated < 4 {
		appendRecs(t, l, 100)
	}
	noErr(t, l.Sync(context.Background()))
	segs, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	cut := segs[2].firstSeq
	noErr(t, l.TruncateFront(cut))
	noErr(t, l.Close())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fc, err := OpenCursor(dir, "ship", nil, nil)
	noErr(t, err)
	defer fc.Close()
	for range 2 { // and again: Next does not move on by itself
		seq, _, err := fc.Next(ctx)
		var te *TruncatedError
		if !errors.As(err, &te) || te.Seq != 1 || te.First != cut {
			t.Fatalf("Next of a cursor at a deleted record: seq %d, %v; want a *TruncatedError for 1 naming first %d", seq, err, cut)
		}
	}
	noErr(t, fc.Seek(cut))
	seq, _, err := fc.Next(ctx)
	if err != nil || seq != cut {
		t.Fatalf("Next after Seek(%d): %d, %v", cut, seq, err)
	}
}

// TestReaderSegmentDeletedAfterListing: a segment that the writer's
// retention deletes between OpenReader's listing and the Reader's arrival
// is a *TruncatedError naming the first record left, as for a follower
// (TestFollowRetention), not a bare "no such file".
func TestReaderSegmentDeletedAfterListing(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	for l.Stats().SegmentsCreated < 4 {
		appendRecs(t, l, 100)
	}
	noErr(t, l.Close())
	segs, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	for _, from := range []uint64{0, segs[1].firstSeq + 3} {
		d := snapshotDir(t, dir)
		r, err := OpenReader(d, from, nil)
		noErr(t, err)
		noErr(t, os.Remove(filepath.Join(d, segs[0].name)))
		noErr(t, os.Remove(filepath.Join(d, segs[1].name)))
		for r.Next() {
		}
		var te *TruncatedError
		if !errors.As(r.Err(), &te) || te.Seq != max(from, 1) || te.First != segs[2].firstSeq {
			t.Fatalf("OpenReader(%d) of a log whose front was deleted since the listing: %v; want a *TruncatedError for %d naming first %d",
				from, r.Err(), max(from, 1), segs[2].firstSeq)
		}
		r.Close()
	}
}

// TestOpenReaderBelowFirst: OpenReader from a record below the first the
// log holds (deleted by TruncateFront) is a *TruncatedError naming both,
// as NewReader's is, not a Reader that starts at the first record left
// and skips the deleted ones unsaid; from 0 starts at the first record.
func TestOpenReaderBelowFirst(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	for l.Stats().SegmentsCreated < 4 {
		appendRecs(t, l, 100)
	}
	segs, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	first := segs[2].firstSeq
	noErr(t, l.TruncateFront(first))
	if _, err := l.NewReader(first-1, nil); !errors.Is(err, ErrTruncated) {
		t.Fatalf("NewReader(%d) below FirstSeq %d: %v", first-1, first, err)
	}
	noErr(t, l.Close())
	for _, from := range []uint64{1, first - 1} {
		r, err := OpenReader(dir, from, nil)
		var te *TruncatedError
		if !errors.As(err, &te) || te.Seq != from || te.First != first {
			if err == nil {
				r.Next()
				t.Fatalf("OpenReader(%d) below the first record %d: a Reader, starting at %d; want a *TruncatedError", from, first, r.Seq())
			}
			t.Fatalf("OpenReader(%d) below the first record %d: %v; want a *TruncatedError naming both", from, first, err)
		}
	}
	for _, from := range []uint64{0, first} {
		r, err := OpenReader(dir, from, nil)
		noErr(t, err)
		if !r.Next() || r.Seq() != first {
			t.Fatalf("OpenReader(%d): first record %d (%v), want %d", from, r.Seq(), r.Err(), first)
		}
		noErr(t, r.Close())
	}
}

// embeddingLog writes a log with writeEmbedding, then damages record 2
// and repairs it with force: the frames after it move.
// It returns the index file the first segment had before the repair.
func embeddingLog(t *testing.T, dir string, o *Options, size int) (stale []byte) {
	t.Helper()
	writeEmbedding(t, dir, o, size)
	seg := filepath.Join(dir, segmentName(1))
	stale, err := os.ReadFile(seg + idxSuffix)
	noErr(t, err)
	flipByte(t, seg, headerPage+frame.HeaderSize+int64(size)+frame.HeaderSize+5)
	_, err = Repair(dir, true, nil)
	noErr(t, err)
	return stale
}

// checkRecordsFrom checks that a Reader of l from each of froms returns
// record from first, as appended (embeddingPayload).
func checkRecordsFrom(t *testing.T, l *Log, froms []uint64, size int) {
	t.Helper()
	for _, want := range froms {
		r, err := l.NewReader(want, nil)
		noErr(t, err)
		if !r.Next() {
			t.Fatalf("NewReader(%d): no record: %v", want, r.Err())
		}
		if r.Seq() != want || !bytes.Equal(r.Record(), embeddingPayload(want, size)) {
			t.Fatalf("NewReader(%d) returned record %d of %d bytes %q, not the record appended", want, r.Seq(), len(r.Record()), r.Record())
		}
		noErr(t, r.Close())
	}
}

// TestIndexOfAnotherLayout: an index file whose entries do not name the
// frames at their offsets (restored from before a Repair moved them, or
// copied from another segment) is not used, even where an entry lands on
// a frame inside a record's payload that has the sequence number sought.
func TestIndexOfAnotherLayout(t *testing.T) {
	dir := t.TempDir()
	const size = 200
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	stale := embeddingLog(t, dir, o, size)
	idx := filepath.Join(dir, segmentName(1)+idxSuffix)
	noErr(t, os.WriteFile(idx, stale, 0o644))
	seqs, _, _, err := decodeIndex(stale, 1, 1<<30)
	noErr(t, err)
	l := mustOpen(t, dir, o)
	defer l.Close()
	checkRecordsFrom(t, l, seqs[1:], size)
}

// TestIndexEntryInsidePayload: an index entry that points at a frame
// carried in a record's payload, with the sequence number it names but
// not its checksum, sends the Reader to the segment's start; it never
// returns the carried frame as the record.
func TestIndexEntryInsidePayload(t *testing.T) {
	dir := t.TempDir()
	const size = 200
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	embeddingLog(t, dir, o, size)
	l := mustOpen(t, dir, o)
	defer l.Close()
	// Where each record starts, after the repair.
	at := map[uint64]int64{}
	r, err := OpenReader(dir, 0, o)
	noErr(t, err)
	for r.Next() {
		_, off := r.Position()
		at[r.Seq()] = off
	}
	noErr(t, r.Close())
	r, err = l.NewReader(l.segs.mu.segs[1].firstSeq-1, nil) // walks the first segment's headers
	noErr(t, err)
	noErr(t, r.Close())
	ls := l.segs.mu.segs[0]
	x := &ls.idx
	x.mu.Lock()
	if len(x.seqs) < 3 {
		x.mu.Unlock()
		t.Fatalf("%d index entries", len(x.seqs))
	}
	var froms []uint64
	for k := 1; k < len(x.seqs)-1; k++ { // the last is where a walk resumes
		// Onto the frame record seqs[k] carries: same seq, other checksum.
		x.offs[k] = at[x.seqs[k]] + frame.HeaderSize + size - 32
		froms = append(froms, x.seqs[k])
	}
	x.mu.Unlock()
	checkRecordsFrom(t, l, froms, size)
}

// TestRepairDoesNotTakeACarriedFrame: a forced Repair of a record whose
// payload is damaged cuts that record and records it as a gap. It used to
// resume at the first frame that decoded after the damage, which, in a
// record that carries a frame of its own sequence number, was the
// carried frame: record 2 came back as its last 32 bytes' payload, with
// no gap reported.
func TestRepairDoesNotTakeACarriedFrame(t *testing.T) {
	for _, last := range []bool{false, true} {
		t.Run(fmt.Sprintf("last=%v", last), func(t *testing.T) {
			dir := t.TempDir()
			const size = 200
			o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
			writeEmbedding(t, dir, o, size)
			bad := uint64(2) // the damaged record
			if last {
				// The last record of the sealed segment: its footer follows.
				r, err := OpenReader(dir, 0, o)
				noErr(t, err)
				for r.Next() && r.cur.name == segmentName(1) {
					bad = r.Seq()
				}
				noErr(t, r.Close())
			}
			off := int64(headerPage) + int64(bad-1)*(frame.HeaderSize+size) + frame.HeaderSize + 5
			flipByte(t, filepath.Join(dir, segmentName(1)), off)
			rep, err := Repair(dir, true, nil)
			noErr(t, err)
			if len(rep.Gaps) != 1 || rep.Gaps[0].First != bad || rep.Gaps[0].End != bad+1 {
				t.Fatalf("repair recorded gaps %+v, want record %d alone", rep.Gaps, bad)
			}
			r, err := OpenReader(dir, 0, o)
			noErr(t, err)
			defer r.Close()
			for want := uint64(1); ; want++ {
				if want == bad {
					if r.Next() || !IsGap(r.Err()) {
						t.Fatalf("at %d: record %d %q, %v; want the gap", want, r.Seq(), r.Record(), r.Err())
					}
					continue
				}
				if !r.Next() {
					noErr(t, r.Err())
					if want < bad+2 {
						t.Fatalf("log ends before %d", want)
					}
					break
				}
				if r.Seq() != want || !bytes.Equal(r.Record(), embeddingPayload(want, size)) {
					t.Fatalf("record %d: %d bytes %q, not as appended", r.Seq(), len(r.Record()), r.Record())
				}
			}
		})
	}
}

// TestOverlappingSegmentNamed: a file named like a segment whose first
// sequence number lies inside the records of the segment before it (a
// copy, another log's segment) is refused as an overlap, not reported as
// a missing segment.
func TestOverlappingSegmentNamed(t *testing.T) {
	dir := t.TempDir()
	segs := buildLog(t, dir, 1000)
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	first, _ := parseSegmentName(segs[1])
	b, err := os.ReadFile(filepath.Join(dir, segs[1]))
	noErr(t, err)
	// The second segment again, under a name inside the first's records.
	noErr(t, os.WriteFile(filepath.Join(dir, segmentName(first-5)), b, 0o644))
	check := func(what string, err error) {
		t.Helper()
		if !IsCorrupt(err) || !strings.Contains(err.Error(), "overlap") || !strings.Contains(err.Error(), segmentName(first-5)) {
			t.Fatalf("%s: %v, want a *CorruptionError naming the overlap", what, err)
		}
	}
	_, err = Open(dir, nil)
	check("Open", err)
	_, err = Verify(dir, nil)
	check("Verify", err)
}

// TestReaderWaitAfterClose: Wait on a closed Reader returns ErrClosed. A
// Reader from OpenReader used to start following again (a new directory
// watcher, never closed) and hand out records after Close; one of an open
// Log returned nil at once, so a read-and-wait loop spun.
func TestReaderWaitAfterClose(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(what string, r *Reader) {
		t.Helper()
		noErr(t, r.Close())
		if err := r.Wait(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s: Wait after Close: %v, want ErrClosed", what, err)
		}
		if r.Next() {
			t.Fatalf("%s: Next after Close returned record %d", what, r.Seq())
		}
		if r.fol != nil && r.fol.w != nil {
			t.Fatalf("%s: a closed Reader watches the directory", what)
		}
	}
	r, err := OpenReader(dir, 0, nil)
	noErr(t, err)
	check("OpenReader, unread", r)
	r, err = OpenReader(dir, 0, nil)
	noErr(t, err)
	for r.Next() {
	}
	noErr(t, r.Err())
	check("OpenReader, read to the end", r)

	l := mustOpen(t, dir, nil)
	defer l.Close()
	r, err = l.NewReader(0, nil)
	noErr(t, err)
	for r.Next() {
	}
	check("NewReader", r)
}

// TestDirectoryNamedLikeSegment: a directory named like a segment is
// named as the cause by Open, Verify and Repair, which change nothing.
// They used to report corruption in the intact segment before it ("sealed
// segment is not whole", "no valid footer but is followed by"), which
// points an operator at a forced Repair.
func TestDirectoryNamedLikeSegment(t *testing.T) {
	dir := t.TempDir()
	segs := buildLog(t, dir, 1000)
	l := mustOpen(t, dir, nil)
	next := l.NextSeq()
	noErr(t, l.Close())
	odd := segmentName(next + 10)
	noErr(t, os.Mkdir(filepath.Join(dir, odd), 0o755))
	before := map[string][]byte{}
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(dir, s))
		noErr(t, err)
		before[s] = b
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil || IsCorrupt(err) || !strings.Contains(err.Error(), odd+" is named like a segment but is a directory") {
			t.Fatalf("%s: %v, want an error naming directory %s", what, err, odd)
		}
	}
	_, err := Open(dir, nil)
	check("Open", err)
	_, err = Verify(dir, nil)
	check("Verify", err)
	_, err = Repair(dir, false, nil)
	check("Repair", err)
	_, err = Repair(dir, true, nil)
	check("forced Repair", err)
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(dir, s))
		noErr(t, err)
		if !bytes.Equal(b, before[s]) {
			t.Fatalf("segment %s changed", s)
		}
	}
}

// mkfifo makes a named pipe at path with mkfifo(1), or skips the test.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if _, err := exec.LookPath("mkfifo"); err != nil {
		t.Skip("no mkfifo(1)")
	}
	if out, err := exec.Command("mkfifo", path).CombinedOutput(); err != nil {
		t.Skipf("mkfifo: %v: %s", err, out)
	}
}

// within returns f's result, or fails the test if f has not returned
// after a generous deadline (a hang), leaving its goroutine blocked.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s hangs", what)
		return nil
	}
}

// TestNamedPipeNamedLikeLogFile: a named pipe (FIFO) in the place of a
// segment, an index file or a cursor file is refused with an error naming
// it. Opening one for reading blocks until a writer comes: Open, Verify,
// Repair, OpenReader, Cursor and ReadCursors used to hang on it for good.
func TestNamedPipeNamedLikeLogFile(t *testing.T) {
	fifoErr := func(t *testing.T, what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("%s: %v, want an error naming the named pipe", what, err)
		}
	}
	t.Run("segment", func(t *testing.T) {
		dir := t.TempDir()
		segs := buildLog(t, dir, 1000)
		tail := filepath.Join(dir, segs[len(segs)-1])
		noErr(t, os.Remove(tail))
		mkfifo(t, tail)
		fifoErr(t, "Open", within(t, "Open", func() error {
			l, err := Open(dir, nil)
			if err == nil {
				l.Close()
			}
			return err
		}))
		fifoErr(t, "Verify", within(t, "Verify", func() error { _, err := Verify(dir, nil); return err }))
		fifoErr(t, "forced Repair", within(t, "Repair", func() error { _, err := Repair(dir, true, nil); return err }))
		fifoErr(t, "OpenReader", within(t, "OpenReader", func() error {
			r, err := OpenReader(dir, 0, nil)
			if err != nil {
				return err
			}
			defer r.Close()
			for r.Next() {
			}
			return r.Err()
		}))
	})
	t.Run("index", func(t *testing.T) {
		dir := t.TempDir()
		buildLog(t, dir, 1000)
		idx := filepath.Join(dir, segmentName(1)+idxSuffix)
		noErr(t, os.Remove(idx))
		mkfifo(t, idx)
		l := mustOpen(t, dir, nil)
		defer l.Close()
		noErr(t, within(t, "NewReader", func() error {
			r, err := l.NewReader(200, nil) // an index is only a hint: walked instead
			if err != nil {
				return err
			}
			defer r.Close()
			if !r.Next() || r.Seq() != 200 {
				return fmt.Errorf("NewReader(200): %d, %v", r.Seq(), r.Err())
			}
			return nil
		}))
	})
	t.Run("cursor", func(t *testing.T) {
		dir := t.TempDir()
		buildLog(t, dir, 10)
		noErr(t, os.Mkdir(filepath.Join(dir, cursorDir), 0o755))
		mkfifo(t, filepath.Join(dir, cursorDir, "ship"))
		l := mustOpen(t, dir, nil)
		fifoErr(t, "Cursor", within(t, "Cursor", func() error { _, err := l.Cursor("ship"); return err }))
		noErr(t, l.Close())
		fifoErr(t, "ReadCursors", within(t, "ReadCursors", func() error {
			infos, err := ReadCursors(dir, nil)
			if err != nil {
				return err
			}
			if len(infos) != 1 {
				return fmt.Errorf("ReadCursors: %+v", infos)
			}
			return infos[0].Err
		}))
	})
}

// TestForcedRepairKeepsLargerRecords: a forced Repair with a smaller
// MaxRecordSize than the log was written with cuts only the damaged
// record, whether its payload or its header is damaged. It looked for the
// frame after the damage among lengths up to its own MaxRecordSize, so it
// cut every larger intact record after the damage (to the segment's end)
// and recorded them lost.
func TestForcedRepairKeepsLargerRecords(t *testing.T) {
	for name, at := range map[string]int64{"payload": frame.HeaderSize + 100, "header": 8} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			const size = 5000
			l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
			for i := 0; l.Stats().SegmentsCreated < 2; i++ {
				_, err := l.Append(testPayload(1, i, size))
				noErr(t, err)
				noErr(t, l.Flush(context.Background()))
			}
			n := l.NextSeq() - 1
			noErr(t, l.Close())
			flipByte(t, filepath.Join(dir, segmentName(1)), headerPage+at) // record 1
			small := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, MaxRecordSize: 1000}
			rep, err := Repair(dir, true, small)
			noErr(t, err)
			if len(rep.Gaps) != 1 || rep.Gaps[0].First != 1 || rep.Gaps[0].End != 2 {
				t.Fatalf("repair recorded gaps %+v (cut %d bytes), want record 1 alone", rep.Gaps, rep.CutBytes())
			}
			r, err := OpenReader(dir, 0, nil)
			noErr(t, err)
			defer r.Close()
			r.readThroughGaps()
			noErr(t, r.Err())
			if r.records != n-1 {
				t.Fatalf("%d records after the repair, want %d (all but record 1)", r.records, n-1)
			}
		})
	}
}

// TestOpenCursorDoesNotClampToAnUnreadEnd: OpenCursor finds the log's end
// by reading its last segment; where that read stops before the end (a
// record longer than its MaxRecordSize, damage), it fails. It used to take
// the place it stopped for the end, "clamp" a checkpoint past it back to
// it and write that down.
func TestOpenCursorDoesNotClampToAnUnreadEnd(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 1 << 20, BufferSize: 64 << 10})
	for i := range 20 {
		_, err := l.Append(testPayload(1, i, 100+4900*(i/10))) // 10 small, then 10 of 5000 bytes
		noErr(t, err)
	}
	c, err := l.Cursor("ship")
	noErr(t, err)
	for seq := uint64(1); seq <= 15; seq++ {
		noErr(t, c.Ack(seq))
	}
	noErr(t, c.Close())
	noErr(t, l.Close())
	committed, err := readCursorFile(vfs.OS(), dir, "ship", frame.LogID{})
	noErr(t, err)
	if committed != 16 {
		t.Fatalf("checkpoint %d, want 16", committed)
	}
	fc, err := OpenCursor(dir, "ship", &Options{MaxRecordSize: 1000}, nil)
	if err == nil {
		from, _ := fc.Clamped()
		fc.Close()
		t.Fatalf("OpenCursor with a smaller MaxRecordSize opened (clamped from %d to %d)", from, fc.Committed())
	}
	checkTooLarge(t, "OpenCursor", err)
	if got, err := readCursorFile(vfs.OS(), dir, "ship", frame.LogID{}); err != nil || got != committed {
		t.Fatalf("checkpoint %d, %v after the refused OpenCursor, want %d", got, err, committed)
	}
}

// TestCursorCloseRacingLogClose: a Cursor.Close and a Log.Close at once
// release the cursor's lock once between them (both used to, a data race
// on the lock and a second close of its file), and the cursor opens again
// at its last checkpoint.
func TestCursorCloseRacingLogClose(t *testing.T) {
	dir := t.TempDir()
	for i := range 100 {
		l := mustOpen(t, dir, nil)
		c, err := l.Cursor("c")
		noErr(t, err)
		seq, err := l.Append([]byte("x"))
		noErr(t, err)
		noErr(t, c.Ack(seq))
		errc := make(chan error, 1)
		go func() { errc <- c.Close() }()
		noErr(t, l.Close())
		noErr(t, <-errc)
		l = mustOpen(t, dir, nil)
		c, err = l.Cursor("c")
		noErr(t, err)
		if got := c.Committed(); got != uint64(i)+2 {
			t.Fatalf("round %d: cursor reopened at %d, want %d", i, got, i+2)
		}
		noErr(t, c.Close())
		noErr(t, l.Close())
	}
}

// TestDeleteCursor: a deleted cursor no longer holds records from
// retention, and its deletion survives a power cut; an open cursor (here or
// through OpenCursor), a missing one and a bad name are refused.
func TestDeleteCursor(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/log"
	l := mustOpen(t, dir, &Options{fsys: mem, SegmentSize: 64 << 10, BufferSize: 64 << 10})
	defer l.Close()
	c, err := l.Cursor("old")
	noErr(t, err)
	for l.Stats().SegmentsCreated < 4 {
		_, err := l.Append(make([]byte, 1000))
		noErr(t, err)
		noErr(t, l.Flush(context.Background()))
	}
	noErr(t, l.Sync(context.Background()))

	if err := l.DeleteCursor("old"); !errors.Is(err, ErrCursorOpen) {
		t.Fatalf("DeleteCursor of an open cursor: %v", err)
	}
	noErr(t, c.Close())
	noErr(t, l.TruncateFront(l.NextSeq()))
	if l.FirstSeq() != 1 {
		t.Fatalf("retention passed the cursor: first seq %d", l.FirstSeq())
	}
	for _, name := range []string{"nope"} {
		if err := l.DeleteCursor(name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("DeleteCursor(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "../x", ".lock"} {
		if err := l.DeleteCursor(name); !errors.Is(err, ErrCursorName) {
			t.Fatalf("DeleteCursor(%q): %v", name, err)
		}
	}
	// Held through OpenCursor (another process would hold it the same way).
	oc, err := OpenCursor(dir, "old", &Options{fsys: mem}, nil)
	noErr(t, err)
	if err := l.DeleteCursor("old"); !errors.Is(err, ErrCursorOpen) {
		t.Fatalf("DeleteCursor of a cursor OpenCursor holds: %v", err)
	}
	noErr(t, oc.Close())

	noErr(t, l.DeleteCursor("old"))
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 0 {
		t.Fatalf("Cursors after the delete: %+v", infos)
	}
	noErr(t, l.TruncateFront(l.NextSeq()))
	if l.FirstSeq() == 1 {
		t.Fatal("the deleted cursor still holds records from retention")
	}
	// The name makes a new cursor, at the first record left.
	c, err = l.Cursor("old")
	noErr(t, err)
	if c.Committed() != l.FirstSeq() {
		t.Fatalf("a new cursor of the name starts at %d, want %d", c.Committed(), l.FirstSeq())
	}
	noErr(t, c.Close())
	// The deletion is durable: a power cut right after it keeps it.
	noErr(t, l.DeleteCursor("old"))
	if _, err := readCursorFile(mem.Crash(nil), dir, "old", frame.LogID{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a power cut the deleted cursor reads %v", err)
	}
}

// TestFollowDirectoryRemoved: a follower waiting at the end of a log whose
// directory is removed, or replaced by another log's, stops with an error
// naming it, where it waited for ever (its open segment file reads on).
func TestFollowDirectoryRemoved(t *testing.T) {
	for _, replace := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "log")
		// The writer stays open: the follower waits in its active
		// segment, whose file reads on after the directory is gone.
		l := mustOpen(t, dir, nil)
		appendN(t, l, 10)
		noErr(t, l.Flush(context.Background()))
		r, err := OpenReader(dir, 1, nil)
		noErr(t, err)
		for r.Next() {
		}
		noErr(t, r.Err())
		// Following begins.
		short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
		if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait at the end of a quiet log: %v", err)
		}
		cancelShort()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errc := make(chan error, 1)
		go func() {
			for {
				if err := r.Wait(ctx); err != nil {
					errc <- err
					return
				}
				for r.Next() {
				}
			}
		}()
		if replace {
			noErr(t, os.Rename(dir, dir+".old"))
			l2 := mustOpen(t, dir, nil)
			appendN(t, l2, 3)
			noErr(t, l2.Close())
		} else {
			noErr(t, os.RemoveAll(dir))
		}
		err = <-errc
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("replaced %v: the follower waited on: %v", replace, err)
		case !replace && !errors.Is(err, fs.ErrNotExist):
			t.Fatalf("removed: %v, want an error wrapping fs.ErrNotExist", err)
		case !strings.Contains(err.Error(), dir):
			t.Fatalf("replaced %v: %v does not name %s", replace, err, dir)
		}
		t.Logf("replaced %v: %v", replace, err)
		noErr(t, r.Close())
		l.Close() // its directory is gone or moved: what Close says does not matter here
	}
}

// TestSeekZero: seeking a cursor to 0 is refused as below the first record
// (a *TruncatedError naming it), without claiming retention deleted it.
func TestSeekZero(t *testing.T) {
	l := mustOpen(t, t.TempDir(), nil)
	defer l.Close()
	appendN(t, l, 3)
	c, err := l.Cursor("c")
	noErr(t, err)
	defer c.Close()
	err = c.Seek(0)
	te, ok := errors.AsType[*TruncatedError](err)
	if !ok || te.First != 1 || strings.Contains(err.Error(), "deleted") {
		t.Fatalf("Seek(0): %v", err)
	}
}

// writeEmbedding writes a log of records that embed a frame of their own
// seq (embeddingPayload, size bytes) through one segment rotation, and
// closes it.
func writeEmbedding(t *testing.T, dir string, o *Options, size int) {
	t.Helper()
	l := mustOpen(t, dir, o)
	for l.Stats().SegmentsCreated < 2 {
		_, err := l.Append(embeddingPayload(l.NextSeq(), size))
		noErr(t, err)
		noErr(t, l.Flush(context.Background()))
	}
	noErr(t, l.Close())
}

// TestCheckpointerSkipsClosedCursor: a checkpoint from the checkpointer's
// list of open cursors, taken before a Close, never writes the file of a
// cursor closed and then deleted since (an Ack racing the Close moved its
// position past the last checkpoint), which would bring it back.
func TestCheckpointerSkipsClosedCursor(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	defer l.Close()
	appendN(t, l, 10)
	noErr(t, l.Sync(context.Background()))
	c, err := l.Cursor("c")
	noErr(t, err)
	noErr(t, c.Ack(1))
	noErr(t, c.Close())
	c.floor.Store(5) // acks that raced the Close
	noErr(t, l.DeleteCursor("c"))
	_ = c.periodic(l.DurableSeq() + 1) // the checkpointer's stale pass
	if _, err := os.Stat(filepath.Join(dir, cursorDir, "c")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deleted cursor's file came back: %v", err)
	}
}
