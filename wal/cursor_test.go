package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// appendN appends n small records and returns the last seq.
func appendN(t testing.TB, l *Log, n int) uint64 {
	t.Helper()
	var last uint64
	for i := range n {
		seq, err := l.Append([]byte(fmt.Sprintf("rec %d", i)))
		noErr(t, err)
		last = seq
	}
	return last
}

func TestCursorNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	l := mustOpen(t, dir, nil)
	defer l.Close()
	for _, tc := range []struct{ name, why string }{
		{"", "empty"},
		{"../x", "starts with '.'"},
		{"..", "starts with '.'"},
		{".hidden", "starts with '.'"},
		{"a/b", "byte 1 is 0x2f"},
		{"/abs", "byte 0 is 0x2f"},
		{"nul\x00x", "byte 3 is 0x00"},
		{"sp ace", "byte 2 is 0x20"},
		{"é", "byte 0 is 0xc3"},
		{strings.Repeat("n", MaxCursorName+1), "256 bytes (max 255)"},
	} {
		c, err := l.Cursor(tc.name)
		if !errors.Is(err, ErrCursorName) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.name)) {
			t.Errorf("Cursor(%q) = %v, %v; want ErrCursorName saying %s and quoting the name", tc.name, c, err, tc.why)
		}
	}
	// Nothing was written outside the cursors directory, nor for the bad names.
	if ents, err := os.ReadDir(filepath.Dir(dir)); err != nil || len(ents) != 1 {
		t.Fatalf("files beside the log: %v %v", ents, err)
	}
	if _, err := os.Stat(filepath.Join(dir, cursorDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a bad name created the cursors directory: %v", err)
	}
	// The longest name and every allowed character work.
	for _, name := range []string{strings.Repeat("n", MaxCursorName), "Az09._-x"} {
		c, err := l.Cursor(name)
		noErr(t, err)
		if _, err := l.Cursor(name); !errors.Is(err, ErrCursorOpen) {
			t.Fatalf("second Cursor(%q) = %v, want ErrCursorOpen", name, err)
		}
		noErr(t, c.Close())
		c, err = l.Cursor(name) // closed: may be opened again
		noErr(t, err)
		noErr(t, c.Close())
	}
}

func TestCursorAckCommitReopen(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	appendN(t, l, 100)
	c, err := l.Cursor("c")
	noErr(t, err)
	if got := c.Committed(); got != 1 {
		t.Fatalf("new cursor at %d, want the first record 1", got)
	}
	// Out of order: 3, 1, 5 leaves 2 unacked.
	for _, s := range []uint64{3, 1, 5, 1} {
		noErr(t, c.Ack(s))
	}
	if got := c.Committed(); got != 2 {
		t.Fatalf("committed %d after acks 3 1 5, want 2", got)
	}
	noErr(t, c.Ack(2))
	if got := c.Committed(); got != 4 {
		t.Fatalf("committed %d after ack 2, want 4", got)
	}
	noErr(t, c.Ack(4))
	noErr(t, c.Commit(context.Background()))
	for s := uint64(6); s <= 40; s++ {
		noErr(t, c.Ack(s))
	}
	noErr(t, c.Ack(50)) // a hole at 41..49
	// Errors: past the end, too far above the floor.
	if err := c.Ack(101); !errors.Is(err, ErrAckRange) || !strings.Contains(err.Error(), "not appended") {
		t.Fatalf("Ack(101) of a 100-record log = %v", err)
	}
	appendN(t, l, DefaultAckWindow+100)
	if err := c.Ack(41 + DefaultAckWindow); !errors.Is(err, ErrAckRange) || !strings.Contains(err.Error(), "ack window") {
		t.Fatalf("Ack past the window = %v", err)
	}
	noErr(t, c.Ack(40+DefaultAckWindow)) // the last slot of the window
	var nilCtx context.Context
	if err := c.Commit(nilCtx); !errors.Is(err, ErrNilContext) {
		t.Fatalf("Commit(nil) = %v", err)
	}
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 1 || infos[0].Name != "c" || !infos[0].Open || infos[0].Acked != 41 || infos[0].Committed != 6 {
		t.Fatalf("Cursors = %+v", infos)
	}
	noErr(t, l.Close())
	if err := c.Ack(41); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack after Log.Close = %v", err)
	}
	noErr(t, c.Close())

	l = mustOpen(t, dir, nil)
	defer l.Close()
	c, err = l.Cursor("c")
	noErr(t, err)
	if got := c.Committed(); got != 41 {
		t.Fatalf("reopened cursor at %d, want 41 (the lowest unacked)", got)
	}
	infos, err = l.Cursors()
	noErr(t, err)
	end := l.NextSeq()
	if len(infos) != 1 || infos[0].Committed != 41 || infos[0].Lag != end-41 || infos[0].LagBytes <= 0 {
		t.Fatalf("Cursors = %+v (next %d)", infos, end)
	}
	noErr(t, c.Close())
	if err := c.Commit(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
}

