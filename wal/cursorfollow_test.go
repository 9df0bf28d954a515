package wal

import (
	"context"
	"errors"
	"fmt"
	"github.com/appendlog/appendlog/frame"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// TestOpenCursorFollowsAndResumes: a cursor from OpenCursor follows a Log
// another goroutine appends to (through segment rotations), acks out of
// order, checkpoints on Commit and Close, and a second opening resumes at
// the checkpoint: every record delivered once, in order, intact.
func TestOpenCursorFollowsAndResumes(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	defer l.Close()
	const n = 20_000
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := l.Append(testPayload(1, i, 40+i%200)); err != nil {
				errc <- err
				return
			}
		}
		errc <- l.Flush(context.Background())
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := OpenCursor(dir, "ship", nil, nil)
	noErr(t, err)
	if c.Committed() != 1 {
		t.Fatalf("a new cursor starts at %d, want 1", c.Committed())
	}
	consume := func(c *Cursor, from, to uint64) {
		t.Helper()
		var held []uint64
		for want := from; want < to; want++ {
			seq, rec, err := c.Next(ctx)
			noErr(t, err)
			if seq != want {
				t.Fatalf("Next delivered %d, want %d", seq, want)
			}
			if _, i, err := parsePayload(rec); err != nil || uint64(i) != seq-1 {
				t.Fatalf("record %d: counter %d, %v", seq, i, err)
			}
			held = append(held, seq)
			if len(held) == 7 { // ack in reverse: out of order
				for k := len(held) - 1; k >= 0; k-- {
					noErr(t, c.Ack(held[k]))
				}
				held = held[:0]
			}
		}
		for _, s := range held {
			noErr(t, c.Ack(s))
		}
	}
	consume(c, 1, 5001)
	if c.Committed() != 5001 {
		t.Fatalf("committed %d after acking 1..5000", c.Committed())
	}
	if _, _, err := c.Next(ctx); err != nil {
		t.Fatal(err) // delivered, not acked: comes again after the reopen
	}
	noErr(t, c.Commit(ctx))
	if got, err := readCursorFile(vfs.OS(), dir, "ship", frame.LogID{}); err != nil || got != 5001 {
		t.Fatalf("checkpoint %d, %v; want 5001", got, err)
	}
	noErr(t, c.Close())
	if _, _, err := c.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}

	c2, err := OpenCursor(dir, "ship", nil, nil)
	noErr(t, err)
	if c2.Committed() != 5001 {
		t.Fatalf("reopened at %d, want 5001", c2.Committed())
	}
	consume(c2, 5001, n+1)
	noErr(t, <-errc)
	if e := c2.End(); e != n+1 {
		t.Fatalf("End %d after reading every record, want %d", e, n+1)
	}
	noErr(t, c2.Close())
	if got, err := readCursorFile(vfs.OS(), dir, "ship", frame.LogID{}); err != nil || got != n+1 {
		t.Fatalf("checkpoint after Close %d, %v; want %d", got, err, n+1)
	}
	// The log's own view lists it, with no lag.
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 1 || infos[0].Name != "ship" || infos[0].Committed != n+1 || infos[0].Lag != 0 || infos[0].Open {
		t.Fatalf("Cursors() = %+v", infos)
	}
}

