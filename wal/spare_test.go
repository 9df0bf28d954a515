package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// TestRemovedSpareStaysRemoved: a power cut during a rotation's seal
// kept the new segment under spareName (its header and records) but took
// the sealed segment's last record and its footer. Open does not adopt
// the new segment (its records followed the record lost) and removes it;
// appends then go on in the old segment, and a record of the same size
// fills it to the same boundary, so its footer names the same next
// record as the new segment's header. A second power cut while that seal
// is under way (the footer durable, the directory not yet synced) must
// not bring back the removed file for the next Open to adopt: its records
// would follow a record they never followed.
func TestRemovedSpareStaysRemoved(t *testing.T) {
	mem := vfs.NewMem()
	sealing := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	var armed atomic.Bool
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && armed.Load() && strings.HasSuffix(name, segSuffix) {
			once.Do(func() { close(sealing) })
			<-release
		}
		return n, nil
	}
	const dir = "/log"
	opts := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, Sync: SyncNever}
	o1 := opts
	o1.fsys = vfs.WithFaults(mem, inj)
	l := mustOpen(t, dir, &o1)
	armed.Store(true)
	ctx := context.Background()
	i := 0
	appendFlush := func(l *Log, g int) uint64 {
		t.Helper()
		seq, err := l.Append(testPayload(g, i, 200))
		noErr(t, err)
		noErr(t, l.Flush(ctx))
		i++
		return seq
	}
	for l.Stats().SegmentsCreated == 0 {
		appendFlush(l, 1)
	}
	<-sealing
	var last uint64
	for range 5 {
		last = appendFlush(l, 1)
	}
	next := last - 4 // the new segment's first record
	cut1 := killCopy(t, mem, dir)
	close(release)
	noErr(t, l.Close())
	if _, err := cut1.Stat(filepath.Join(dir, spareName)); err != nil {
		t.Fatalf("the new segment is not under %s: %v", spareName, err)
	}

	// The first power cut took record next-1 and the footer after it.
	r, err := OpenReader(dir, next-1, &Options{fsys: cut1})
	noErr(t, err)
	if !r.Next() || r.Seq() != next-1 {
		t.Fatalf("record %d not found: %v", next-1, r.Err())
	}
	seg, off := r.Position()
	noErr(t, r.Close())
	f, err := cut1.OpenRegular(filepath.Join(dir, seg), os.O_RDWR, 0)
	noErr(t, err)
	noErr(t, f.Truncate(off))
	noErr(t, f.Sync())
	noErr(t, f.Close())

	// The next Open goes on in that segment; the second power cut comes
	// as the seal of its next rotation syncs the directory.
	var armed2 atomic.Bool
	var cut2 *vfs.MemFS
	cutDone := make(chan struct{})
	inj2 := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSyncDir && armed2.CompareAndSwap(true, false) {
			cut2 = cut1.Crash(nil)
			close(cutDone)
		}
		return n, nil
	}
	o2 := opts
	o2.fsys = vfs.WithFaults(cut1, inj2)
	l2 := mustOpen(t, dir, &o2)
	if got := l2.NextSeq(); got != next-1 {
		t.Fatalf("after the first cut the log ends before %d, want %d", got, next-1)
	}
	armed2.Store(true)
	if seq := appendFlush(l2, 2); seq != next-1 {
		t.Fatalf("appended %d, want %d", seq, next-1)
	}
	select {
	case <-cutDone:
	case <-time.After(time.Minute):
		t.Fatal("the record did not fill the segment: no seal synced the directory")
	}
	l2.Close() // on a file system the power cut stopped

	o3 := opts
	o3.fsys = cut2
	l3, err := Open(dir, &o3)
	if err != nil {
		t.Fatalf("Open after the second cut: %v", err)
	}
	noErr(t, l3.Close())
	for seq, p := range readAll(t, cut2, dir) {
		if g, _, err := parsePayload(p); err == nil && g == 1 && seq >= next-1 {
			t.Fatalf("record %d is one the first process wrote after the record the first power cut took: %s came back and was adopted", seq, spareName)
		}
	}
}

