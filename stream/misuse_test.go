package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/wal"
)

// TestRecordSizeFixedAtCreate: the largest record a stream accepts is
// fixed when it is created, so a record published while the store held
// few streams stays readable once it holds many (the default buffers then
// shrink) and after a reopen; a larger one is refused, naming the bound.
func TestRecordSizeFixedAtCreate(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	s, err := st.Create("big", nil)
	noErr(t, err)
	max := s.Config().MaxRecordSize
	if max != DefaultMaxRecordSize {
		t.Fatalf("Config().MaxRecordSize = %d, want the default %d", max, DefaultMaxRecordSize)
	}
	if _, err := s.Publish(make([]byte, max+1)); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("Publish of MaxRecordSize+1 bytes = %v, want ErrTooLarge", err)
	}
	seq, err := s.Publish(make([]byte, max))
	noErr(t, err)
	noErr(t, s.WaitDurable(context.Background(), seq))
	huge, err := st.Create("huge", &Config{MaxRecordSize: 1 << 20})
	noErr(t, err)
	seq, err = huge.Publish(make([]byte, 1<<20))
	noErr(t, err)
	noErr(t, huge.WaitDurable(context.Background(), seq))
	// A stream created before the bound was recorded in stream.json took
	// records up to a quarter of the default buffer.
	old, err := st.Create("old", &Config{MaxRecordSize: _legacyMaxRecord})
	noErr(t, err)
	seq, err = old.Publish(make([]byte, _legacyMaxRecord))
	noErr(t, err)
	noErr(t, old.WaitDurable(context.Background(), seq))
	noErr(t, os.WriteFile(filepath.Join(dir, _streamsDir, "old", _streamFile), []byte(`{"version":1,"name":"old"}`), 0o644))
	// 600 streams make the default buffers 64 KiB.
	for i := range 600 {
		_, err := st.Create(fmt.Sprintf("s%d", i), nil)
		noErr(t, err)
	}
	noErr(t, st.Close())
	st = mustOpen(t, dir, nil)
	defer st.Close()
	for name, size := range map[string]int{"big": max, "huge": 1 << 20, "old": _legacyMaxRecord} {
		s, err := st.Stream(name)
		noErr(t, err)
		if got := s.Config().MaxRecordSize; got != size {
			t.Errorf("stream %s reopened: MaxRecordSize %d, want %d", name, got, size)
		}
		n := 0
		err = s.Scan(0, func(seq uint64, rec []byte) error {
			if len(rec) != size {
				return fmt.Errorf("record %d has %d bytes, want %d", seq, len(rec), size)
			}
			n++
			return nil
		})
		if err != nil || n != 1 {
			t.Errorf("stream %s in a store of 603 streams: read %d records, %v; want its 1 record", name, n, err)
		}
	}
}

// TestGroupNameLength: the longest group name the store accepts works
// (its options file and that file's temporary name fit in a directory
// entry); one byte more is ErrName, and nothing is left behind.
func TestGroupNameLength(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	long := strings.Repeat("g", MaxGroupName)
	g, err := s.Group(long, &GroupOptions{AckWait: time.Minute})
	noErr(t, err)
	noErr(t, g.Close())
	g, err = s.Group(long, nil) // its options, read back
	noErr(t, err)
	if g.opts.AckWait != time.Minute {
		t.Errorf("group %d bytes long reopened with AckWait %v, want 1m", len(long), g.opts.AckWait)
	}
	noErr(t, g.Close())
	tooLong := strings.Repeat("h", MaxGroupName+1)
	if _, err := s.Group(tooLong, nil); !errors.Is(err, ErrName) {
		t.Fatalf("Group with a %d-byte name = %v, want ErrName", len(tooLong), err)
	}
	if _, err := os.Stat(filepath.Join(dir, _streamsDir, "s", _logDir, "cursors", tooLong)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused group name left a cursor: %v", err)
	}
}