// TestCursorLagBytes checks the lag in bytes against the frames' sizes,
// across segments.
// TestCursorAckWindow: CursorOptions.AckWindow, rounded up to a power of
// two, bounds how far above the committed position an ack may be; a bad
// window is an error naming it.
func TestCursorAckWindow(t *testing.T) {
	l := mustOpen(t, t.TempDir(), nil)
	defer l.Close()
	appendN(t, l, 200)
	for _, w := range []int{-1, 1<<24 + 1} {
		if _, err := l.CursorWith("bad", &CursorOptions{AckWindow: w}); err == nil || !strings.Contains(err.Error(), "AckWindow") {
			t.Fatalf("AckWindow %d: %v", w, err)
		}
	}
	c, err := l.CursorWith("c", &CursorOptions{AckWindow: 100}) // 128 slots
	noErr(t, err)
	if err := c.Ack(129); !errors.Is(err, ErrAckRange) || !strings.Contains(err.Error(), "the ack window is 128") {
		t.Fatalf("Ack 128 above the floor = %v", err)
	}
	for s := uint64(128); s >= 2; s-- {
		noErr(t, c.Ack(s))
	}
	if c.Committed() != 1 {
		t.Fatalf("committed %d with seq 1 unacked", c.Committed())
	}
	noErr(t, c.Ack(1))
	if c.Committed() != 129 {
		t.Fatalf("committed %d after acking 1..128", c.Committed())
	}
	noErr(t, c.Ack(200)) // within the window of the new floor
	noErr(t, c.Close())
}

func TestCursorLagBytes(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	rec := make([]byte, 100)
	const n = 2000 // about 4 segments
	for range n {
		_, err := l.Append(rec)
		noErr(t, err)
	}
	c, err := l.Cursor("c")
	noErr(t, err)
	for s := uint64(1); s < 700; s++ {
		noErr(t, c.Ack(s))
	}
	noErr(t, c.Close())
	noErr(t, l.Close())
	infos, err := ReadCursors(dir, nil)
	noErr(t, err)
	want := int64(n-699) * int64(16+len(rec))
	if len(infos) != 1 || infos[0].Committed != 700 || infos[0].Lag != n-699 || infos[0].LagBytes != want {
		t.Fatalf("ReadCursors = %+v, want committed 700, lag %d, %d bytes", infos, n-699, want)
	}
}

func TestCursorFileDamage(t *testing.T) {
	good := encodeCursor("c", 7, frame.LogID{})
	flip := func(i int) []byte { b := append([]byte(nil), good...); b[i] ^= 1; return b }
	for _, tc := range []struct {
		name    string
		content []byte
		problem string
	}{
		{"empty", nil, "empty file"},
		{"foreign", []byte("[core]\nbare = false\n"), "not a cursor file"},
		{"truncated", good[:12], "truncated"},
		{"short-name", good[:len(good)-1], "name length"},
		{"version", func() []byte { b := encodeCursor("c", 7, frame.LogID{}); b[8] = 9; return b }(), "version 9"},
		{"bit-flip", flip(17), "checksum mismatch"},
		{"other-name", encodeCursor("d", 7, frame.LogID{}), `records cursor "d", not "c"`},
		{"huge", make([]byte, 4096), "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, nil)
			defer l.Close()
			appendN(t, l, 10)
			noErr(t, os.MkdirAll(filepath.Join(dir, cursorDir), 0o755))
			path := filepath.Join(dir, cursorDir, "c")
			noErr(t, os.WriteFile(path, tc.content, 0o644))
			_, err := l.Cursor("c")
			var cfe *CursorFileError
			if !errors.As(err, &cfe) || !errors.Is(err, ErrBadCursorFile) || cfe.Path != path || !strings.Contains(err.Error(), tc.problem) {
				t.Fatalf("Cursor on a %s file = %v, want a *CursorFileError naming %s and %q", tc.name, err, path, tc.problem)
			}
			// The file was left as it was.
			if b, _ := os.ReadFile(path); string(b) != string(tc.content) {
				t.Fatalf("the damaged file was changed")
			}
			infos, err := l.Cursors()
			noErr(t, err)
			if len(infos) != 1 || !errors.Is(infos[0].Err, ErrBadCursorFile) {
				t.Fatalf("Cursors = %+v, want the damage reported", infos)
			}
			if _, _, err := l.cursorFloor(); !errors.Is(err, ErrBadCursorFile) {
				t.Fatalf("cursorFloor = %v, want the damage: retention must not guess", err)
			}
		})
	}
}