// TestOpenCursorOneOwner: a cursor is open in one place at a time, across
// the writer's Log and OpenCursor (flock on its lock file), and free again
// once closed.
func TestOpenCursorOneOwner(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	defer l.Close()
	appendN(t, l, 10)
	noErr(t, l.Flush(context.Background()))

	in, err := l.Cursor("a")
	noErr(t, err)
	_, err = OpenCursor(dir, "a", nil, nil)
	if !errors.Is(err, ErrCursorOpen) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("OpenCursor of a cursor the Log holds: %v; want ErrCursorOpen naming pid %d", err, os.Getpid())
	}
	noErr(t, in.Close())
	out, err := OpenCursor(dir, "a", nil, nil)
	noErr(t, err)
	if _, err := l.Cursor("a"); !errors.Is(err, ErrCursorOpen) {
		t.Fatalf("Log.Cursor of a cursor OpenCursor holds: %v", err)
	}
	if _, err := OpenCursor(dir, "a", nil, nil); !errors.Is(err, ErrCursorOpen) {
		t.Fatalf("second OpenCursor: %v", err)
	}
	// Another name is another owner.
	b, err := OpenCursor(dir, "b", nil, nil)
	noErr(t, err)
	noErr(t, b.Close())
	noErr(t, out.Close())
	noErr(t, out.Close()) // idempotent
	in2, err := l.Cursor("a")
	noErr(t, err)
	noErr(t, in2.Close())

	// Log.Close releases the locks of the cursors it closes.
	in3, err := l.Cursor("c")
	noErr(t, err)
	noErr(t, l.Close())
	noErr(t, in3.Close())
	c, err := OpenCursor(dir, "c", nil, nil)
	noErr(t, err)
	noErr(t, c.Close())
}

// TestOpenCursorBadInput: names, a directory that is not a log, and acks
// of records not read yet are clear errors.
func TestOpenCursorBadInput(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	appendN(t, l, 10)
	noErr(t, l.Close())
	for _, name := range []string{"", "../x", ".hidden", "a/b", "nul\x00", strings.Repeat("x", 256)} {
		if _, err := OpenCursor(dir, name, nil, nil); !errors.Is(err, ErrCursorName) {
			t.Errorf("OpenCursor(%q): %v, want ErrCursorName", name, err)
		}
	}
	if _, err := OpenCursor(dir, "a", nil, &CursorOptions{AckWindow: -1}); err == nil {
		t.Error("a negative AckWindow was accepted")
	}
	other := t.TempDir()
	noErr(t, os.WriteFile(filepath.Join(other, "notes.txt"), []byte("hello"), 0o644))
	if _, err := OpenCursor(other, "a", nil, nil); !errors.As(err, new(*NotLogError)) {
		t.Errorf("OpenCursor on a directory of other files: %v, want a *NotLogError", err)
	}
	if _, err := os.Stat(filepath.Join(other, cursorDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenCursor wrote into a directory that is not a log: %v", err)
	}
	if _, err := OpenCursor(filepath.Join(dir, "missing"), "a", nil, nil); err == nil {
		t.Error("OpenCursor on a missing directory succeeded")
	}

	c, err := OpenCursor(dir, "a", nil, nil)
	noErr(t, err)
	defer c.Close()
	if err := c.Ack(11); !errors.Is(err, ErrAckRange) {
		t.Fatalf("Ack past the log's end: %v, want ErrAckRange", err)
	}
	seq, _, err := c.Next(context.Background())
	noErr(t, err)
	noErr(t, c.Ack(seq))
	// The longest name fits its side files in a directory entry.
	long := strings.Repeat("n", MaxCursorName)
	lc, err := OpenCursor(dir, long, nil, nil)
	noErr(t, err)
	noErr(t, lc.Seek(5))
	noErr(t, lc.Close())
	if got, err := readCursorFile(vfs.OS(), dir, long, frame.LogID{}); err != nil || got != 5 {
		t.Fatalf("long-named cursor: %d, %v", got, err)
	}
	// Seek is checked against the files.
	if err := c.Seek(12); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("Seek past the end: %v", err)
	}
}