// TestAckAfterGroupClose: an ack that a closed group cannot record is
// ErrClosed, not a silent nil (the record comes again to the group opened
// after); acks of records below the committed position stay nil.
func TestAckAfterGroupClose(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	for range 2 {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	g, err := s.Group("g", nil)
	noErr(t, err)
	ctx := context.Background()
	m1, err := g.Next(ctx, nil)
	noErr(t, err)
	m2, err := g.Next(ctx, nil)
	noErr(t, err)
	noErr(t, g.Ack(m1.Seq))
	noErr(t, g.Close())
	if err := g.Ack(m2.Seq); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack of a delivered record after Close = %v, want ErrClosed", err)
	}
	if err := g.Nack(m2.Seq); !errors.Is(err, ErrClosed) {
		t.Fatalf("Nack after Close = %v, want ErrClosed", err)
	}
	if err := g.Ack(m1.Seq); err != nil {
		t.Fatalf("Ack of a record acked before Close = %v, want nil", err)
	}
	for what, err := range map[string]error{"Ack of a record never delivered": g.Ack(m2.Seq + 1), "Checkpoint": g.Checkpoint()} {
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), `group "g"`) {
			t.Errorf("%s after Close = %v, want ErrClosed naming group \"g\"", what, err)
		}
	}
	g2, err := s.Group("g", nil)
	noErr(t, err)
	defer g2.Close()
	m, err := g2.Next(ctx, nil)
	noErr(t, err)
	if m.Seq != m2.Seq {
		t.Fatalf("reopened group delivered %d first, want %d (acked only by the closed group)", m.Seq, m2.Seq)
	}

	// The same once the store closed the group.
	g3, err := s.Group("g3", nil)
	noErr(t, err)
	m, err = g3.Next(ctx, nil)
	noErr(t, err)
	noErr(t, st.Close())
	if err := g3.Ack(m.Seq); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack after Store.Close = %v, want ErrClosed", err)
	}
}

// TestDeleteVanishedStream: a stream whose directory was removed outside
// the store can still be deleted (Delete does not leave it listed and
// unusable), and created again.
func TestDeleteVanishedStream(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	noErr(t, os.RemoveAll(filepath.Join(dir, _streamsDir, "s")))
	noErr(t, st.Delete("s"))
	if got := st.List(); len(got) != 0 {
		t.Fatalf("List after Delete = %q, want none", got)
	}
	if _, err := s.Publish([]byte("y")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Publish on the deleted stream = %v, want ErrNotFound", err)
	}
	s, err = st.Create("s", nil)
	noErr(t, err)
	seq, err := s.Publish([]byte("z"))
	if err != nil || seq != 1 {
		t.Fatalf("Publish on the stream created again = %d, %v; want 1", seq, err)
	}
}

// TestTimerPeriodFloor: a group's timer never runs more often than every
// millisecond, whatever CheckpointEvery and AckWait say (a CheckpointEvery
// of 1, meant as seconds, is a nanosecond).
func TestTimerPeriodFloor(t *testing.T) {
	for _, c := range []struct {
		ackWait, ckpt, want time.Duration
	}{
		{DefaultAckWait, DefaultCheckpointEvery, time.Second},
		{time.Second, DefaultCheckpointEvery, 250 * time.Millisecond},
		{time.Nanosecond, DefaultCheckpointEvery, time.Millisecond},
		{DefaultAckWait, 1, time.Millisecond},
		{DefaultAckWait, 100 * time.Microsecond, time.Millisecond},
		{DefaultAckWait, 20 * time.Millisecond, 20 * time.Millisecond},
	} {
		o := GroupOptions{AckWait: c.ackWait, CheckpointEvery: c.ckpt}
		if got := timerPeriod(&o); got != c.want {
			t.Errorf("AckWait %v, CheckpointEvery %v: timer period %v, want %v", c.ackWait, c.ckpt, got, c.want)
		}
	}
}

// blockingFS is the OS file system with a gate: once armed, the first
// fdatasync of a file whose name contains match blocks until release is
// closed, after signalling blocked.
type blockingFS struct {
	vfs.FS
	armed   atomic.Bool
	once    sync.Once
	blocked chan struct{}
	release chan struct{}
}

