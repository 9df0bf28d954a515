package wal

import (
	"context"
	"errors"
	"github.com/appendlog/appendlog/frame"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// cutEveryStep runs an operation once per file-system step it takes and
// cuts the power at that step: for step 1, 2, ... it builds a fresh log
// with prepare (uncounted), counts the steps of act, and at the step-th
// one keeps what a power cut leaves (three outcomes: only synced bytes,
// and two random subsets of the unsynced writes). check judges each
// outcome. It stops at the first step act does not reach.
func cutEveryStep[S any](t *testing.T, prepare func(t *testing.T, fsys vfs.FS) S, act func(S), check func(t *testing.T, step int, crashed *vfs.MemFS, s S)) {
	t.Helper()
	for step := 1; ; step++ {
		mem := vfs.NewMem()
		var armed atomic.Bool
		var ops atomic.Int64
		var cut atomic.Bool
		fsys := vfs.WithFaults(mem, func(op vfs.Op, name string, off int64, n int) (int, error) {
			if armed.Load() && ops.Add(1) == int64(step) {
				cut.Store(true)
				mem.Crash(nil) // the power goes: every later step fails
			}
			return n, nil
		})
		s := prepare(t, fsys)
		armed.Store(true)
		act(s)
		if !cut.Load() {
			if step < 3 {
				t.Fatalf("the operation took only %d file-system steps", step-1)
			}
			t.Logf("power cut at each of %d steps", step-1)
			return
		}
		for k := range 3 {
			var rng *rand.Rand
			if k > 0 {
				rng = rand.New(rand.NewPCG(uint64(step), uint64(k)))
			}
			check(t, step, mem.Crash(rng), s)
			if t.Failed() {
				t.Fatalf("power cut at step %d (outcome %d)", step, k)
			}
		}
	}
}

// checkLog opens the log after a cut, checks that every acked record is
// there and that the log has no hole, appends, and checks that those
// appends survive a second cut.
func checkLog(t *testing.T, crashed *vfs.MemFS, opts Options, acked []ack) (first, next uint64) {
	t.Helper()
	const dir = "/log"
	opts.fsys = crashed
	l, err := Open(dir, &opts)
	if err != nil {
		t.Fatalf("Open after the cut: %v", err)
	}
	first, next = l.FirstSeq(), l.NextSeq()
	seq, err := l.Append(testPayload(99, 0, 100))
	noErr(t, err)
	noErr(t, l.WaitDurable(context.Background(), seq))
	noErr(t, l.Close())
	again := crashed.Crash(nil)
	opts.fsys = again
	l2, err := Open(dir, &opts)
	if err != nil {
		t.Fatalf("Open after a second cut: %v", err)
	}
	// Positioned reads go through the index files the cut left.
	for from := first; from <= seq; from += 13 {
		r, err := l2.NewReader(from, nil)
		noErr(t, err)
		if !r.Next() || r.Seq() != from {
			t.Fatalf("NewReader(%d): at %d, %v", from, r.Seq(), r.Err())
		}
		noErr(t, r.Close())
	}
	noErr(t, l2.Close())
	got := readAll(t, again, dir)
	for _, a := range append(acked, ack{seq, 99, 0}) {
		if a.seq < first {
			continue
		}
		p, ok := got[a.seq]
		if !ok {
			t.Fatalf("durable seq %d lost (log [%d,%d))", a.seq, first, next)
		}
		if g, i, err := parsePayload(p); err != nil || g != a.g || i != a.i {
			t.Fatalf("seq %d holds writer %d #%d (%v), acked %d #%d", a.seq, g, i, err, a.g, a.i)
		}
	}
	if uint64(len(got)) != seq+1-first {
		t.Fatalf("read %d records, log is [%d,%d]: a hole", len(got), first, seq)
	}
	return first, next
}

// TestPowerCutRotation cuts the power at every step of appends acked one
// by one across a rotation: footer, truncate, fdatasync, the new
// segment's header, rename, directory fsync, the index file and the next
// spare file.
func TestPowerCutRotation(t *testing.T) {
	opts := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	type state struct {
		l     *Log
		acked []ack
	}
	var rotated bool
	cutEveryStep(t, func(t *testing.T, fsys vfs.FS) *state {
		o := opts
		o.fsys = fsys
		l := mustOpen(t, "/log", &o)
		s := &state{l: l}
		for i := range 270 { // close to the end of the first segment (285)
			seq, err := l.Append(testPayload(1, i, 200))
			noErr(t, err)
			s.acked = append(s.acked, ack{seq, 1, i})
		}
		noErr(t, l.Sync(context.Background()))
		if l.Stats().SegmentsCreated != 0 {
			t.Fatal("rotated before the cuts")
		}
		return s
	}, func(s *state) {
		for i := 270; i < 310; i++ {
			seq, err := s.l.Append(testPayload(1, i, 200))
			if err == nil {
				err = s.l.WaitDurable(context.Background(), seq)
			}
			if err != nil {
				break
			}
			s.acked = append(s.acked, ack{seq, 1, i})
		}
		rotated = s.l.Stats().SegmentsCreated > 0
		s.l.Close()
	}, func(t *testing.T, step int, crashed *vfs.MemFS, s *state) {
		checkLog(t, crashed, opts, s.acked)
	})
	if !rotated {
		t.Fatal("the appends did not rotate")
	}
}

// TestPowerCutTruncateFront cuts the power at every step of a
// TruncateFront deleting three segments and their index files: the log
// starts at the old first record or the new one, with no hole.
func TestPowerCutTruncateFront(t *testing.T) {
	opts := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	type state struct {
		l     *Log
		acked []ack
		at    uint64
	}
	cutEveryStep(t, func(t *testing.T, fsys vfs.FS) *state {
		o := opts
		o.fsys = fsys
		l := mustOpen(t, "/log", &o)
		s := &state{l: l}
		for i := range 1500 {
			seq, err := l.Append(testPayload(1, i, 200))
			noErr(t, err)
			s.acked = append(s.acked, ack{seq, 1, i})
		}
		noErr(t, l.Sync(context.Background()))
		s.at = 1200
		return s
	}, func(s *state) {
		_ = s.l.TruncateFront(s.at)
		s.l.Close()
	}, func(t *testing.T, step int, crashed *vfs.MemFS, s *state) {
		first, _ := checkLog(t, crashed, opts, s.acked)
		if first != 1 && first > s.at {
			t.Fatalf("log starts at %d after TruncateFront(%d)", first, s.at)
		}
	})
}

// TestPowerCutDeleteCursor cuts the power at every step of DeleteCursor:
// the cursor is there at its checkpoint or gone, and the log opens.
func TestPowerCutDeleteCursor(t *testing.T) {
	opts := Options{SegmentSize: 64 << 10}
	cutEveryStep(t, func(t *testing.T, fsys vfs.FS) *Log {
		o := opts
		o.fsys = fsys
		l := mustOpen(t, "/log", &o)
		appendN(t, l, 100)
		noErr(t, l.Sync(context.Background()))
		for _, name := range []string{"a", "b"} {
			c, err := l.Cursor(name)
			noErr(t, err)
			noErr(t, c.Ack(1))
			noErr(t, c.Commit(context.Background()))
			noErr(t, c.Close())
		}
		return l
	}, func(l *Log) {
		_ = l.DeleteCursor("a")
		l.Close()
	}, func(t *testing.T, step int, crashed *vfs.MemFS, _ *Log) {
		got, err := readCursorFile(crashed, "/log", "a", frame.LogID{})
		if err != nil && !errors.Is(err, fs.ErrNotExist) || err == nil && got != 2 {
			t.Fatalf("cursor a: %d, %v; want 2 or gone", got, err)
		}
		if got, err := readCursorFile(crashed, "/log", "b", frame.LogID{}); err != nil || got != 2 {
			t.Fatalf("cursor b: %d, %v; want 2", got, err)
		}
		o := opts
		o.fsys = crashed
		l, err := Open("/log", &o)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		infos, err := l.Cursors()
		if err != nil {
			t.Fatalf("Cursors: %v", err)
		}
		for _, in := range infos {
			if in.Err != nil {
				t.Fatalf("cursor %s: %v", in.Name, in.Err)
			}
		}
		c, err := l.Cursor("a")
		if err != nil {
			t.Fatalf("Cursor a after the cut: %v", err)
		}
		noErr(t, c.Close())
	})
}

// TestPowerCutTruncateFrontDuringRotation cuts the power right after a
// TruncateFront that deleted every sealed segment while the sealer had
// not yet given the new active segment its name (the rename of the spare
// file and the directory fsync): the log must not come back empty,
// restarting its sequence numbers below the records it had synced.
func TestPowerCutTruncateFrontDuringRotation(t *testing.T) {
	mem := vfs.NewMem()
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	fsys := vfs.WithFaults(mem, func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpRename && filepath.Base(name) == spareName {
			<-release // hold the sealer before it names the new segment
		}
		return n, nil
	})
	opts := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, fsys: fsys}
	l := mustOpen(t, "/log", &opts)
	ctx := context.Background()
	seq, err := l.Append(testPayload(1, 0, 100))
	noErr(t, err)
	noErr(t, l.WaitDurable(ctx, seq))
	for i := 1; i <= 5; i++ { // past the end of the first segment
		_, err := l.Append(testPayload(1, i, 16<<10))
		noErr(t, err)
	}
	noErr(t, l.Flush(ctx))
	if l.Stats().SegmentsCreated == 0 {
		t.Fatal("the appends did not rotate")
	}
	done := make(chan error, 1)
	go func() { done <- l.TruncateFront(l.NextSeq()) }()
	var crashed *vfs.MemFS
	select {
	case err := <-done:
		// TruncateFront returned with the rename held back: the power
		// goes now.
		noErr(t, err)
		crashed = mem.Crash(nil)
		unblock()
	case <-time.After(200 * time.Millisecond):
		// TruncateFront waits for the new segment's name.
		unblock()
		noErr(t, <-done)
		crashed = mem.Crash(nil)
	}
	first := l.FirstSeq()
	l.Close()
	o := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, fsys: crashed}
	l2 := mustOpen(t, "/log", &o)
	defer l2.Close()
	if l2.NextSeq() <= seq || l2.FirstSeq() != first {
		t.Fatalf("after the cut the log is [%d,%d); record %d was durable and TruncateFront left FirstSeq %d (recovery %+v)",
			l2.FirstSeq(), l2.NextSeq(), seq, first, l2.Recovery())
	}
}

// TestPowerCutAfterOpenCreatedParents cuts the power after records were
// synced to a log whose directory Open created with its missing parents:
// every directory Open created must be durable, or the whole log is gone.
func TestPowerCutAfterOpenCreatedParents(t *testing.T) {
	mem := vfs.NewMem()
	noErr(t, mem.MkdirAll("/data", 0o755))
	noErr(t, mem.SyncDir("/"))
	const dir = "/data/streams/s1/log"
	opts := Options{fsys: mem}
	l := mustOpen(t, dir, &opts)
	seq, err := l.Append(testPayload(1, 0, 100))
	noErr(t, err)
	noErr(t, l.WaitDurable(context.Background(), seq))
	crashed := mem.Crash(nil)
	l.Close()
	if _, err := crashed.Stat(dir); err != nil {
		t.Fatalf("record %d was durable, but after the cut the log's directory is gone: %v", seq, err)
	}
	got := readAll(t, crashed, dir)
	if _, ok := got[seq]; !ok {
		t.Fatalf("durable record %d lost with the log's directory: the log holds %d records", seq, len(got))
	}
}
