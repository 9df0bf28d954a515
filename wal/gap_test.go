package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// The gap tests' log: _gapRecords records of _gapSize bytes in 64 KiB
// segments (about 284 records each), every payload naming its seq.
const (
	_gapRecords = 2600
	_gapSize    = 200
	_gapFrame   = frame.HeaderSize + _gapSize
)

var _gapOpts = &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}

// gapPayload is the recognisable payload of record seq.
func gapPayload(seq uint64) []byte {
	p := bytes.Repeat([]byte{byte('a' + seq%26)}, _gapSize)
	copy(p, fmt.Sprintf("record %08d|", seq))
	return p
}

// buildGapLog writes n recognisable records and returns the segment names.
func buildGapLog(t *testing.T, dir string, n int) []string {
	t.Helper()
	l := mustOpen(t, dir, _gapOpts)
	for i := 1; i <= n; i++ {
		seq, err := l.Append(gapPayload(uint64(i)))
		noErr(t, err)
		if seq != uint64(i) {
			t.Fatalf("seq %d, want %d", seq, i)
		}
	}
	noErr(t, l.Close())
	segs, _, _, err := listSegments(_gapOpts.withDefaults().fsys, dir)
	noErr(t, err)
	var names []string
	for _, s := range segs {
		names = append(names, s.name)
	}
	return names
}

// readAcrossGaps reads the whole log, continuing after each recorded gap.
// It checks every payload against its seq and the order, and returns the
// seqs read and the gaps reported.
func readAcrossGaps(t *testing.T, dir string) (seqs map[uint64]bool, gaps []GapError) {
	t.Helper()
	return readAcrossGapsOn(t, dir, nil, func(s uint64, p []byte) bool {
		return s > _gapRecords || bytes.Equal(p, gapPayload(s))
	})
}

// readAcrossGapsOn is readAcrossGaps with options and a payload check.
func readAcrossGapsOn(t *testing.T, dir string, o *Options, ok func(seq uint64, p []byte) bool) (seqs map[uint64]bool, gaps []GapError) {
	t.Helper()
	r, err := OpenReader(dir, 1, o)
	noErr(t, err)
	defer r.Close()
	seqs = make(map[uint64]bool)
	var last uint64
	for {
		for r.Next() {
			s := r.Seq()
			if s <= last {
				t.Fatalf("seq %d after %d", s, last)
			}
			if !ok(s, r.Record()) {
				t.Fatalf("seq %d holds %q", s, r.Record())
			}
			seqs[s] = true
			last = s
		}
		var g *GapError
		if !errors.As(r.Err(), &g) {
			break
		}
		if g.First != last+1 {
			t.Fatalf("gap %+v does not start right after seq %d", g, last)
		}
		if !IsGap(r.Err()) || IsGap(nil) || IsCorrupt(r.Err()) {
			t.Fatalf("IsGap/IsCorrupt of %v", r.Err())
		}
		gaps = append(gaps, *g)
		last = g.End - 1
	}
	noErr(t, r.Err())
	return seqs, gaps
}

// segFirst returns the first sequence number a segment name encodes.
func segFirst(t *testing.T, name string) uint64 {
	t.Helper()
	first, ok := parseSegmentName(name)
	if !ok {
		t.Fatalf("bad segment name %q", name)
	}
	return first
}

// recordOffset is the file offset of the k-th record (from 0) of a segment
// of the gap tests' log.
func recordOffset(k int) int64 { return frame.FileHeaderSize + int64(k)*_gapFrame }