func newBlockingFS(match string) *blockingFS {
	b := &blockingFS{blocked: make(chan struct{}), release: make(chan struct{})}
	b.FS = vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && b.armed.Load() && strings.Contains(name, match) {
			b.once.Do(func() {
				close(b.blocked)
				<-b.release
			})
		}
		return n, nil
	})
	return b
}

// checkSecondCloseWaits runs first, waits until it is blocked in the
// gate, runs second, and fails if second returns before the gate opens:
// a Close that returns must find the closing done, even when another
// goroutine began it.
func checkSecondCloseWaits(t *testing.T, b *blockingFS, started func() bool, first, second func() error) {
	t.Helper()
	b.armed.Store(true)
	errs := make(chan error, 2)
	go func() { errs <- first() }()
	<-b.blocked
	waitFor(t, "the first Close to begin", started)
	secondDone := make(chan error, 1)
	go func() { secondDone <- second() }()
	select {
	case err := <-secondDone:
		t.Errorf("the second Close returned (%v) while the first was still writing the last checkpoint", err)
		close(b.release)
	case <-time.After(200 * time.Millisecond):
		close(b.release)
		noErr(t, <-secondDone)
	}
	noErr(t, <-errs)
}

// TestConcurrentClose: Group.Close and Store.Close called by two
// goroutines at once both return once the closing is done (the cursor
// released, the store's lock released), not the second at once.
func TestConcurrentClose(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, dir string) (*blockingFS, *Store, *Stream, *Group) {
		b := newBlockingFS(filepath.Join("cursors", ".g.tmp"))
		st := mustOpen(t, dir, &Options{fsys: b})
		s, err := st.Create("s", nil)
		noErr(t, err)
		g, err := s.Group("g", &GroupOptions{CheckpointEvery: time.Hour})
		noErr(t, err)
		seq, err := s.Publish([]byte("x"))
		noErr(t, err)
		m, err := g.Next(ctx, nil)
		noErr(t, err)
		if m.Seq != seq {
			t.Fatalf("Next = %d, want %d", m.Seq, seq)
		}
		noErr(t, g.Ack(seq)) // the last checkpoint has something to write
		return b, st, s, g
	}
	t.Run("group", func(t *testing.T) {
		b, st, s, g := setup(t, t.TempDir())
		defer st.Close()
		checkSecondCloseWaits(t, b, func() bool { return g.closedErr(nil) != nil }, g.Close, g.Close)
		g2, err := s.Group("g", nil) // its cursor was released
		noErr(t, err)
		if got := g2.Committed(); got != 2 {
			t.Errorf("reopened group at %d, want 2", got)
		}
		noErr(t, g2.Close())
	})
	t.Run("store", func(t *testing.T) {
		dir := t.TempDir()
		b, st, _, _ := setup(t, dir)
		closing := func() bool {
			st.mu.Lock()
			defer st.mu.Unlock()
			return st.mu.closed
		}
		checkSecondCloseWaits(t, b, closing, st.Close, st.Close)
		st2, err := Open(dir, nil) // the lock was released
		noErr(t, err)
		noErr(t, st2.Close())
	})
}

// TestIdleCloseKeepsFailure: a stream whose log failed (a write or
// fdatasync error) stays failed: the janitor does not close it as idle,
// and a failure of the idle close itself is kept, so a later Publish gets
// the error rather than a reopened log that gives the sequence numbers of
// records it may have lost to new ones.
func TestIdleCloseKeepsFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		// failBeforeIdle fails the log before the janitor's passes; else
		// only the fdatasync of the idle close fails.
		failBeforeIdle bool
	}{{"failed before", true}, {"failed closing", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
				if armed.Load() && (op == vfs.OpSync || op == vfs.OpWrite) && strings.HasSuffix(name, ".seg") {
					return 0, syscall.EIO
				}
				return n, nil
			})
			// No janitor: the test makes its passes.
			st := mustOpen(t, t.TempDir(), &Options{IdleTimeout: -1, fsys: fsys})
			defer st.Close()
			s, err := st.Create("s", &Config{Sync: wal.SyncNever})
			noErr(t, err)
			seq, err := s.Publish([]byte("a"))
			noErr(t, err)
			noErr(t, s.WaitDurable(context.Background(), seq))
			seq, err = s.Publish([]byte("b"))
			noErr(t, err)
			if tc.failBeforeIdle {
				armed.Store(true)
				if err := s.WaitDurable(context.Background(), seq); !errors.Is(err, syscall.EIO) {
					t.Fatalf("WaitDurable with writes failing = %v, want EIO", err)
				}
				armed.Store(false)
			} else {
				waitFor(t, "b handed to the OS", func() bool { return s.cur.Load().Stats().Written > 0 })
				armed.Store(true)
			}
			for range 3 {
				s.closeIdle()
			}
			armed.Store(false)
			if seq, err := s.Publish([]byte("c")); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Publish after the log failed = %d, %v; want the failure (EIO)", seq, err)
			}
		})
	}
}