// TestOpenCursorCheckpointIsDurable: the writer never syncs (SyncNever),
// yet a follower's checkpoint covers only records that survive a power
// cut, because the checkpoint fdatasyncs them first. Records appended
// after the checkpoint are lost by the cut, which shows the test can tell.
func TestOpenCursorCheckpointIsDurable(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/log"
	// One segment: no seal syncs the records the checkpoint covers.
	o := &Options{Sync: SyncNever, SegmentSize: 4 << 20, BufferSize: 64 << 10, fsys: mem}
	l := mustOpen(t, dir, o)
	const n = 3000
	for i := range n {
		_, err := l.Append(testPayload(1, i, 100))
		noErr(t, err)
	}
	noErr(t, l.Flush(context.Background()))
	ctx := context.Background()
	c, err := OpenCursor(dir, "c", &Options{fsys: mem}, nil)
	noErr(t, err)
	for want := uint64(1); want <= n; want++ {
		seq, _, err := c.Next(ctx)
		noErr(t, err)
		if seq <= 2000 {
			noErr(t, c.Ack(seq))
		}
	}
	noErr(t, c.Commit(ctx))
	// Records appended after the checkpoint: nothing syncs them.
	for i := range 100 {
		_, err := l.Append(testPayload(1, n+i, 100))
		noErr(t, err)
	}
	noErr(t, l.Flush(context.Background()))
	crashed := mem.Crash(nil)
	c.Close() // fails: the file system is gone
	l.Close()

	l2 := mustOpen(t, dir, &Options{fsys: crashed})
	defer l2.Close()
	got, err := readCursorFile(crashed, dir, "c", frame.LogID{})
	noErr(t, err)
	if got != 2001 {
		t.Fatalf("checkpoint %d after the cut, want 2001", got)
	}
	if end := l2.NextSeq(); end < got {
		t.Fatalf("the checkpoint %d is past the log's end %d after a power cut", got, end)
	}
	if end := l2.NextSeq(); end > n+100 {
		t.Fatalf("every record survived the cut (end %d): the test cannot tell a synced checkpoint from luck", end)
	}
	r, err := l2.NewReader(1, nil)
	noErr(t, err)
	defer r.Close()
	for want := uint64(1); want < got; want++ {
		if !r.Next() || r.Seq() != want {
			t.Fatalf("record %d below the checkpoint is lost: %v", want, r.Err())
		}
	}
}

// TestOpenCursorSyncFailureIsSticky: a failed fdatasync of a segment fails
// the checkpoint, and every later one, even once the disk recovers: the
// kernel may have dropped the pages it could not write.
func TestOpenCursorSyncFailureIsSticky(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/log"
	l := mustOpen(t, dir, &Options{Sync: SyncNever, fsys: mem})
	defer l.Close()
	appendN(t, l, 100)
	noErr(t, l.Flush(context.Background()))
	var fail atomic.Bool
	faulty := vfs.WithFaults(mem, func(op vfs.Op, name string, off int64, k int) (int, error) {
		if op == vfs.OpSync && fail.Load() && strings.HasSuffix(name, segSuffix) {
			return 0, errors.New("injected EIO")
		}
		return k, nil
	})
	c, err := OpenCursor(dir, "c", &Options{fsys: faulty}, nil)
	noErr(t, err)
	ctx := context.Background()
	for range 50 {
		seq, _, err := c.Next(ctx)
		noErr(t, err)
		noErr(t, c.Ack(seq))
	}
	fail.Store(true)
	if err := c.Commit(ctx); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("Commit with a failing fdatasync: %v", err)
	}
	fail.Store(false)
	if err := c.Commit(ctx); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("Commit after the disk recovered: %v; want the first failure again", err)
	}
	if err := c.Close(); err == nil {
		t.Fatal("Close after a failed sync returned nil")
	}
	if got, err := readCursorFile(mem, dir, "c", frame.LogID{}); err != nil || got != 1 {
		t.Fatalf("checkpoint %d, %v; want the first one (1) kept", got, err)
	}
}