// checkAfterRepair checks the repaired log: the records in lost are gone and
// reported as exactly the gaps want, every other record is there in order,
// Open (with VerifyOnOpen) works and reports the gaps it read, appends
// continue, and a reopened log verifies clean with the gaps named.
func checkAfterRepair(t *testing.T, dir string, want []GapError) {
	t.Helper()
	lost := make(map[uint64]bool)
	for _, g := range want {
		for s := g.First; s < g.End; s++ {
			lost[s] = true
		}
	}
	seqs, gaps := readAcrossGaps(t, dir)
	if len(gaps) != len(want) {
		t.Fatalf("reader reported gaps %+v, want %+v", gaps, want)
	}
	for i, g := range gaps {
		if g.First != want[i].First || g.End != want[i].End || g.Segment != want[i].Segment {
			t.Fatalf("gap %d: %+v, want %+v", i, g, want[i])
		}
	}
	for s := uint64(1); s <= _gapRecords; s++ {
		if seqs[s] == lost[s] {
			t.Fatalf("seq %d: read %v, lost %v", s, seqs[s], lost[s])
		}
	}
	rep, err := Verify(dir, nil)
	if err != nil || rep.Torn != nil || len(rep.Gaps) != len(want) || rep.Records != uint64(_gapRecords-len(lost)) || rep.NextSeq != _gapRecords+1 {
		t.Fatalf("Verify after repair: %+v %v", rep, err)
	}
	o := *_gapOpts
	o.VerifyOnOpen = true
	l := mustOpen(t, dir, &o)
	if rec := l.Recovery(); len(rec.Gaps) != len(want) || rec.NextSeq != _gapRecords+1 {
		t.Fatalf("Open after repair: %+v", rec)
	}
	for i := range 300 { // enough to seal the tail and start another segment
		seq, err := l.Append([]byte(fmt.Sprintf("after repair %d", i)))
		noErr(t, err)
		if seq != _gapRecords+1+uint64(i) {
			t.Fatalf("append after repair got seq %d", seq)
		}
	}
	noErr(t, l.Close())
	l = mustOpen(t, dir, &o)
	noErr(t, l.Close())
	rep, err = Verify(dir, nil)
	if err != nil || len(rep.Gaps) != len(want) || rep.Records != uint64(_gapRecords+300-len(lost)) {
		t.Fatalf("Verify after appends: %+v %v", rep, err)
	}
	// A repaired log is consistent: nothing more to repair.
	again, err := Repair(dir, true, nil)
	if err != nil || len(again.Cuts)+len(again.Gaps)+len(again.Rebuilt)+len(again.Created)+len(again.RemovedSegments) != 0 {
		t.Fatalf("second repair: %+v %v", again, err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	noErr(t, err)
	return b
}

func TestRepairKeepsIntactRecords(t *testing.T) {
	t.Run("bit-flip-in-3rd-of-8-sealed", func(t *testing.T) {
		dir := t.TempDir()
		segs := buildGapLog(t, dir, _gapRecords)
		if len(segs) < 9 {
			t.Fatalf("%d segments, want 8 sealed and a tail", len(segs))
		}
		first := segFirst(t, segs[2])
		const k = 100
		path := filepath.Join(dir, segs[2])
		flipByte(t, path, recordOffset(k)+frame.HeaderSize+50)
		damaged := readFile(t, path)

		o := *_gapOpts
		o.VerifyOnOpen = true
		if _, err := Open(dir, &o); !IsCorrupt(err) {
			t.Fatalf("Open with VerifyOnOpen: %v", err)
		}
		if _, err := Repair(dir, false, nil); !IsCorrupt(err) {
			t.Fatalf("Repair without force: %v", err)
		}
		if !bytes.Equal(readFile(t, path), damaged) {
			t.Fatal("Repair without force changed the segment")
		}
		rep, err := Repair(dir, true, nil)
		noErr(t, err)
		want := []GapError{{Segment: segs[2], Offset: recordOffset(k), First: first + k, End: first + k + 1}}
		if len(rep.Gaps) != 1 || rep.Gaps[0] != want[0] || len(rep.Cuts) != 1 || len(rep.Rebuilt) != 1 || rep.Corruption == nil {
			t.Fatalf("forced repair: %+v", rep)
		}
		c := rep.Cuts[0]
		if c.Segment != segs[2] || c.Offset != recordOffset(k) || c.Bytes != _gapFrame {
			t.Fatalf("cut %+v, want the damaged frame at %d", c, recordOffset(k))
		}
		if side := readFile(t, filepath.Join(dir, c.SideFile)); !bytes.Equal(side, damaged[c.Offset:c.Offset+c.Bytes]) {
			t.Fatal("the side file does not hold the cut bytes")
		}
		checkAfterRepair(t, dir, want)
	})

	t.Run("tail-durable-region", func(t *testing.T) {
		dir := t.TempDir()
		segs := buildGapLog(t, dir, _gapRecords)
		tail := segs[len(segs)-1]
		first := segFirst(t, tail)
		if _gapRecords-first < 20 {
			t.Fatalf("tail holds %d records", _gapRecords-first)
		}
		flipByte(t, filepath.Join(dir, tail), recordOffset(5)+frame.HeaderSize+3)
		if _, err := Open(dir, _gapOpts); !IsCorrupt(err) {
			t.Fatalf("Open: %v", err)
		}
		rep, err := Repair(dir, true, nil)
		noErr(t, err)
		want := []GapError{{Segment: tail, Offset: recordOffset(5), First: first + 5, End: first + 6}}
		if len(rep.Gaps) != 1 || rep.Gaps[0] != want[0] {
			t.Fatalf("forced repair: %+v", rep)
		}
		checkAfterRepair(t, dir, want)
	})

	t.Run("missing-middle-segment", func(t *testing.T) {
		dir := t.TempDir()
		segs := buildGapLog(t, dir, _gapRecords)
		noErr(t, os.Remove(filepath.Join(dir, segs[3])))
		first := segFirst(t, segs[3])
		end := segFirst(t, segs[4])
		rep, err := Repair(dir, true, nil)
		noErr(t, err)
		want := []GapError{{Segment: segs[3], Offset: frame.FileHeaderSize, First: first, End: end}}
		if len(rep.Created) != 1 || rep.Created[0] != segs[3] || len(rep.Gaps) != 1 || rep.Gaps[0] != want[0] || len(rep.Cuts) != 0 {
			t.Fatalf("forced repair: %+v", rep)
		}
		checkAfterRepair(t, dir, want)
	})

	for _, tc := range []struct {
		name string
		off  func(size int64) int64
	}{
		{"damaged-footer-only", func(size int64) int64 { return size - 10 }},
		{"damaged-header-only", func(int64) int64 { return 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := buildGapLog(t, dir, _gapRecords)
			path := filepath.Join(dir, segs[1])
			st, err := os.Stat(path)
			noErr(t, err)
			flipByte(t, path, tc.off(st.Size()))
			if _, err := Verify(dir, nil); !IsCorrupt(err) {
				t.Fatalf("Verify of the damage: %v", err)
			}
			rep, err := Repair(dir, true, nil)
			noErr(t, err)
			if len(rep.Gaps) != 0 || len(rep.Rebuilt) != 1 || rep.Rebuilt[0] != segs[1] {
				t.Fatalf("forced repair: %+v", rep)
			}
			checkAfterRepair(t, dir, nil)
		})
	}

	t.Run("two-damaged-places", func(t *testing.T) {
		dir := t.TempDir()
		segs := buildGapLog(t, dir, _gapRecords)
		f1 := segFirst(t, segs[1])
		f5 := segFirst(t, segs[5])
		flipByte(t, filepath.Join(dir, segs[1]), recordOffset(0)+7) // a header byte of the first record
		// Two adjacent records in segs[5]: one gap of two.
		flipByte(t, filepath.Join(dir, segs[5]), recordOffset(200)+frame.HeaderSize+1)
		flipByte(t, filepath.Join(dir, segs[5]), recordOffset(201)+frame.HeaderSize+1)
		rep, err := Repair(dir, true, nil)
		noErr(t, err)
		want := []GapError{
			{Segment: segs[1], Offset: recordOffset(0), First: f1, End: f1 + 1},
			{Segment: segs[5], Offset: recordOffset(200), First: f5 + 200, End: f5 + 202},
		}
		if len(rep.Gaps) != 2 || rep.Gaps[0] != want[0] || rep.Gaps[1] != want[1] || len(rep.Rebuilt) != 2 {
			t.Fatalf("forced repair: %+v", rep)
		}
		checkAfterRepair(t, dir, want)
	})

	t.Run("records-lost-at-end-of-sealed", func(t *testing.T) {
		// Damage that runs into the footer: no frame after it decodes, so
		// the records up to the next segment's first are a gap and the
		// footer is rebuilt.
		dir := t.TempDir()
		segs := buildGapLog(t, dir, _gapRecords)
		path := filepath.Join(dir, segs[2])
		st, err := os.Stat(path)
		noErr(t, err)
		first := segFirst(t, segs[2])
		next := segFirst(t, segs[3])
		k := int((next - first) - 3)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		noErr(t, err)
		_, err = f.WriteAt(bytes.Repeat([]byte{0xEE}, int(st.Size()-recordOffset(k))), recordOffset(k))
		noErr(t, err)
		noErr(t, f.Close())
		rep, err := Repair(dir, true, nil)
		noErr(t, err)
		want := []GapError{{Segment: segs[2], Offset: recordOffset(k), First: first + uint64(k), End: next}}
		if len(rep.Gaps) != 1 || rep.Gaps[0] != want[0] {
			t.Fatalf("forced repair: %+v", rep)
		}
		checkAfterRepair(t, dir, want)
	})
}

// TestUnrecordedHoleIsCorruption: recovery accepts a recorded gap only. A
// record missing from the sequence without a gap frame is corruption.
func TestUnrecordedHoleIsCorruption(t *testing.T) {
	dir := t.TempDir()
	segs := buildGapLog(t, dir, 400)
	tail := segs[len(segs)-1]
	path := filepath.Join(dir, tail)
	data := readFile(t, path)
	first := segFirst(t, tail)
	// Rewrite the tail without its 3rd record: seqs jump by one.
	k := 2
	hole := append(append([]byte{}, data[:recordOffset(k)]...), data[recordOffset(k+1):]...)
	var mb [frame.MarkSize]byte
	frame.PutMark(mb[:], frame.Mark{DurableEnd: int64(len(hole)), NextSeq: 401})
	copy(hole[frame.MarkOffset:], mb[:])
	noErr(t, os.WriteFile(path, hole, 0o644))
	if _, err := Open(dir, _gapOpts); !IsCorrupt(err) {
		t.Fatalf("Open of a log with an unrecorded hole at seq %d: %v", first+uint64(k), err)
	}
	// The same hole with a gap frame in its place is accepted.
	var g [gapFrameSize]byte
	putGap(g[:], first+uint64(k), 1)
	rec := append(append(append([]byte{}, data[:recordOffset(k)]...), g[:]...), data[recordOffset(k+1):]...)
	frame.PutMark(mb[:], frame.Mark{DurableEnd: int64(len(rec)), NextSeq: 401})
	copy(rec[frame.MarkOffset:], mb[:])
	noErr(t, os.WriteFile(path, rec, 0o644))
	l := mustOpen(t, dir, _gapOpts)
	got := l.Recovery()
	noErr(t, l.Close())
	if len(got.Gaps) != 1 || got.Gaps[0].First != first+uint64(k) || got.NextSeq != 401 {
		t.Fatalf("recovery of a recorded gap: %+v", got)
	}
	// A gap frame whose seq is not the next expected one is not a gap.
	putGap(g[:], first+uint64(k)+1, 1)
	copy(rec[recordOffset(k):], g[:])
	noErr(t, os.WriteFile(path, rec, 0o644))
	if _, err := Open(dir, _gapOpts); !IsCorrupt(err) {
		t.Fatalf("Open with a misplaced gap frame: %v", err)
	}
}

// TestReaderFromSkipsEarlierGaps: a Reader starting after a gap does not
// report it; one starting inside it does.
func TestReaderFromSkipsEarlierGaps(t *testing.T) {
	dir := t.TempDir()
	segs := buildGapLog(t, dir, _gapRecords)
	noErr(t, os.Remove(filepath.Join(dir, segs[3])))
	_, err := Repair(dir, true, nil)
	noErr(t, err)
	first := segFirst(t, segs[3])
	end := segFirst(t, segs[4])
	for _, tc := range []struct {
		from   uint64
		report bool
	}{{1, true}, {first, true}, {end - 1, true}, {end, false}, {end + 5, false}} {
		r, err := OpenReader(dir, tc.from, nil)
		noErr(t, err)
		ok := r.Next()
		var g *GapError
		gap := errors.As(r.Err(), &g)
		if tc.report {
			for ok {
				ok = r.Next()
			}
			if !errors.As(r.Err(), &g) || g.First != first || g.End != end {
				t.Fatalf("from %d: %v, want the gap", tc.from, r.Err())
			}
			if !r.Next() || r.Seq() != end || r.Err() != nil {
				t.Fatalf("from %d: after the gap: seq %d, %v", tc.from, r.Seq(), r.Err())
			}
		} else if !ok || gap || r.Seq() != tc.from {
			t.Fatalf("from %d: first seq %d, err %v", tc.from, r.Seq(), r.Err())
		}
		noErr(t, r.Close())
	}
}

// TestRepairSurvivesPowerCut stops a forced Repair at every file-system
// operation in turn, cuts the power (only synced state survives), and
// repairs again: the result must be the same as one uninterrupted repair,
// and the cut bytes must be in a side file.
func TestRepairSurvivesPowerCut(t *testing.T) {
	const n = 1200
	const dir = "/log"
	build := func(t *testing.T) (*vfs.MemFS, []string, uint64, []byte) {
		mem := vfs.NewMem()
		o := *_gapOpts
		o.fsys = mem
		l := mustOpen(t, dir, &o)
		for i := 1; i <= n; i++ {
			_, err := l.Append(gapPayload(uint64(i)))
			noErr(t, err)
		}
		noErr(t, l.Close())
		segs, _, _, err := listSegments(mem, dir)
		noErr(t, err)
		if len(segs) < 4 {
			t.Fatalf("%d segments", len(segs))
		}
		f, err := mem.OpenFile(filepath.Join(dir, segs[2].name), os.O_RDWR, 0)
		noErr(t, err)
		off := recordOffset(7)
		cut := make([]byte, _gapFrame)
		_, err = f.ReadAt(cut, off)
		noErr(t, err)
		cut[frame.HeaderSize+9] ^= 0x10
		_, err = f.WriteAt(cut[frame.HeaderSize+9:frame.HeaderSize+10], off+frame.HeaderSize+9)
		noErr(t, err)
		noErr(t, f.Sync())
		noErr(t, f.Close())
		var names []string
		for _, s := range segs {
			names = append(names, s.name)
		}
		return mem, names, segs[2].firstSeq + 7, cut
	}
	check := func(t *testing.T, fsys vfs.FS, lost uint64, cut []byte) {
		t.Helper()
		o := &Options{fsys: fsys}
		seqs, gaps := readAcrossGapsOn(t, dir, o, func(s uint64, p []byte) bool {
			return s > n || bytes.Equal(p, gapPayload(s))
		})
		if len(gaps) != 1 || gaps[0].First != lost || gaps[0].End != lost+1 {
			t.Fatalf("gaps %+v, want record %d", gaps, lost)
		}
		for s := uint64(1); s <= n; s++ {
			if seqs[s] == (s == lost) {
				t.Fatalf("seq %d: read %v", s, seqs[s])
			}
		}
		names, err := fsys.List(dir)
		noErr(t, err)
		found := false
		for _, name := range names {
			if strings.Contains(name, cutSuffix) {
				f, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
				noErr(t, err)
				b := make([]byte, len(cut)+1)
				k, err := f.ReadAt(b, 0)
				if err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				noErr(t, f.Close())
				found = found || bytes.Equal(b[:k], cut)
			}
		}
		if !found {
			t.Fatalf("no side file holds the cut bytes (files %q)", names)
		}
		l, err := Open(dir, o)
		noErr(t, err)
		noErr(t, l.Close())
	}

	// Count the operations of an uninterrupted repair.
	mem, _, lost, cut := build(t)
	var ops atomic.Int64
	counting := vfs.WithFaults(mem, func(op vfs.Op, name string, off int64, n int) (int, error) {
		ops.Add(1)
		return n, nil
	})
	_, err := Repair(dir, true, &Options{fsys: counting})
	noErr(t, err)
	check(t, mem, lost, cut)
	total := int(ops.Load())
	for k := 1; k <= total; k++ {
		mem, _, lost, cut := build(t)
		var seen atomic.Int64
		failing := vfs.WithFaults(mem, func(op vfs.Op, name string, off int64, n int) (int, error) {
			if seen.Add(1) >= int64(k) {
				return 0, syscall.EIO
			}
			return n, nil
		})
		// Repair fails, unless the failing operation is a Close after its
		// work was synced (whose error does not matter).
		_, _ = Repair(dir, true, &Options{fsys: failing})
		crashed := mem.Crash(nil)
		if _, err := Repair(dir, true, &Options{fsys: crashed}); err != nil {
			t.Fatalf("op %d of %d: Repair after the power cut: %v", k, total, err)
		}
		check(t, crashed, lost, cut)
	}
	t.Logf("power cut at each of %d operations", total)
}

// skipOnceFS is a file system whose first listing of a directory leaves out
// one name, as a listing racing a writer's segment creation can (ext4
// returns entries in hash order and may skip one created meanwhile).
type skipOnceFS struct {
	vfs.FS
	skip  string
	lists atomic.Int32
}

func (f *skipOnceFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	entries, err := f.FS.ReadDir(dir)
	if err != nil || f.lists.Add(1) > 1 {
		return entries, err
	}
	out := entries[:0:0]
	for _, e := range entries {
		if e.Name() != f.skip {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestReaderRelistsAMissedSegment: a segment left out of OpenReader's
// listing is found by a second listing and read; a segment that is really
// missing is still a gap that names it.
func TestReaderRelistsAMissedSegment(t *testing.T) {
	dir := t.TempDir()
	segs := buildGapLog(t, dir, 1200)
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	fsys := &skipOnceFS{FS: vfs.OS(), skip: segs[2]}
	o := WithFS(*_gapOpts, fsys)
	seqs, gaps := readAcrossGapsOn(t, dir, &o, func(s uint64, p []byte) bool { return bytes.Equal(p, gapPayload(s)) })
	if len(seqs) != 1200 || len(gaps) != 0 || fsys.lists.Load() < 2 {
		t.Fatalf("read %d records, gaps %v, %d listings; want 1200, none, 2", len(seqs), gaps, fsys.lists.Load())
	}

	noErr(t, os.Remove(filepath.Join(dir, segs[2])))
	r, err := OpenReader(dir, 1, nil)
	noErr(t, err)
	defer r.Close()
	for r.Next() {
	}
	if err := r.Err(); !IsCorrupt(err) || !strings.Contains(err.Error(), "a segment is missing") || !strings.Contains(err.Error(), segs[3]) {
		t.Fatalf("a removed middle segment: %v", err)
	}
}