// TestDirRemovedWhileOpen: a stream whose directory is removed outside the
// store while its log is open is found by the janitor's next pass: from
// then on its calls fail naming the directory, instead of acknowledging
// records written into files no one can open again.
func TestDirRemovedWhileOpen(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, &Options{IdleTimeout: -1}) // the test makes the janitor's pass
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	seq, err := s.Publish([]byte("x"))
	noErr(t, err)
	noErr(t, s.WaitDurable(context.Background(), seq))
	sdir := filepath.Join(dir, _streamsDir, "s")
	noErr(t, os.RemoveAll(sdir))
	s.checkDir()
	if _, err := s.Publish([]byte("y")); err == nil || !strings.Contains(err.Error(), sdir) {
		t.Fatalf("Publish after the stream's directory was removed = %v, want an error naming %s", err, sdir)
	}
	if _, err := g.Next(context.Background(), nil); err == nil || !strings.Contains(err.Error(), sdir) {
		t.Fatalf("Next after the stream's directory was removed = %v, want an error naming %s", err, sdir)
	}
	noErr(t, st.Delete("s"))
	_, err = st.Create("s", nil)
	noErr(t, err)
}

// TestErrorsNameStream: an error of a stream's log says which stream, and
// still matches the wal's sentinel; fn's error from Scan comes back as is.
func TestErrorsNameStream(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("orders", nil)
	noErr(t, err)
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) || !strings.Contains(err.Error(), `stream "orders"`) {
			t.Errorf("%s = %v, want %v naming stream \"orders\"", what, err, want)
		}
	}
	_, err = s.Publish(make([]byte, DefaultMaxRecordSize+1))
	check("Publish of a record too large", err, wal.ErrTooLarge)
	_, err = s.PublishBatch([][]byte{{1}, make([]byte, DefaultMaxRecordSize+1)})
	check("PublishBatch with a record too large", err, wal.ErrTooLarge)
	check("WaitDurable of a record never published", s.WaitDurable(context.Background(), 10), wal.ErrNotAppended)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	seq, err := s.Publish([]byte("x"))
	noErr(t, err)
	if err := s.WaitDurable(ctx, seq); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("WaitDurable with a cancelled context = %v", err)
	}
	check("Scan from past the end", s.Scan(100, func(uint64, []byte) error { return nil }), wal.ErrNotAppended)
	stop := errors.New("stop")
	if err := s.Scan(0, func(uint64, []byte) error { return stop }); err != stop {
		t.Errorf("Scan with a failing fn = %v, want fn's error as is", err)
	}

	// A group member waiting on a log that fails.
	var armed atomic.Bool
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if armed.Load() && op == vfs.OpWrite && strings.HasSuffix(name, ".seg") {
			return 0, syscall.EIO
		}
		return n, nil
	})
	st2 := mustOpen(t, t.TempDir(), &Options{IdleTimeout: -1, fsys: fsys})
	defer st2.Close()
	s, err = st2.Create("orders", nil)
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	seq, err = s.Publish([]byte("a"))
	noErr(t, err)
	noErr(t, s.WaitDurable(context.Background(), seq))
	_, err = g.Next(context.Background(), nil)
	noErr(t, err)
	armed.Store(true)
	_, err = s.Publish([]byte("b"))
	noErr(t, err)
	_, err = g.Next(context.Background(), nil)
	check("Next on a log that failed", err, syscall.EIO)
}

