package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// liveFS runs a test on the OS file system (Readers map segments) and on
// the in-memory one (Readers fall back to ReadAt).
func liveFS(t *testing.T, fn func(t *testing.T, dir string, o Options)) {
	t.Run("fs=os", func(t *testing.T) { fn(t, t.TempDir(), Options{}) })
	t.Run("fs=mem", func(t *testing.T) { fn(t, "/log", WithFS(Options{}, vfs.NewMem())) })
}

// follow reads records from r until it has want of them, waiting for
// more, and checks that they come in sequence order from first on, each
// intact and in its writer's order. It returns the records' sequence
// numbers by writer.
func follow(t *testing.T, r *Reader, first uint64, want int) map[int][]int {
	t.Helper()
	var pos atomic.Uint64
	return followAt(t, r, first, want, &pos)
}

// followAt is follow that publishes the sequence number of each record
// read in pos.
func followAt(t *testing.T, r *Reader, first uint64, want int, pos *atomic.Uint64) map[int][]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[int][]int{}
	next := first
	for n := 0; n < want; {
		if !r.Next() {
			if err := r.Err(); err != nil {
				t.Fatalf("after %d records: %v", n, err)
			}
			if err := r.Wait(ctx); err != nil {
				t.Fatalf("wait after %d records (next %d): %v", n, next, err)
			}
			continue
		}
		if r.Seq() != next {
			t.Fatalf("record %d: seq %d, want %d", n, r.Seq(), next)
		}
		g, i, err := parsePayload(r.Record())
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq(), err)
		}
		if s := seen[g]; len(s) > 0 && s[len(s)-1] >= i {
			t.Fatalf("seq %d: writer %d counter %d after %d", r.Seq(), g, i, s[len(s)-1])
		}
		seen[g] = append(seen[g], i)
		pos.Store(next)
		next++
		n++
	}
	return seen
}