// TestCursorClampedPastEnd: a checkpoint past the log's end (the log was
// cut) resumes at the end and says so, never at the start.
func TestCursorClampedPastEnd(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	appendN(t, l, 10)
	noErr(t, l.Close())
	noErr(t, os.MkdirAll(filepath.Join(dir, cursorDir), 0o755))
	noErr(t, os.WriteFile(filepath.Join(dir, cursorDir, "c"), encodeCursor("c", 500, frame.LogID{}), 0o644))
	l = mustOpen(t, dir, nil)
	defer l.Close()
	c, err := l.Cursor("c")
	noErr(t, err)
	if from, ok := c.Clamped(); !ok || from != 500 || c.Committed() != 11 {
		t.Fatalf("Clamped = %d %v, committed %d; want clamped from 500 to 11", from, ok, c.Committed())
	}
	if got, err := readCursorFile(vfs.OS(), dir, "c", frame.LogID{}); err != nil || got != 11 {
		t.Fatalf("clamped checkpoint on disk = %d, %v; want 11", got, err)
	}
}

func TestCursorFloor(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	defer l.Close()
	appendN(t, l, 50)
	if _, ok, err := l.cursorFloor(); ok || err != nil {
		t.Fatalf("floor of a log with no cursors: %v %v", ok, err)
	}
	a, err := l.Cursor("a")
	noErr(t, err)
	b, err := l.Cursor("b")
	noErr(t, err)
	for s := uint64(1); s <= 30; s++ {
		noErr(t, a.Ack(s))
	}
	for s := uint64(1); s <= 20; s++ {
		noErr(t, b.Ack(s))
	}
	noErr(t, a.Commit(context.Background()))
	noErr(t, b.Commit(context.Background()))
	noErr(t, b.Close())
	if f, ok, err := l.cursorFloor(); !ok || err != nil || f != 21 {
		t.Fatalf("floor = %d %v %v, want 21 (the slowest, closed, cursor)", f, ok, err)
	}
}

