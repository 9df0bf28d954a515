package stream

import (
	"context"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestGroupStartPastLostRecords: a group created at StartAt past the
// records a power cut then took (published, never confirmed) resumes at
// the stream's end, and delivers every record published after the cut,
// however far the stream grows again: the sequence numbers of its start
// belong to new records now. FuzzStoreModel found a group that, on each
// reopen, jumped to its StartAt again (at most the stream's end), past
// records published since and never delivered.
func TestGroupStartPastLostRecords(t *testing.T) {
	mem := vfs.NewMem()
	opts := func(fsys vfs.FS) *Options { return &Options{IdleTimeout: -1, fsys: fsys} }
	st := mustOpen(t, "/st", opts(mem))
	s, err := st.Create("s", &Config{SegmentSize: 64 << 10})
	noErr(t, err)
	for range 4 {
		_, err := s.Publish([]byte("lost"))
		noErr(t, err)
	}
	// Starting at the end, as a consumer of new records only does.
	_, err = s.Group("g", &GroupOptions{StartAt: 5, CheckpointEvery: time.Hour})
	noErr(t, err)
	after := mem.Crash(nil) // the four records were never synced
	_ = st.Close()

	st = mustOpen(t, "/st", opts(after))
	s, err = st.Stream("s")
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	if c := g.Committed(); c != 1 {
		t.Fatalf("group at %d after the records were lost, want 1: the stream's end", c)
	}
	noErr(t, g.Close())
	ctx := context.Background()
	for i := range 6 {
		// Each reopen sees the stream a record longer.
		seq, err := s.Publish([]byte{'a' + byte(i)})
		noErr(t, err)
		noErr(t, s.WaitDurable(ctx, seq))
		noErr(t, st.Close())
		st = mustOpen(t, "/st", opts(after))
		s, err = st.Stream("s")
		noErr(t, err)
		g, err := s.Group("g", nil)
		noErr(t, err)
		if c := g.Committed(); c != 1 {
			t.Fatalf("reopen %d: group at %d, want 1: records 1 to %d were published after it and not delivered", i, c, seq)
		}
		noErr(t, g.Close())
	}
	g, err = s.Group("g", nil)
	noErr(t, err)
	for i := range 6 {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := g.Next(ctx, nil)
		cancel()
		noErr(t, err)
		if m.Seq != uint64(i+1) || string(m.Data) != string([]byte{'a' + byte(i)}) {
			t.Fatalf("delivered %d %q, want %d %q", m.Seq, m.Data, i+1, []byte{'a' + byte(i)})
		}
		noErr(t, g.Ack(m.Seq))
	}
	noErr(t, g.Close())
	noErr(t, st.Close())
}