func TestLiveReaderFollowsAppendersThroughRotationAndTruncateFront(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		o.SegmentSize, o.BufferSize = 64<<10, 128<<10
		o.Retention.IgnoreCursors = true
		l := mustOpen(t, dir, &o)
		const writers, per = 8, 1500
		const readers = 3
		var wg sync.WaitGroup
		results := make([]map[int][]int, readers)
		var pos [readers]atomic.Uint64
		for k := range readers {
			r, err := l.NewReader(0, nil)
			noErr(t, err)
			wg.Go(func() {
				defer r.Close()
				results[k] = followAt(t, r, 1, writers*per, &pos[k])
			})
		}
		// TruncateFront runs beside them, never past the slowest reader.
		stop := make(chan struct{})
		var tw sync.WaitGroup
		tw.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := pos[0].Load()
				for k := range readers {
					floor = min(floor, pos[k].Load())
				}
				if err := l.TruncateFront(floor); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond) // pacing, not synchronisation
			}
		})
		// Halfway, the writers wait (up to 10 s) until TruncateFront has
		// deleted a segment, so that deletion runs beside the readers
		// even when a loaded machine schedules the truncating goroutine
		// late.
		var aw sync.WaitGroup
		half := make(chan struct{})
		var halfway sync.WaitGroup
		halfway.Add(writers)
		for g := range writers {
			aw.Go(func() {
				reached := false
				defer func() {
					if !reached {
						halfway.Done() // stopped early: do not hold the others
					}
				}()
				for i := range per {
					if i == per/2 {
						reached = true
						halfway.Done()
						<-half
					}
					if _, err := l.Append(testPayload(g, i, 40+i%200)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		halfway.Wait()
		for deadline := time.Now().Add(10 * time.Second); l.FirstSeq() == 1 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		close(half)
		aw.Wait()
		wg.Wait()
		close(stop)
		tw.Wait()
		if l.Stats().SegmentsCreated < 3 {
			t.Fatalf("only %d rotations: the test must cross segments", l.Stats().SegmentsCreated)
		}
		for k, seen := range results {
			for g := range writers {
				if len(seen[g]) != per {
					t.Fatalf("reader %d: writer %d: %d records, want %d", k, g, len(seen[g]), per)
				}
			}
		}
		// Truncate below the middle; a reader from the start gets
		// ErrTruncated naming FirstSeq; one from FirstSeq reads to the end.
		before := l.FirstSeq()
		if before == 1 {
			t.Fatal("TruncateFront beside the readers deleted nothing")
		}
		noErr(t, l.Flush(context.Background()))
		noErr(t, l.TruncateFront(l.NextSeq())) // all but the active segment
		first := l.FirstSeq()
		l.segs.mu.Lock()
		left := len(l.segs.mu.segs)
		l.segs.mu.Unlock()
		if first < before || first >= l.NextSeq() || left != 1 {
			t.Fatalf("FirstSeq %d, %d segments after TruncateFront(%d), was %d", first, left, l.NextSeq(), before)
		}
		mid := first
		_, err := l.NewReader(1, nil)
		var te *TruncatedError
		if !errors.As(err, &te) || !errors.Is(err, ErrTruncated) || te.First != first {
			t.Fatalf("reader below FirstSeq: %v, want a TruncatedError naming %d", err, first)
		}
		r, err := l.NewReader(mid, nil)
		noErr(t, err)
		follow(t, r, mid, int(l.NextSeq()-mid))
		noErr(t, r.Close())
		noErr(t, l.Close())
		// The deletion is on disk: a reopened log starts at first.
		l = mustOpen(t, dir, &o)
		if l.FirstSeq() != first {
			t.Fatalf("reopened FirstSeq %d, want %d", l.FirstSeq(), first)
		}
		noErr(t, l.Close())
	})
}

func TestLiveReaderSeek(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		o.SegmentSize = 256 << 10
		l := mustOpen(t, dir, &o)
		defer l.Close()
		const n = 20000
		for i := range n {
			_, err := l.Append(testPayload(0, i, 40+i%100))
			noErr(t, err)
		}
		noErr(t, l.Flush(context.Background()))
		for _, from := range []uint64{1, 2, 777, 5000, 12345, n - 1, n} {
			t.Run(fmt.Sprint(from), func(t *testing.T) {
				r, err := l.NewReader(from, nil)
				noErr(t, err)
				defer r.Close()
				if !r.Next() || r.Seq() != from {
					t.Fatalf("first record %d (%v), want %d", r.Seq(), r.Err(), from)
				}
				if _, i, err := parsePayload(r.Record()); err != nil || i != int(from-1) {
					t.Fatalf("record %d holds counter %d (%v)", from, i, err)
				}
			})
		}
	})
}

// TestReadDurableSurvivesPowerCut: every record a ReadDurable Reader saw
// is in the log after a power cut (the crashable file system keeps only
// synced bytes), while 8 goroutines append through rotations.
func TestReadDurableSurvivesPowerCut(t *testing.T) {
	for trial := range 3 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			mem := vfs.NewMem()
			o := WithFS(Options{SegmentSize: 64 << 10, BufferSize: 128 << 10, Sync: SyncNever}, mem)
			l := mustOpen(t, "/log", &o)
			r, err := l.NewReader(0, &ReaderOptions{Visibility: ReadDurable})
			noErr(t, err)
			stop := make(chan struct{})
			var aw sync.WaitGroup
			for g := range 8 {
				aw.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := l.Append(testPayload(g, i, 60)); err != nil {
							return // the power cut fails the log
						}
					}
				})
			}
			want := 3000 + 1000*trial
			follow(t, r, 1, want)
			last := r.Seq()
			noErr(t, r.Close())
			crashed := mem.Crash(nil)
			close(stop)
			aw.Wait()
			l.Close() // fails: the file system is gone
			got := readAll(t, crashed, "/log")
			for s := uint64(1); s <= last; s++ {
				if _, ok := got[s]; !ok {
					t.Fatalf("record %d was read with ReadDurable but lost by the power cut (%d survived)", s, len(got))
				}
			}
		})
	}
}