// TestCloseFromOnDead: OnDead may close its group (giving up after a dead
// record) from the group's timer goroutine: Close returns, and so does the
// Store's Close after it.
func TestCloseFromOnDead(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	s, err := st.Create("s", nil)
	noErr(t, err)
	var g *Group
	closed := make(chan error, 1)
	g, err = s.Group("g", &GroupOptions{AckWait: 4 * time.Millisecond, MaxDeliver: 1, OnDead: func(uint64, int) {
		closed <- g.Close()
	}})
	noErr(t, err)
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	_, err = g.Next(context.Background(), nil) // never acked: dead after AckWait
	noErr(t, err)
	select {
	case err := <-closed:
		noErr(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Close called from OnDead did not return")
	}
	if _, err := g.Next(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close from OnDead = %v, want ErrClosed", err)
	}
	noErr(t, st.Close())
}

// TestPublishEmptyBatch: an empty batch publishes nothing and returns the
// sequence number the next record gets, so that the usual confirm of a
// batch, WaitDurable(first+len-1), waits for the records before it rather
// than failing on sequence number 2^64-1.
func TestPublishEmptyBatch(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	ctx := context.Background()
	for _, batch := range [][][]byte{nil, {}, {[]byte("a"), []byte("b")}, nil} {
		want := s.NextSeq()
		first, err := s.PublishBatch(batch)
		noErr(t, err)
		if first != want {
			t.Fatalf("PublishBatch of %d records = %d, want %d", len(batch), first, want)
		}
		noErr(t, s.WaitDurable(ctx, first+uint64(len(batch))-1))
	}
	if got := s.NextSeq(); got != 3 {
		t.Fatalf("NextSeq after batches of 0, 0, 2 and 0 records = %d, want 3", got)
	}
}

// TestSeqsOfUnopenedStream: NextSeq and DurableSeq of a stream whose log
// this Store has not opened yet (after a reopen) are its real positions,
// not 0.
func TestSeqsOfUnopenedStream(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	s, err := st.Create("s", nil)
	noErr(t, err)
	if n, d := s.NextSeq(), s.DurableSeq(); n != 1 || d != 0 {
		t.Fatalf("new stream: NextSeq %d, DurableSeq %d; want 1, 0", n, d)
	}
	first, err := s.PublishBatch([][]byte{[]byte("a"), []byte("b"), []byte("c")})
	noErr(t, err)
	noErr(t, s.WaitDurable(context.Background(), first+2))
	noErr(t, st.Close())
	st = mustOpen(t, dir, nil)
	defer st.Close()
	s, err = st.Stream("s")
	noErr(t, err)
	if n, d := s.NextSeq(), s.DurableSeq(); n != 4 || d != 3 {
		t.Fatalf("reopened stream of 3 durable records: NextSeq %d, DurableSeq %d; want 4, 3", n, d)
	}
}

// TestFailedGroupCreateLeavesNoCursor: a new group refused for its
// StartAt (past the stream's end) leaves no position behind, which, in a
// stream kept UntilAcked, would keep every record from deletion for a
// group that does not exist.
func TestFailedGroupCreateLeavesNoCursor(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{SegmentSize: _retSeg, Sync: wal.SyncNever, Retention: Retention{UntilAcked: true}})
	noErr(t, err)
	const n = 200 // 3 segments
	for i := range n {
		_, err := s.Publish(retRecord(i))
		noErr(t, err)
	}
	if _, err := s.Group("typo", &GroupOptions{StartAt: 1 << 40}); !errors.Is(err, wal.ErrNotAppended) || !strings.Contains(err.Error(), "StartAt") {
		t.Fatalf("Group with StartAt past the end = %v, want ErrNotAppended naming StartAt", err)
	}
	g, err := s.Group("g", nil)
	noErr(t, err)
	consume(t, g, 1, n)
	noErr(t, g.Checkpoint())
	// On the old code the refused group's cursor, at 1, held them: this
	// timed out.
	waitFor(t, "the records the only group acked deleted", func() bool { return s.Stats().FirstSeq > 1 })
	noErr(t, g.Close())
}