// TestCursorConcurrentAcks acks every record once from 8 goroutines in
// shuffled order, with duplicates: the committed position must end past
// the last, and never pass an unacked record on the way.
func TestCursorConcurrentAcks(t *testing.T) {
	l := mustOpen(t, t.TempDir(), &Options{Sync: SyncNever})
	defer l.Close()
	const n = 40000
	for range n / 1000 {
		recs := make([][]byte, 1000)
		for i := range recs {
			recs[i] = []byte{1}
		}
		_, err := l.AppendBatch(recs)
		noErr(t, err)
	}
	c, err := l.Cursor("c")
	noErr(t, err)
	var acked [n + 1]atomic.Bool
	var next atomic.Uint64 // hands out blocks of 64 seqs
	next.Store(1)
	var wg sync.WaitGroup
	for g := range 8 {
		rng := rand.New(rand.NewPCG(uint64(g), 1))
		wg.Go(func() {
			for {
				lo := next.Add(64) - 64
				if lo > n {
					return
				}
				blk := make([]uint64, 0, 64)
				for s := lo; s < lo+64 && s <= n; s++ {
					blk = append(blk, s)
				}
				rng.Shuffle(len(blk), func(i, j int) { blk[i], blk[j] = blk[j], blk[i] })
				for i, s := range blk {
					acked[s].Store(true)
					// Past the window: wait for the slower workers.
					err := c.Ack(s)
					for errors.Is(err, ErrAckRange) && !t.Failed() {
						runtime.Gosched()
						err = c.Ack(s)
					}
					if err != nil {
						t.Error(err)
						return
					}
					if i%5 == 0 {
						noErr(t, c.Ack(blk[0])) // a duplicate
					}
					// The floor never passes an unacked record.
					if f := c.Committed(); f > 1 && !acked[f-1].Load() {
						t.Errorf("committed %d but %d is not acked", f, f-1)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if got := c.Committed(); got != n+1 {
		t.Fatalf("committed %d after acking 1..%d, want %d", got, n, n+1)
	}
}

func TestAckDoesNotAllocate(t *testing.T) {
	l := mustOpen(t, t.TempDir(), &Options{Sync: SyncNever})
	defer l.Close()
	appendN(t, l, 5000)
	c, err := l.Cursor("c")
	noErr(t, err)
	s := uint64(0)
	if a := testing.AllocsPerRun(4000, func() {
		s++
		if err := c.Ack(s); err != nil {
			panic(err)
		}
	}); a != 0 {
		t.Fatalf("Ack allocates %v times", a)
	}
}

// countCheckpoints wraps fsys so that *n counts the checkpoints written
// (renames of the checkpoint's temporary file).
func countCheckpoints(fsys vfs.FS, n *atomic.Int64) vfs.FS {
	return vfs.WithFaults(fsys, func(op vfs.Op, name string, off int64, k int) (int, error) {
		if b := filepath.Base(name); op == vfs.OpRename && strings.HasPrefix(b, ".") && strings.HasSuffix(b, ".tmp") {
			n.Add(1)
		}
		return k, nil
	})
}

// TestCheckpointEveryBoundsWrites: a million acks over ten periods of fake
// time write at most one checkpoint per period plus one at Close, and do
// write one in each period the position moved.
func TestCheckpointEveryBoundsWrites(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const periods = 10
	const every = time.Second
	fake := clock.NewFake(time.Unix(1000, 0))
	var writes atomic.Int64
	o := &Options{Sync: SyncNever, BufferSize: 32 << 20, SegmentSize: 64 << 20, CheckpointEvery: every, clock: fake}
	o.fsys = countCheckpoints(vfs.OS(), &writes)
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	recs := make([][]byte, 1000)
	for i := range recs {
		recs[i] = []byte{}
	}
	for range n / len(recs) {
		_, err := l.AppendBatch(recs)
		noErr(t, err)
	}
	noErr(t, l.Sync(context.Background()))
	c, err := l.Cursor("c")
	noErr(t, err)
	created := writes.Load() // the new cursor's first checkpoint
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := fake.Now()
	seq := uint64(1)
	for !rearmed(fake, start.Add(every)) { // the checkpointer's first timer
		ch := fake.Changed()
		if rearmed(fake, start.Add(every)) {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("the checkpointer armed no timer")
		}
	}
	for p := range periods {
		for ; seq <= uint64(n*(p+1)/periods); seq++ {
			if err := c.Ack(seq); err != nil {
				t.Fatal(err)
			}
		}
		before := writes.Load()
		// Fire the checkpointer's timer and wait until it re-armed it.
		deadline := start.Add(time.Duration(p+1) * every)
		fake.Advance(deadline.Sub(fake.Now()))
		for {
			ch := fake.Changed()
			if rearmed(fake, deadline.Add(every)) {
				break
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("period %d: the checkpointer did not re-arm its timer", p)
			}
		}
		if got := writes.Load() - before; got != 1 {
			t.Fatalf("period %d: %d checkpoints written, want 1", p, got)
		}
		// The checkpoint is the committed position: every record below
		// seq was acked, seq was not.
		if got, err := readCursorFile(l.opts.fsys, l.Dir(), "c", frame.LogID{}); err != nil || got != seq {
			t.Fatalf("period %d: checkpoint %d, %v; want %d", p, got, err, seq)
		}
	}
	noErr(t, c.Close())
	total := writes.Load() - created
	if limit := int64(periods + 1); total > limit {
		t.Fatalf("%d acks over %d periods wrote %d checkpoints, more than %d", n, periods, total, limit)
	}
	if got, err := readCursorFile(vfs.OS(), l.Dir(), "c", frame.LogID{}); err != nil || got != uint64(n+1) {
		t.Fatalf("last checkpoint %d, %v; want %d", got, err, n+1)
	}
	t.Logf("%d acks, %d periods: %d checkpoint writes", n, periods, total)
}

// rearmed reports whether a timer is armed for at.
func rearmed(fake *clock.Fake, at time.Time) bool {
	for _, d := range fake.Deadlines() {
		if d.Equal(at) {
			return true
		}
	}
	return false
}

// TestCheckpointNeverPastDurable: with nothing synced, the checkpointer
// writes no position past the durable records, and after a power cut the
// checkpoint is within the recovered log.
func TestCheckpointNeverPastDurable(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	mem := vfs.NewMem()
	dir := "/log"
	o := &Options{Sync: SyncNever, CheckpointEvery: time.Second, clock: fake, fsys: mem}
	l := mustOpen(t, dir, o)
	appendN(t, l, 100)
	noErr(t, l.Sync(context.Background()))
	appendN(t, l, 100) // 101..200 not durable
	noErr(t, l.Flush(context.Background()))
	c, err := l.Cursor("c")
	noErr(t, err)
	for s := uint64(1); s <= 150; s++ {
		noErr(t, c.Ack(s))
	}
	limit := l.DurableSeq() + 1
	noErr(t, c.checkpoint(limit)) // what the checkpointer does each period
	if got, err := readCursorFile(mem, dir, "c", frame.LogID{}); err != nil || got != limit || limit != 101 {
		t.Fatalf("checkpoint %d (%v), durable limit %d; want 101", got, err, limit)
	}
	crashed := mem.Crash(nil)
	l.Close() // fails: the file system is gone
	o2 := &Options{fsys: crashed}
	l2 := mustOpen(t, dir, o2)
	defer l2.Close()
	c2, err := l2.Cursor("c")
	noErr(t, err)
	if _, clamped := c2.Clamped(); clamped || c2.Committed() > l2.NextSeq() {
		t.Fatalf("after the power cut the cursor is at %d past the log's end %d", c2.Committed(), l2.NextSeq())
	}
	if c2.Committed() != 101 {
		t.Fatalf("resumed at %d, want the checkpoint 101", c2.Committed())
	}
}

// TestCommitWaitsForDurable: Commit makes the acked records durable first.
func TestCommitWaitsForDurable(t *testing.T) {
	l := mustOpen(t, t.TempDir(), &Options{Sync: SyncNever})
	defer l.Close()
	appendN(t, l, 100)
	c, err := l.Cursor("c")
	noErr(t, err)
	for s := uint64(1); s <= 80; s++ {
		noErr(t, c.Ack(s))
	}
	noErr(t, c.Commit(context.Background()))
	if d := l.DurableSeq(); d < 80 {
		t.Fatalf("Commit of 81 returned with durable seq %d", d)
	}
	if got, err := readCursorFile(vfs.OS(), l.Dir(), "c", frame.LogID{}); err != nil || got != 81 {
		t.Fatalf("checkpoint %d, %v; want 81", got, err)
	}
}

// TestCheckpointPowerCut cuts the power at every step of a checkpoint, with
// several outcomes of unsynced writes each: the cursor file is the old
// checkpoint or the new one, never a broken one.
func TestCheckpointPowerCut(t *testing.T) {
	for step := 1; ; step++ {
		mem := vfs.NewMem()
		var ops atomic.Int64
		var crashed atomic.Pointer[vfs.MemFS]
		armed := atomic.Bool{}
		inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
			if armed.Load() && strings.Contains(name, cursorDir) && ops.Add(1) == int64(step) {
				crashed.Store(mem.Crash(nil))
			}
			return n, nil
		}
		dir := "/log"
		l := mustOpen(t, dir, &Options{fsys: vfs.WithFaults(mem, inj)})
		appendN(t, l, 100)
		noErr(t, l.Sync(context.Background()))
		c, err := l.Cursor("c")
		noErr(t, err)
		noErr(t, c.Ack(1))
		noErr(t, c.Commit(context.Background())) // the old checkpoint: 2
		for s := uint64(2); s <= 60; s++ {
			noErr(t, c.Ack(s))
		}
		armed.Store(true)
		cerr := c.Commit(context.Background()) // the new one: 61
		l.Close()
		after := crashed.Load()
		if after == nil {
			if cerr != nil {
				t.Fatal(cerr)
			}
			if step < 5 {
				t.Fatalf("a checkpoint took only %d file-system steps", step-1)
			}
			return // every step was cut
		}
		for k := range 4 {
			fsys := after
			if k > 0 {
				fsys = mem.Crash(rand.New(rand.NewPCG(uint64(step), uint64(k))))
			}
			got, err := readCursorFile(fsys, dir, "c", frame.LogID{})
			if err != nil || got != 2 && got != 61 {
				t.Fatalf("power cut at step %d (outcome %d): checkpoint %d, %v; want 2 or 61", step, k, got, err)
			}
			l2 := mustOpen(t, dir, &Options{fsys: fsys})
			c2, err := l2.Cursor("c")
			if err != nil || c2.Committed() != got {
				t.Fatalf("step %d: reopened cursor %v at %d, file says %d", step, err, c2.Committed(), got)
			}
			noErr(t, l2.Close())
		}
	}
}

// TestCursorNextFollowsAppends: Next delivers every record once, in order,
// while another goroutine appends through rotations; after a reopen it
// resumes at the committed position.
func TestCursorNextFollowsAppends(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	l := mustOpen(t, dir, o)
	const n = 5000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if _, err := l.Append(testPayload(0, i, 60)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	c, err := l.Cursor("c")
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for want := uint64(1); want <= n; want++ {
		seq, rec, err := c.Next(ctx)
		noErr(t, err)
		if _, i, perr := parsePayload(rec); seq != want || perr != nil || uint64(i) != want-1 {
			t.Fatalf("Next = %d (%v, counter %d), want %d", seq, perr, i, want)
		}
		if want <= 3000 {
			noErr(t, c.Ack(seq))
		}
	}
	wg.Wait()
	if l.Stats().SegmentsCreated == 0 {
		t.Fatal("no rotation happened")
	}
	noErr(t, l.Close())
	noErr(t, c.Close())
	if _, _, err := c.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
	l = mustOpen(t, dir, o)
	defer l.Close()
	c, err = l.Cursor("c")
	noErr(t, err)
	defer c.Close()
	seq, _, err := c.Next(ctx)
	if err != nil || seq != 3001 {
		t.Fatalf("after reopen Next = %d, %v; want 3001", seq, err)
	}
}

// TestCursorNextBelowFirstSeq: a committed position that retention deleted
// (IgnoreCursors) is a clear *TruncatedError from Next, naming the first
// record available, never a silent jump.
func TestCursorNextBelowFirstSeq(t *testing.T) {
	l := mustOpen(t, t.TempDir(), &Options{SegmentSize: 64 << 10, Retention: Retention{IgnoreCursors: true}})
	defer l.Close()
	c, err := l.Cursor("c")
	noErr(t, err)
	defer c.Close()
	appendRecs(t, l, 3000)
	noErr(t, l.Sync(context.Background()))
	noErr(t, l.TruncateFront(l.NextSeq()))
	if l.FirstSeq() == 1 {
		t.Fatal("TruncateFront deleted nothing")
	}
	_, _, err = c.Next(context.Background())
	var te *TruncatedError
	if !errors.As(err, &te) || te.First != l.FirstSeq() || !strings.Contains(err.Error(), `cursor "c"`) {
		t.Fatalf("Next below FirstSeq = %v, want a *TruncatedError naming %d and the cursor", err, l.FirstSeq())
	}
}

// TestCursorNextAcksGaps: at a recorded gap Next returns the *GapError and
// acks its sequence numbers (they will never be delivered), so the
// committed position moves past it once the records around it are acked.
func TestCursorNextAcksGaps(t *testing.T) {
	dir := t.TempDir()
	segs := buildGapLog(t, dir, _gapRecords)
	first := segFirst(t, segs[2])
	const k = 100
	flipByte(t, filepath.Join(dir, segs[2]), recordOffset(k)+frame.HeaderSize+50)
	_, err := Repair(dir, true, nil)
	noErr(t, err)
	lost := first + k
	l := mustOpen(t, dir, _gapOpts)
	defer l.Close()
	c, err := l.Cursor("c")
	noErr(t, err)
	defer c.Close()
	ctx := context.Background()
	gaps := 0
	for want := uint64(1); want < lost+10; {
		seq, rec, err := c.Next(ctx)
		if IsGap(err) {
			var g *GapError
			errors.As(err, &g)
			if g.First != lost || g.End != lost+1 || want != lost {
				t.Fatalf("gap %+v at %d, want record %d lost", g, want, lost)
			}
			gaps++
			want = g.End
			continue
		}
		noErr(t, err)
		if seq != want || !bytes.Equal(rec, gapPayload(seq)) {
			t.Fatalf("Next = %d, want %d", seq, want)
		}
		noErr(t, c.Ack(seq))
		want++
	}
	if gaps != 1 || c.Committed() != lost+10 {
		t.Fatalf("%d gaps, committed %d; want 1 gap and %d", gaps, c.Committed(), lost+10)
	}
}

// TestCursorSeek: after Next reported a deleted position, Seek to the
// first record available goes on from there, durably; Seek back delivers
// records again and forgets acks made before it; a seek below FirstSeq
// or past NextSeq is refused and changes nothing.
func TestCursorSeek(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, Retention: Retention{IgnoreCursors: true}}
	l := mustOpen(t, dir, o)
	c, err := l.Cursor("c")
	noErr(t, err)
	ctx := context.Background()
	appendRecs(t, l, 3000)
	noErr(t, l.Sync(ctx))
	noErr(t, l.TruncateFront(l.NextSeq()))
	first := l.FirstSeq()
	_, _, err = c.Next(ctx)
	var te *TruncatedError
	if !errors.As(err, &te) {
		t.Fatalf("Next at a deleted position: %v", err)
	}
	if err := c.Seek(first - 1); !errors.As(err, &te) || te.First != first {
		t.Fatalf("Seek below FirstSeq: %v, want a *TruncatedError naming %d", err, first)
	}
	if err := c.Seek(l.NextSeq() + 1); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("Seek past NextSeq: %v, want ErrNotAppended", err)
	}
	noErr(t, c.Seek(te.First))
	if got, err := readCursorFile(o.fsys0(), dir, "c", frame.LogID{}); err != nil || c.Committed() != first || got != first {
		t.Fatalf("committed %d, checkpoint %d (%v) after Seek(%d)", c.Committed(), got, err, first)
	}
	for want := first; want < first+5; want++ {
		seq, _, err := c.Next(ctx)
		noErr(t, err)
		if seq != want {
			t.Fatalf("Next after Seek = %d, want %d", seq, want)
		}
		noErr(t, c.Ack(seq))
	}
	if c.Committed() != first+5 {
		t.Fatalf("committed %d after acking 5 from %d", c.Committed(), first)
	}
	noErr(t, c.Commit(ctx))
	// Back: record first+1 was acked before, and must not count now.
	noErr(t, c.Seek(first))
	noErr(t, c.Ack(first+1))
	if c.Committed() != first {
		t.Fatalf("committed %d after Seek back to %d and an ack of %d", c.Committed(), first, first+1)
	}
	if seq, _, err := c.Next(ctx); err != nil || seq != first {
		t.Fatalf("Next after Seek back = %d, %v; want %d", seq, err, first)
	}
	// The position is checkpointed: a reopened cursor resumes there.
	noErr(t, c.Close())
	noErr(t, l.Close())
	l = mustOpen(t, dir, o)
	defer l.Close()
	c, err = l.Cursor("c")
	noErr(t, err)
	defer c.Close()
	if seq, _, err := c.Next(ctx); err != nil || seq != first {
		t.Fatalf("Next after reopening = %d, %v; want %d", seq, err, first)
	}
	noErr(t, c.Close())
	if err := c.Seek(first); !errors.Is(err, ErrClosed) {
		t.Fatalf("Seek after Close: %v", err)
	}
}

// TestCursorPassesLongGap: a recorded gap longer than the ack window (a
// whole segment lost and repaired) does not hold the committed position
// back: it jumps over the gap once every record before it is acked, and
// the records after it can be acked.
func TestCursorPassesLongGap(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 512 << 10}
	l := mustOpen(t, dir, o)
	rec := make([]byte, 8)
	for l.Stats().SegmentsCreated < 4 {
		_, err := l.AppendBatch([][]byte{rec, rec, rec, rec, rec, rec, rec, rec})
		noErr(t, err)
	}
	noErr(t, l.Close())
	segs, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	first, end := segs[1].firstSeq, segs[2].firstSeq
	if end-first <= DefaultAckWindow {
		t.Fatalf("segment of %d records: not longer than the ack window", end-first)
	}
	noErr(t, os.Remove(filepath.Join(dir, segs[1].name)))
	_, err = Repair(dir, true, nil)
	noErr(t, err)
	t.Run("one-goroutine", func(t *testing.T) { passLongGap(t, dir, o, first, end) })
	t.Run("concurrent-acks", func(t *testing.T) { passLongGapConcurrently(t, dir, o) })
}

// passLongGap reads the log in dir with a fresh cursor, acking every
// record, the last ten before the gap [first, end) only after the first
// record after it.
func passLongGap(t *testing.T, dir string, o *Options, first, end uint64) {
	l := mustOpen(t, dir, o)
	defer l.Close()
	c, err := l.Cursor("c")
	noErr(t, err)
	defer c.Close()
	ctx := context.Background()
	var held []uint64 // records before the gap, acked after it was delivered
	gaps := 0
	for want := uint64(1); want < l.NextSeq(); {
		seq, _, err := c.Next(ctx)
		if IsGap(err) {
			gaps++
			want = end
			continue
		}
		noErr(t, err)
		if seq != want {
			t.Fatalf("Next = %d, want %d", seq, want)
		}
		want++
		if seq >= first-10 && seq < first {
			held = append(held, seq)
			continue
		}
		if seq >= end && len(held) > 0 {
			for _, h := range held {
				noErr(t, c.Ack(h))
			}
			held = nil
		}
		noErr(t, c.Ack(seq))
	}
	if gaps != 1 || c.Committed() != l.NextSeq() {
		t.Fatalf("%d gaps, committed %d; want 1 gap and %d (the gap is %d to %d)", gaps, c.Committed(), l.NextSeq(), first, end)
	}
}

// passLongGapConcurrently reads the log in dir with a fresh cursor and
// acks every record from 4 goroutines, in any order, while Next delivers
// the gap: the committed position ends at the log's end.
func passLongGapConcurrently(t *testing.T, dir string, o *Options) {
	l := mustOpen(t, dir, o)
	defer l.Close()
	c, err := l.Cursor("c2")
	noErr(t, err)
	defer c.Close()
	ctx := context.Background()
	seqs := make(chan uint64, 64)
	giveUp := time.Now().Add(time.Minute) // a hang guard, not a timing check
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			failed := false
			for s := range seqs {
				// Past the window above a record still in flight before
				// the gap, an ack is refused until that one is acked.
				for !failed {
					err := c.Ack(s)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrAckRange) || time.Now().After(giveUp) {
						errs <- err
						failed = true // drain seqs: Next's goroutine must not block
					}
					runtime.Gosched()
				}
			}
		})
	}
	gaps := 0
	for n := l.NextSeq(); ; {
		seq, _, err := c.Next(ctx)
		if IsGap(err) {
			gaps++
			continue
		}
		noErr(t, err)
		seqs <- seq
		if seq == n-1 {
			break
		}
	}
	close(seqs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if gaps != 1 || c.Committed() != l.NextSeq() {
		t.Fatalf("%d gaps, committed %d; want 1 gap and %d", gaps, c.Committed(), l.NextSeq())
	}
}