// TestReaderFinishesDeletedSegment: a Reader in a segment TruncateFront
// deletes reads the rest of it from its mapping (or open handle), then
// reports that the next one is gone.
func TestReaderFinishesDeletedSegment(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		o.SegmentSize = 64 << 10
		o.Retention.IgnoreCursors = true
		l := mustOpen(t, dir, &o)
		defer l.Close()
		for i := range 3000 {
			_, err := l.Append(testPayload(0, i, 100))
			noErr(t, err)
		}
		noErr(t, l.Sync(context.Background()))
		r, err := l.NewReader(1, nil)
		noErr(t, err)
		defer r.Close()
		if !r.Next() || r.Seq() != 1 {
			t.Fatalf("first record %d: %v", r.Seq(), r.Err())
		}
		if o.fsys == nil && r.ls.m == nil {
			t.Fatal("the segment is not mapped on the OS file system")
		}
		seg, _ := r.Position()
		end := r.ls.end.Load()
		if end == 0 {
			t.Fatal("segment 1 is not sealed: write more")
		}
		noErr(t, l.TruncateFront(l.NextSeq()-1))
		if l.FirstSeq() <= end {
			t.Fatalf("FirstSeq %d: the segments after %s were not deleted", l.FirstSeq(), seg)
		}
		if _, err := o.fsys0().Stat(dir + "/" + seg); err == nil {
			t.Fatalf("%s still exists", seg)
		}
		n := uint64(1)
		for r.Next() {
			n++
			if r.Seq() != n {
				t.Fatalf("seq %d, want %d", r.Seq(), n)
			}
			if _, i, err := parsePayload(r.Record()); err != nil || i != int(n-1) {
				t.Fatalf("seq %d: counter %d, %v", n, i, err)
			}
		}
		if n != end-1 {
			t.Fatalf("read up to %d, want the deleted segment's last record %d", n, end-1)
		}
		var te *TruncatedError
		if !errors.As(r.Err(), &te) || te.Seq != end || te.First != l.FirstSeq() {
			t.Fatalf("after the deleted segment: %v, want a TruncatedError for %d naming %d", r.Err(), end, l.FirstSeq())
		}
	})
}

// fsys0 returns the options' file system, the OS one when unset.
func (o Options) fsys0() vfs.FS {
	if o.fsys == nil {
		return vfs.OS()
	}
	return o.fsys
}

// TestWaitingReaderWakesFlusher: with a clock that never moves, no flush
// timer fires, so a record appended after a Reader began to wait reaches
// it only because the waiting Reader makes the flusher write at once.
func TestWaitingReaderWakesFlusher(t *testing.T) {
	for _, vis := range []Visibility{ReadWritten, ReadDurable} {
		t.Run(fmt.Sprint(vis), func(t *testing.T) {
			fake := clock.NewFake(time.Unix(1000, 0))
			l := mustOpen(t, t.TempDir(), &Options{clock: fake, FlushInterval: time.Hour, BatchAge: time.Hour})
			defer l.Close()
			r, err := l.NewReader(0, &ReaderOptions{Visibility: vis})
			noErr(t, err)
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for i := range 50 {
				waiting := make(chan error, 1)
				go func() { waiting <- r.Wait(ctx) }()
				if _, err := l.Append(testPayload(0, i, 50)); err != nil {
					t.Fatal(err)
				}
				if err := <-waiting; err != nil {
					t.Fatalf("record %d: Wait: %v", i+1, err)
				}
				if !r.Next() || r.Seq() != uint64(i+1) {
					t.Fatalf("record %d: Next gave %d (%v)", i+1, r.Seq(), r.Err())
				}
			}
		})
	}
}