// TestNextWithDoneContext: Next with a context already done takes no
// record (a member that is stopping would hold it for AckWait): it
// returns the context's error, and the record goes to the next call.
func TestNextWithDoneContext(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	seq, err := s.Publish([]byte("x"))
	noErr(t, err)
	noErr(t, s.WaitDurable(context.Background(), seq)) // visible
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if m, err := g.Next(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context = %+v, %v; want context.Canceled", m, err)
	}
	m, err := g.Next(context.Background(), nil)
	noErr(t, err)
	if m.Seq != seq || m.Delivery != 1 {
		t.Fatalf("Next after the cancelled one = %+v, want record %d, first delivery", m, seq)
	}
	noErr(t, g.Ack(m.Seq))
	noErr(t, g.Close())
}

// TestGroupOfShutStream: Group on a stream deleted, or of a closed store,
// is the stream's error, even for a group that was open on it.
func TestGroupOfShutStream(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	for _, name := range []string{"a", "b"} {
		s, err := st.Create(name, nil)
		noErr(t, err)
		_, err = s.Group("g", nil)
		noErr(t, err)
	}
	a, err := st.Stream("a")
	noErr(t, err)
	b, err := st.Stream("b")
	noErr(t, err)
	noErr(t, st.Delete("a"))
	for _, name := range []string{"g", "new"} {
		if _, err := a.Group(name, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("Group(%q) of a deleted stream = %v; want ErrNotFound", name, err)
		}
	}
	noErr(t, st.Close())
	for _, name := range []string{"g", "new"} {
		if _, err := b.Group(name, nil); !errors.Is(err, ErrClosed) {
			t.Errorf("Group(%q) of a closed store's stream = %v; want ErrClosed", name, err)
		}
	}
}

// TestCreateDirSyncFails: a Create whose last directory fsync fails
// reports it, and the stream, whole on disk, is known to the store (as a
// reopen would find it). The sync is never retried: the store is failed,
// and Create again, or Stream, returns that failure, not a rename error
// (see TestStreamsDirSyncFailsStore).
func TestCreateDirSyncFails(t *testing.T) {
	dir := t.TempDir()
	sdir := filepath.Join(dir, _streamsDir)
	var armed atomic.Bool
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSyncDir && name == sdir && armed.CompareAndSwap(true, false) {
			return 0, syscall.EIO
		}
		return n, nil
	})
	st := mustOpen(t, dir, &Options{fsys: fsys})
	defer st.Close()
	armed.Store(true)
	if _, err := st.Create("s", nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Create with the directory fsync failing = %v, want EIO", err)
	}
	if got := st.List(); len(got) != 1 || got[0] != "s" {
		t.Fatalf("List after that Create = %q, want [s]", got)
	}
	if _, err := st.Create("s", nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Create again = %v, want the store's failure (EIO)", err)
	}
	if _, err := st.Stream("s"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Stream = %v, want the store's failure (EIO)", err)
	}
}

// TestAckWaitForever: an AckWait meant as "never redeliver"
// (math.MaxInt64) does not overflow the deadline into the past.
func TestAckWaitForever(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{AckWait: math.MaxInt64, CheckpointEvery: time.Millisecond})
	noErr(t, err)
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	_, err = g.Next(context.Background(), nil)
	noErr(t, err)
	delivered := time.Now()
	// The timer checkpoints at every pass (CheckpointEvery is its period),
	// after setting the deadlines of the deliveries before it.
	waitFor(t, "a timer pass after the delivery", func() bool { return g.Stats().CheckpointAge < time.Since(delivered) })
	if gs := g.Stats(); gs.Redeliveries != 0 || gs.Pending != 1 {
		t.Fatalf("with AckWait math.MaxInt64, after a timer pass: %d queued for redelivery, %d pending; want 0 and 1", gs.Redeliveries, gs.Pending)
	}
}
