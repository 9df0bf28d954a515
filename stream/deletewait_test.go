package stream

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestCallsDuringFailingDelete: calls on a stream, and on its group,
// made while a Delete of it runs wait until the Delete knows whether the
// stream goes. The Delete here fails (the rename of the stream's
// directory), so the stream stays: a publisher, a member and a caller
// opening the group find it there (the group closed by the Delete says
// ErrClosed), where before they found it deleted (ErrNotFound) while the
// Delete ran, and gave up on a stream that was still there.
func TestCallsDuringFailingDelete(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	inRename, release := make(chan struct{}), make(chan struct{})
	fsys := vfs.WithFaults(vfs.NewMem(), func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if armed.Load() && op == vfs.OpRename && name == "/st/streams/s" {
			close(inRename)
			<-release
			return 0, syscall.EIO
		}
		return n, nil
	})
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: fsys})
	noErr(t, err)
	defer func() { noErr(t, st.Close()) }()
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	_, err = s.Publish([]byte("a"))
	noErr(t, err)
	m, err := g.Next(ctx, nil)
	noErr(t, err)

	type result struct {
		call string
		err  error
	}
	const calls = 7
	results := make(chan result, calls)
	run := func(call string, f func() error) {
		go func() { results <- result{call, f()} }()
	}
	// A member waiting for a record when the Delete begins.
	run("Next waiting", func() error { _, err := g.Next(ctx, nil); return err })
	waitFor(t, "the member to wait", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.mu.reading
	})
	armed.Store(true)
	deleted := make(chan error, 1)
	go func() { deleted <- st.Delete("s") }()
	<-inRename
	armed.Store(false)
	var reopened atomic.Pointer[Group]
	run("Publish", func() error { _, err := s.Publish([]byte("b")); return err })
	run("Group", func() error { g, err := s.Group("g", nil); reopened.Store(g); return err })
	run("Groups", func() error { _, err := s.Groups(); return err })
	run("Next", func() error { _, err := g.Next(ctx, nil); return err })
	run("Ack", func() error { return g.Ack(m.Seq) })
	run("Checkpoint", func() error { return g.Checkpoint() })
	waitFor(t, "each call to return or wait for the Delete", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(results) == calls || s.mu.awaiting == calls
	})
	close(release)
	if err := <-deleted; !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "not deleted") {
		t.Fatalf("Delete with its rename failing = %v, want EIO, not deleted", err)
	}
	for range calls {
		r := <-results
		var want error // the stream is there: these work
		switch r.call {
		case "Next waiting", "Next", "Ack", "Checkpoint":
			want = ErrClosed // the group, closed by the Delete
		}
		if errors.Is(r.err, ErrNotFound) || !errors.Is(r.err, want) || (want == nil) != (r.err == nil) {
			t.Errorf("%s during a Delete that failed = %v, want %v", r.call, r.err, want)
		}
	}
	if g2 := reopened.Load(); g2 != nil {
		noErr(t, g2.Close())
	}
}

// TestSeqsDuringFailingDelete: NextSeq and DurableSeq of a stream this
// Store had not opened yet, called while a Delete of it runs, wait until
// the Delete knows whether the stream goes. The Delete here fails, so the
// stream keeps its records: they said 0, as of an empty stream.
func TestSeqsDuringFailingDelete(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	inRename, release := make(chan struct{}), make(chan struct{})
	fsys := vfs.WithFaults(vfs.NewMem(), func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if armed.Load() && op == vfs.OpRename && name == "/st/streams/s" {
			close(inRename)
			<-release
			return 0, syscall.EIO
		}
		return n, nil
	})
	opts := &Options{IdleTimeout: -1, fsys: fsys}
	st, err := Open("/st", opts)
	noErr(t, err)
	s, err := st.Create("s", nil)
	noErr(t, err)
	for range 3 {
		_, err := s.Publish([]byte("a"))
		noErr(t, err)
	}
	noErr(t, s.WaitDurable(ctx, 3))
	noErr(t, st.Close())
	st, err = Open("/st", opts)
	noErr(t, err)
	defer func() { noErr(t, st.Close()) }()
	s, err = st.Stream("s") // its log not opened yet
	noErr(t, err)

	armed.Store(true)
	deleted := make(chan error, 1)
	go func() { deleted <- st.Delete("s") }()
	<-inRename
	armed.Store(false)
	const calls = 2
	seqs := make(chan [2]uint64, calls)
	go func() { seqs <- [2]uint64{0, s.NextSeq()} }()
	go func() { seqs <- [2]uint64{1, s.DurableSeq()} }()
	waitFor(t, "each call to return or wait for the Delete", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(seqs) == calls || s.mu.awaiting == calls
	})
	close(release)
	if err := <-deleted; !errors.Is(err, syscall.EIO) {
		t.Fatalf("Delete with its rename failing = %v, want EIO", err)
	}
	for range calls {
		switch r := <-seqs; {
		case r[0] == 0 && r[1] != 4:
			t.Errorf("NextSeq during a Delete that failed = %d, want 4", r[1])
		case r[0] == 1 && r[1] != 3:
			t.Errorf("DurableSeq during a Delete that failed = %d, want 3", r[1])
		}
	}
}