// killedDuringSeal returns a copy of a log whose process was killed
// while the seal of its first segment was stuck in its fdatasync, with
// n records flushed into the new segment, still under spareName: next
// is its first record, and records end before end.
func killedDuringSeal(t *testing.T, n int) (killed *vfs.MemFS, next, end uint64) {
	t.Helper()
	mem := vfs.NewMem()
	sealing := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	var armed atomic.Bool
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && armed.Load() && strings.HasSuffix(name, segSuffix) {
			once.Do(func() { close(sealing) })
			<-release
		}
		return n, nil
	}
	l := mustOpen(t, "/log", &Options{fsys: vfs.WithFaults(mem, inj), SegmentSize: 64 << 10, BufferSize: 64 << 10, Sync: SyncNever})
	armed.Store(true)
	ctx := context.Background()
	i := 0
	appendFlush := func() uint64 {
		seq, err := l.Append(testPayload(1, i, 200))
		noErr(t, err)
		noErr(t, l.Flush(ctx))
		i++
		return seq
	}
	for l.Stats().SegmentsCreated == 0 {
		next = appendFlush() + 1
	}
	<-sealing
	end = next
	for range n {
		end = appendFlush() + 1
	}
	killed = killCopy(t, mem, "/log")
	close(release)
	noErr(t, l.Close())
	return killed, next, end
}

