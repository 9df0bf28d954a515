package stream

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestGroupReopenWhileClosing: a group opened by one goroutine while
// another closes it (Close waiting for its last checkpoint) is the group
// opened again once that close is done, not the one closing: its Next
// delivered nothing and returned ErrClosed.
func TestGroupReopenWhileClosing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b := newBlockingFS(filepath.Join("cursors", ".g.tmp"))
	st := mustOpen(t, t.TempDir(), &Options{fsys: b})
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{CheckpointEvery: time.Hour})
	noErr(t, err)
	for _, p := range []string{"a", "b"} {
		_, err := s.Publish([]byte(p))
		noErr(t, err)
	}
	m, err := g.Next(ctx, nil)
	noErr(t, err)
	noErr(t, g.Ack(m.Seq)) // the last checkpoint has something to write

	b.armed.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	<-b.blocked // Close is writing the last checkpoint
	reopened := make(chan *Group, 1)
	go func() {
		g2, err := s.Group("g", nil)
		if err != nil {
			t.Errorf("Group while the group closes: %v", err)
		}
		reopened <- g2
	}()
	select {
	case g2 := <-reopened:
		// Returned before the close finished: it may only be a group
		// that works, which the one closing is not.
		close(b.release)
		noErr(t, <-closed)
		checkReopened(t, ctx, g, g2)
	case <-time.After(100 * time.Millisecond):
		close(b.release)
		noErr(t, <-closed)
		checkReopened(t, ctx, g, <-reopened)
	}
}

func checkReopened(t *testing.T, ctx context.Context, old, g2 *Group) {
	t.Helper()
	if g2 == nil {
		t.FailNow()
	}
	if g2 == old {
		t.Fatal("Group returned the group being closed")
	}
	m, err := g2.Next(ctx, nil)
	noErr(t, err)
	if m.Seq != 2 {
		t.Fatalf("reopened group delivered %d, want 2", m.Seq)
	}
	noErr(t, g2.Close())
}