// TestReaderMisuse: every wrong use is refused with an error that says
// why, and nothing panics.
func TestReaderMisuse(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	appendRecs(t, l, 10)
	if _, err := l.NewReader(12, nil); !errors.Is(err, ErrNotAppended) {
		t.Errorf("reader past the end: %v, want ErrNotAppended", err)
	}
	if _, err := l.NewReader(1, &ReaderOptions{Visibility: 7}); err == nil {
		t.Error("unknown visibility accepted")
	}
	r, err := l.NewReader(11, nil) // at the end: waits for the next
	noErr(t, err)
	if r.Next() || r.Err() != nil {
		t.Errorf("reader at the end: Next true or Err %v", r.Err())
	}
	//lint:ignore SA1012 the nil context is the misuse under test
	if err := r.Wait(nil); !errors.Is(err, ErrNilContext) {
		t.Errorf("Wait(nil): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	if err := r.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with nothing appended: %v, want the context's error", err)
	}
	cancel()
	done := make(chan error, 1)
	go func() { done <- r.Wait(context.Background()) }()
	noErr(t, l.Close())
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Wait across Close: %v, want ErrClosed", err)
	}
	noErr(t, r.Close())
	noErr(t, r.Close())
	if _, err := l.NewReader(1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("NewReader after Close: %v, want ErrClosed", err)
	}
	if err := l.TruncateFront(5); !errors.Is(err, ErrClosed) {
		t.Errorf("TruncateFront after Close: %v, want ErrClosed", err)
	}
	or, err := OpenReader(dir, 1, nil)
	noErr(t, err)
	defer or.Close()
	for or.Next() {
	}
	noErr(t, or.Err())
	// Nobody appends: Wait follows the files until ctx is done.
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := or.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a Reader of a stopped log: %v, want the context's error", err)
	}
}

// TestLiveNextAllocs pins the zero-allocation read path.
func TestLiveNextAllocs(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		l := mustOpen(t, dir, &o)
		defer l.Close()
		appendRecs(t, l, 2000)
		noErr(t, l.Flush(context.Background()))
		r, err := l.NewReader(0, nil)
		noErr(t, err)
		defer r.Close()
		r.Next() // the ReadAt fallback sizes its buffer once
		if a := testing.AllocsPerRun(1000, func() {
			if !r.Next() {
				t.Fatal(r.Err())
			}
		}); a != 0 {
			t.Fatalf("%v allocations per Next", a)
		}
	})
}

// TestRetentionInBackground: MaxBytes keeps the log near its bound as
// segments seal; MaxAge deletes segments sealed longer ago than it (on the
// log's clock); a Cursor holds retention back unless IgnoreCursors.
func TestRetentionInBackground(t *testing.T) {
	segFiles := func(t *testing.T, fsys vfs.FS, dir string) int {
		segs, _, _, err := listSegments(fsys, dir)
		noErr(t, err)
		return len(segs)
	}
	t.Run("MaxBytes", func(t *testing.T) {
		dir := t.TempDir()
		o := &Options{SegmentSize: 64 << 10, Retention: Retention{MaxBytes: 4 * 64 << 10}}
		l := mustOpen(t, dir, o)
		appendRecs(t, l, 20000)
		noErr(t, l.Close())
		if n := segFiles(t, vfs.OS(), dir); n > 5 || n < 2 {
			t.Fatalf("%d segments left, want at most 5 (MaxBytes is 4 segments)", n)
		}
		l = mustOpen(t, dir, o)
		if l.FirstSeq() <= 1 {
			t.Fatalf("FirstSeq %d: nothing deleted", l.FirstSeq())
		}
		if l.Stats().SegmentsDeleted != 0 {
			t.Fatal("deleted counter survived reopening")
		}
		noErr(t, l.Close())
		readAll(t, vfs.OS(), dir)
	})
	t.Run("MaxAge", func(t *testing.T) {
		fake := clock.NewFake(time.Unix(1000, 0))
		dir := t.TempDir()
		o := &Options{SegmentSize: 64 << 10, clock: fake, Retention: Retention{MaxAge: time.Hour}}
		l := mustOpen(t, dir, o)
		defer func() { l.Close() }()
		appendRecs(t, l, 3000)
		noErr(t, l.Sync(context.Background()))
		before := segFiles(t, vfs.OS(), dir)
		if before < 3 || l.FirstSeq() != 1 {
			t.Fatalf("%d segments, FirstSeq %d before the hour passed", before, l.FirstSeq())
		}
		fake.Advance(2 * time.Hour)
		// The next seal applies retention.
		created := l.Stats().SegmentsCreated
		for i := 0; l.Stats().SegmentsCreated == created; i++ {
			_, err := l.Append(testPayload(1, i, 100))
			noErr(t, err)
			noErr(t, l.Flush(context.Background()))
		}
		noErr(t, l.Close()) // joins the sealer, and so retention
		l = mustOpen(t, dir, o)
		if l.FirstSeq() == 1 || segFiles(t, vfs.OS(), dir) >= before {
			t.Fatalf("FirstSeq %d, %d segments: MaxAge deleted nothing", l.FirstSeq(), segFiles(t, vfs.OS(), dir))
		}
	})
	t.Run("cursor", func(t *testing.T) {
		for _, ignore := range []bool{false, true} {
			dir := t.TempDir()
			l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, Retention: Retention{IgnoreCursors: ignore}})
			c, err := l.Cursor("slow")
			noErr(t, err)
			appendRecs(t, l, 3000)
			noErr(t, l.Sync(context.Background()))
			noErr(t, l.TruncateFront(l.NextSeq()))
			if kept := l.FirstSeq() == 1; kept == ignore {
				t.Errorf("IgnoreCursors %v: FirstSeq %d", ignore, l.FirstSeq())
			}
			noErr(t, c.Close())
			noErr(t, l.Close())
		}
	})
}