// TestUnnamedSegmentStates: Verify, OpenReader, Open and Repair agree on
// what a log holds whose new segment is still under spareName, whole,
// with a torn last record, with only zeros after its header, with a torn
// header, or with a header that names another record or another log.
func TestUnnamedSegmentStates(t *testing.T) {
	const dir = "/log"
	spare := filepath.Join(dir, spareName)
	patch := func(t *testing.T, fsys vfs.FS, off int64, b []byte) {
		t.Helper()
		f, err := fsys.OpenRegular(spare, os.O_RDWR, 0)
		noErr(t, err)
		_, err = f.WriteAt(b, off)
		noErr(t, err)
		noErr(t, f.Sync())
		noErr(t, f.Close())
	}
	// recordAt returns the offset of record seq in the new segment.
	recordAt := func(t *testing.T, fsys vfs.FS, seq uint64) int64 {
		t.Helper()
		r, err := OpenReader(dir, seq, &Options{fsys: fsys})
		noErr(t, err)
		defer r.Close()
		if !r.Next() || r.Seq() != seq {
			t.Fatalf("record %d not found: %v", seq, r.Err())
		}
		_, off := r.Position()
		return off
	}
	for _, tc := range []struct {
		name string
		// damage changes the new segment and returns where the log's
		// records end, and whether it is adopted.
		damage func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool)
	}{
		{"whole", func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool) { return end, true }},
		{"torn last record", func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool) {
			patch(t, fsys, recordAt(t, fsys, end-1)+frame.HeaderSize+50, []byte{0xa5, 0x5a})
			return end - 1, true
		}},
		{"last record zeroed in part", func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool) {
			patch(t, fsys, recordAt(t, fsys, end-1)+frame.HeaderSize+64, make([]byte, 100))
			return end - 1, true
		}},
		{"zeros after the header", func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool) {
			patch(t, fsys, headerPage, make([]byte, 64<<10))
			return next, true
		}},
		{"torn header", func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool) {
			patch(t, fsys, 20, []byte{0xff})
			return next, false
		}},
		{"header names the record after", func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool) {
			id, err := segmentsLogID(fsys, dir, []segInfo{{name: segmentName(1), firstSeq: 1}})
			noErr(t, err)
			patch(t, fsys, 0, headerPageFor(next+1, id))
			return next, false
		}},
		{"header of another log", func(t *testing.T, fsys vfs.FS, next, end uint64) (uint64, bool) {
			id, err := frame.NewLogID()
			noErr(t, err)
			patch(t, fsys, 0, headerPageFor(next, id))
			return next, false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			killed, next, end := killedDuringSeal(t, 8)
			want, adopted := tc.damage(t, killed, next, end)
			repaired := killCopy(t, killed, dir)

			rep, err := Verify(dir, &Options{fsys: killed})
			noErr(t, err)
			if rep.NextSeq != want || (len(rep.Warnings) > 0 && strings.Contains(rep.Warnings[0], spareName)) != adopted {
				t.Fatalf("Verify: %+v, want the log to end before %d, %s adopted %v", rep, want, spareName, adopted)
			}
			if got := uint64(len(readAll(t, killed, dir))); got != want-1 {
				t.Fatalf("OpenReader read %d records, want %d", got, want-1)
			}

			rr, err := Repair(dir, false, &Options{fsys: repaired})
			noErr(t, err)
			_ = rr
			l, err := Open(dir, &Options{fsys: killed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			rec := l.Recovery()
			noErr(t, l.Close())
			if rec.NextSeq != want || rec.TailSegment != segmentName(next) {
				t.Fatalf("Open: %+v, want the log to end before %d in %s", rec, want, segmentName(next))
			}
			if got := uint64(len(readAll(t, killed, dir))); got != want-1 {
				t.Fatalf("after Open: %d records, want %d", got, want-1)
			}
			if _, err := killed.Stat(spare); err == nil {
				t.Fatalf("%s left after Open", spareName)
			}
			l2, err := Open(dir, &Options{fsys: repaired, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			noErr(t, err)
			if got := l2.NextSeq(); got != want {
				t.Fatalf("Open after Repair: the log ends before %d, want %d", got, want)
			}
			noErr(t, l2.Close())
		})
	}
}

// TestReadersRaceSpareRename: Readers of another process (OpenReader, read
// through and then followed) race a writer whose seals are slowed, so
// that they often meet a rotation's new segment under spareName and its
// rename: each sees every record once, in order, none missing.
func TestReadersRaceSpareRename(t *testing.T) {
	mem := vfs.NewMem()
	var slow atomic.Bool
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if slow.Load() && (op == vfs.OpRename || op == vfs.OpSync && strings.HasSuffix(name, segSuffix)) {
			time.Sleep(time.Millisecond)
		}
		return n, nil
	}
	const dir = "/log"
	fsys := vfs.WithFaults(mem, inj)
	l := mustOpen(t, dir, &Options{fsys: fsys, SegmentSize: 64 << 10, BufferSize: 64 << 10, Sync: SyncNever})
	defer l.Close()
	slow.Store(true)
	const total = 3000
	var wg sync.WaitGroup
	var done atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for i := range total {
			if _, err := l.Append(testPayload(1, i, 200)); err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
			if i%7 == 0 {
				if err := l.Flush(context.Background()); err != nil {
					t.Errorf("flush: %v", err)
					return
				}
			}
		}
		if err := l.Flush(context.Background()); err != nil {
			t.Errorf("flush: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	read := func(follow bool) {
		r, err := OpenReader(dir, 0, &Options{fsys: fsys})
		if err != nil {
			t.Errorf("OpenReader: %v", err)
			return
		}
		defer r.Close()
		r.followPoll = time.Millisecond
		next := uint64(1)
		for {
			for r.Next() {
				if r.Seq() != next {
					t.Errorf("record %d after %d", r.Seq(), next-1)
					return
				}
				if _, i, err := parsePayload(r.Record()); err != nil || uint64(i) != next-1 {
					t.Errorf("record %d holds #%d (%v)", next, i, err)
					return
				}
				next++
			}
			if err := r.Err(); err != nil {
				t.Errorf("reader at %d: %v", next, err)
				return
			}
			if !follow || next > total {
				return
			}
			if err := r.Wait(ctx); err != nil {
				t.Errorf("Wait at %d: %v", next, err)
				return
			}
		}
	}
	var rg sync.WaitGroup
	for k := range 4 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			if k == 0 {
				read(true)
				return
			}
			for !done.Load() && ctx.Err() == nil {
				read(k == 1)
			}
		}()
	}
	wg.Wait()
	slow.Store(false)
	rg.Wait()
}

// copyInto copies the files of dir in src into dst, durably.
func copyInto(t *testing.T, src, dst vfs.FS, dir string) {
	t.Helper()
	noErr(t, vfs.MkdirAllDurable(dst, dir))
	entries, err := src.ReadDir(dir)
	noErr(t, err)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			copyInto(t, src, dst, p)
			continue
		}
		f, err := src.OpenFile(p, os.O_RDONLY, 0)
		noErr(t, err)
		size, err := f.Size()
		noErr(t, err)
		b := make([]byte, size)
		if size > 0 {
			_, err = f.ReadAt(b, 0)
			noErr(t, err)
		}
		noErr(t, f.Close())
		g, err := dst.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		noErr(t, err)
		_, err = g.WriteAt(b, 0)
		noErr(t, err)
		noErr(t, g.Sync())
		noErr(t, g.Close())
	}
	noErr(t, dst.SyncDir(dir))
}