// TestOpenCursorCheckpointer: the cursor's own checkpointer writes the
// committed position each period, and retention in the writer keeps what
// the follower has not checkpointed past.
func TestOpenCursorCheckpointer(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	defer l.Close()
	for i := range 3000 {
		_, err := l.Append(testPayload(1, i, 100))
		noErr(t, err)
	}
	noErr(t, l.Flush(context.Background()))
	c, err := OpenCursor(dir, "c", &Options{CheckpointEvery: time.Second, clock: fake}, nil)
	noErr(t, err)
	defer c.Close()
	ctx := context.Background()
	for range 1000 {
		seq, _, err := c.Next(ctx)
		noErr(t, err)
		noErr(t, c.Ack(seq))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		fake.Advance(time.Second)
		if got, _ := readCursorFile(vfs.OS(), dir, "c", frame.LogID{}); got == 1001 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the checkpointer did not write 1001 in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	noErr(t, l.TruncateFront(3000))
	if f := l.FirstSeq(); f > 1001 {
		t.Fatalf("TruncateFront deleted past the follower's checkpoint 1001: first %d", f)
	}
}

// TestOpenCursorAnotherProcess: a cursor from OpenCursor consumes the log
// a child process writes, through rotations, and sees every record once,
// in order.
func TestOpenCursorAnotherProcess(t *testing.T) {
	runFollowChild()
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	noErr(t, l.Close())
	c, err := OpenCursor(dir, "c", nil, nil)
	noErr(t, err)
	defer c.Close()
	const n = 30_000
	cmd := startFollowChild(t, "TestOpenCursorAnotherProcess", "write", dir, n)
	noErr(t, cmd.Start())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for want := uint64(1); want <= n; want++ {
		seq, rec, err := c.Next(ctx)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("Next at %d: %v", want, err)
		}
		if _, i, err := parsePayload(rec); seq != want || err != nil || uint64(i) != seq-1 {
			t.Fatalf("record %d (want %d): counter %d, %v", seq, want, i, err)
		}
		noErr(t, c.Ack(seq))
	}
	noErr(t, cmd.Wait())
	noErr(t, c.Commit(ctx))
	if got, err := readCursorFile(vfs.OS(), dir, "c", frame.LogID{}); err != nil || got != n+1 {
		t.Fatalf("checkpoint %d, %v", got, err)
	}
}

// TestCursorCaughtUpAndFollowerEnd: CaughtUp moves when Next has nothing
// to deliver and waits; a follower's End sees records the writer synced
// beyond what the cursor read, through the last segment's durable mark.
func TestCursorCaughtUpAndFollowerEnd(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	defer l.Close()
	appendN(t, l, 100)
	noErr(t, l.Sync(context.Background()))
	for _, open := range []func() (*Cursor, error){
		func() (*Cursor, error) { return l.Cursor("in") },
		func() (*Cursor, error) { return OpenCursor(dir, "out", nil, nil) },
	} {
		c, err := open()
		noErr(t, err)
		if !c.CaughtUp().IsZero() {
			t.Fatalf("%s: CaughtUp %v before any Next", c.Name(), c.CaughtUp())
		}
		for range 100 {
			_, _, err := c.Next(context.Background())
			noErr(t, err)
		}
		if !c.CaughtUp().IsZero() {
			t.Fatalf("%s: CaughtUp set while records were there to deliver", c.Name())
		}
		before := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, _, err = c.Next(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: Next at the end: %v", c.Name(), err)
		}
		if cu := c.CaughtUp(); cu.Before(before) {
			t.Fatalf("%s: CaughtUp %v, before the wait at %v", c.Name(), cu, before)
		}
		noErr(t, c.Close())
	}

	c, err := OpenCursor(dir, "end", nil, nil)
	noErr(t, err)
	defer c.Close()
	if e := c.End(); e != 101 {
		t.Fatalf("End %d at open, want 101", e)
	}
	// The header's mark records what the sync before the last made
	// durable: the writer syncs twice.
	appendN(t, l, 50)
	noErr(t, l.Sync(context.Background()))
	appendN(t, l, 1)
	noErr(t, l.Sync(context.Background()))
	if e := c.End(); e < 151 || e > 152 {
		t.Fatalf("End %d after the writer synced 51 more in two syncs, want 151 or 152", e)
	}
}