// appendRecs appends n records made by testPayload (writer 0).
func appendRecs(t testing.TB, l *Log, n int) {
	t.Helper()
	for i := range n {
		_, err := l.Append(testPayload(0, i, 64))
		noErr(t, err)
	}
}

// TestSeekDistrustsIndex: a sparse index entry that points at the wrong
// frame, or at no frame, costs a scan from the segment's start, never a
// wrong record or a false corruption report.
func TestSeekDistrustsIndex(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		l := mustOpen(t, dir, &o)
		defer l.Close()
		appendRecs(t, l, 5000)
		noErr(t, l.Flush(context.Background()))
		ls := l.segs.mu.segs[0]
		x := &ls.idx
		x.mu.Lock()
		if len(x.offs) < 10 {
			x.mu.Unlock()
			t.Fatalf("%d index entries: the writer does not index", len(x.offs))
		}
		x.offs[5] += 16            // points into a frame's payload
		x.seqs[7]--                // names the wrong record
		x.offs[9] = int64(1) << 40 // past the mapping
		probe := []uint64{x.seqs[5], x.seqs[5] + 1, x.seqs[7] + 1, x.seqs[9], x.seqs[9] + 3}
		x.mu.Unlock()
		for _, from := range probe {
			r, err := l.NewReader(from, nil)
			noErr(t, err)
			if !r.Next() || r.Seq() != from {
				t.Fatalf("from %d: got %d, %v", from, r.Seq(), r.Err())
			}
			if _, i, err := parsePayload(r.Record()); err != nil || i != int(from-1) {
				t.Fatalf("from %d: counter %d, %v", from, i, err)
			}
			noErr(t, r.Close())
		}
	})
}

// mappedSegments counts the segments of l's table that are mapped or have
// a file open.
func mappedSegments(l *Log) int {
	t := l.segs
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.mu.segs {
		if s.m != nil || s.f != nil {
			n++
		}
	}
	return n
}

// TestReaderReleasesSealedSegments: a Reader that has read a sealed
// segment lets its mapping go (mapped pages count in the process's RSS),
// so reading a long log end to end keeps at most the segment being read
// and the active one mapped; reading again maps a segment again.
func TestReaderReleasesSealedSegments(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		o.SegmentSize = 64 << 10
		l := mustOpen(t, dir, &o)
		defer l.Close()
		for i := range 3000 {
			if _, err := l.Append(testPayload(0, i, 200)); err != nil {
				t.Fatal(err)
			}
		}
		noErr(t, l.Flush(context.Background()))
		if l.Stats().SegmentsCreated < 8 {
			t.Fatalf("only %d segments", l.Stats().SegmentsCreated)
		}
		for pass := range 2 {
			r, err := l.NewReader(0, nil)
			noErr(t, err)
			n := 0
			for r.Next() {
				n++
				if m := mappedSegments(l); m > 2 {
					t.Fatalf("pass %d, record %d: %d segments mapped", pass, r.Seq(), m)
				}
			}
			noErr(t, r.Err())
			if n != 3000 {
				t.Fatalf("pass %d read %d records", pass, n)
			}
			noErr(t, r.Close())
		}
	})
}