// TestPowerCutAdoptingSpare cuts the power at every step of an Open
// that names the new segment a killed process left under spareName
// (fdatasync, rename, directory fsync, then its tail recovery): the
// next Open finds every record, in the segment under its name or still
// under spareName, and appends after the last.
func TestPowerCutAdoptingSpare(t *testing.T) {
	const dir = "/log"
	killed, next, end := killedDuringSeal(t, 8)
	opts := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	cutEveryStep(t,
		func(t *testing.T, fsys vfs.FS) vfs.FS {
			copyInto(t, killed, fsys, dir)
			return fsys
		},
		func(fsys vfs.FS) {
			o := opts
			o.fsys = fsys
			if l, err := Open(dir, &o); err == nil {
				l.Close()
			}
		},
		func(t *testing.T, step int, crashed *vfs.MemFS, _ vfs.FS) {
			first, got := checkLog(t, crashed, opts, nil)
			if first != 1 || got != end {
				t.Errorf("after the cut the log is [%d, %d), want [1, %d) (the new segment starts at %d)", first, got, end, next)
			}
		})
}

// TestSpareReadErrorKeepsIt: an I/O error reading the header of the new
// segment a killed process left under spareName fails Open, naming the
// file; it is not taken for a spare that holds no record and removed.
func TestSpareReadErrorKeepsIt(t *testing.T) {
	const dir = "/log"
	killed, _, end := killedDuringSeal(t, 8)
	var fail atomic.Bool
	fail.Store(true)
	fsys := vfs.WithFaults(killed, func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpRead && fail.Load() && strings.HasSuffix(name, spareName) {
			return 0, errors.New("input/output error")
		}
		return n, nil
	})
	opts := Options{fsys: fsys, SegmentSize: 64 << 10, BufferSize: 64 << 10}
	if l, err := Open(dir, &opts); err == nil {
		noErr(t, l.Close())
	} else if !strings.Contains(err.Error(), spareName) || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("Open with %s unreadable: %v, want an error naming it and the cause", spareName, err)
	}
	fail.Store(false)
	l := mustOpen(t, dir, &opts)
	got := l.NextSeq()
	noErr(t, l.Close())
	if got != end {
		t.Fatalf("after an Open that could not read %s the log ends before %d, want %d: its records were removed", spareName, got, end)
	}
}

// TestSpareReadErrorVerify: Verify and OpenReader report an I/O error
// reading the header of the new segment under spareName, as Open does
// (TestSpareReadErrorKeepsIt), rather than end the log before it.
func TestSpareReadErrorVerify(t *testing.T) {
	const dir = "/log"
	killed, next, _ := killedDuringSeal(t, 8)
	fsys := vfs.WithFaults(killed, func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpRead && strings.HasSuffix(name, spareName) {
			return 0, errors.New("input/output error")
		}
		return n, nil
	})
	rep, err := Verify(dir, &Options{fsys: fsys})
	if err == nil || !strings.Contains(err.Error(), spareName) {
		t.Fatalf("Verify with %s unreadable: %+v, %v; want an error naming it", spareName, rep, err)
	}
	r, err := OpenReader(dir, next-1, &Options{fsys: fsys})
	noErr(t, err)
	defer r.Close()
	for r.Next() {
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), spareName) {
		t.Fatalf("OpenReader with %s unreadable: stopped before %d with %v; want an error naming it", spareName, r.NextSeq(), err)
	}
}

// TestRepairNameSpareError: Repair's error when it cannot name the new
// segment under spareName names both files, with the package's prefix
// once.
func TestRepairNameSpareError(t *testing.T) {
	const dir = "/log"
	killed, next, _ := killedDuringSeal(t, 8)
	fsys := vfs.WithFaults(killed, func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpRename && strings.HasSuffix(name, spareName) {
			return 0, errors.New("no space left on device")
		}
		return n, nil
	})
	_, err := Repair(dir, false, &Options{fsys: fsys})
	if err == nil {
		t.Fatal("Repair named the new segment though its rename failed")
	}
	if msg := err.Error(); strings.Count(msg, "wal: ") != 1 || !strings.Contains(msg, spareName) || !strings.Contains(msg, segmentName(next)) || !strings.Contains(msg, "no space left on device") {
		t.Fatalf("Repair: %q, want the wal prefix once, both names and the cause", msg)
	}
}