// TestCursorNextOrWake: NextOrWake returns a visible record whatever its
// wake channel holds, ErrWoken when it would wait and wake fires, and a
// record appended while it waits.
func TestCursorNextOrWake(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	l := mustOpen(t, dir, nil)
	defer l.Close()
	c, err := l.Cursor("w")
	noErr(t, err)
	defer c.Close()
	ctx := context.Background()
	wake := make(chan struct{}, 1)

	wake <- struct{}{}
	if _, _, err := c.NextOrWake(ctx, wake); !errors.Is(err, ErrWoken) {
		t.Fatalf("NextOrWake on an empty log with wake ready = %v, want ErrWoken", err)
	}
	if len(wake) != 0 {
		t.Fatal("NextOrWake did not receive the wake value")
	}

	appendN(t, l, 1)
	noErr(t, l.Flush(ctx)) // visible: handed to the OS
	wake <- struct{}{}
	seq, rec, err := c.NextOrWake(ctx, wake)
	if err != nil || seq != 1 || string(rec) != "rec 0" {
		t.Fatalf("NextOrWake with a record visible = %d %q %v, want 1 \"rec 0\"", seq, rec, err)
	}
	<-wake

	// Woken while it waits, by another goroutine.
	done := make(chan error, 1)
	go func() {
		_, _, err := c.NextOrWake(ctx, wake)
		done <- err
	}()
	wake <- struct{}{}
	if err := <-done; !errors.Is(err, ErrWoken) {
		t.Fatalf("NextOrWake woken while waiting = %v, want ErrWoken", err)
	}

	// A record appended while it waits is returned.
	go func() {
		seq, _, err := c.NextOrWake(ctx, wake)
		if err == nil && seq != 2 {
			err = fmt.Errorf("seq %d, want 2", seq)
		}
		done <- err
	}()
	appendN(t, l, 1)
	if err := <-done; err != nil {
		t.Fatalf("NextOrWake waiting for an append: %v", err)
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if _, _, err := c.NextOrWake(nil, wake); !errors.Is(err, ErrNilContext) {
		t.Fatalf("NextOrWake(nil) = %v, want ErrNilContext", err)
	}
}

// TestCursorPoll: Poll returns a visible record without waiting, reports
// no record (and no error) when Next would wait, reports and passes gaps
// as Next does, and fails after Close.
func TestCursorPoll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	l := mustOpen(t, dir, nil)
	defer l.Close()
	c, err := l.Cursor("p")
	noErr(t, err)
	if seq, rec, ok, err := c.Poll(); ok || err != nil {
		t.Fatalf("Poll on an empty log = %d %q %v %v, want nothing", seq, rec, ok, err)
	}
	appendN(t, l, 3)
	noErr(t, l.Flush(context.Background()))
	for want := uint64(1); want <= 3; want++ {
		seq, rec, ok, err := c.Poll()
		if !ok || err != nil || seq != want || string(rec) != fmt.Sprintf("rec %d", want-1) {
			t.Fatalf("Poll = %d %q %v %v, want record %d", seq, rec, ok, err, want)
		}
		noErr(t, c.Ack(seq))
	}
	if _, _, ok, err := c.Poll(); ok || err != nil {
		t.Fatalf("Poll at the end = %v %v, want nothing", ok, err)
	}
	noErr(t, c.Close())
	if _, _, ok, err := c.Poll(); ok || !errors.Is(err, ErrClosed) {
		t.Fatalf("Poll after Close = %v %v, want ErrClosed", ok, err)
	}

	// A gap, as Next reports it: once, acked, and passed.
	dir = t.TempDir()
	segs := buildGapLog(t, dir, _gapRecords)
	const k = 100
	flipByte(t, filepath.Join(dir, segs[2]), recordOffset(k)+frame.HeaderSize+50)
	_, err = Repair(dir, true, nil)
	noErr(t, err)
	lost := segFirst(t, segs[2]) + k
	l2 := mustOpen(t, dir, _gapOpts)
	defer l2.Close()
	c2, err := l2.Cursor("p")
	noErr(t, err)
	defer c2.Close()
	gaps := 0
	for want := uint64(1); want < lost+10; {
		seq, rec, ok, err := c2.Poll()
		if IsGap(err) {
			var g *GapError
			errors.As(err, &g)
			if g.First != lost || g.End != lost+1 || want != lost || ok {
				t.Fatalf("gap %+v (ok %v) at %d, want record %d lost", g, ok, want, lost)
			}
			gaps++
			want = g.End
			continue
		}
		noErr(t, err)
		if !ok || seq != want || !bytes.Equal(rec, gapPayload(seq)) {
			t.Fatalf("Poll = %d %v, want %d", seq, ok, want)
		}
		noErr(t, c2.Ack(seq))
		want++
	}
	if gaps != 1 || c2.Committed() != lost+10 {
		t.Fatalf("%d gaps, committed %d; want 1 gap and %d", gaps, c2.Committed(), lost+10)
	}
}
