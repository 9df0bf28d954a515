package stream

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestCheckpointRacingDeleteGroup: a Checkpoint of a stream's only group
// (kept UntilAcked) whose deletion of acked records runs after another
// goroutine closed and deleted the group deletes no record the group did
// not ack. The deletion reads the cursors after DeleteGroup removed the
// group's: with no cursor left, a deletion up to the stream's end would
// take every sealed segment, records no group consumed.
func TestCheckpointRacingDeleteGroup(t *testing.T) {
	var armed atomic.Bool
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if op == vfs.OpLock && strings.HasSuffix(name, "..floor.lock") && armed.Load() {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
		return n, nil
	})
	st := mustOpen(t, t.TempDir(), &Options{IdleTimeout: -1, fsys: fsys})
	defer st.Close()
	s, err := st.Create("q", &Config{SegmentSize: 64 << 10, Retention: Retention{UntilAcked: true}})
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{AckWait: time.Hour, CheckpointEvery: time.Hour})
	noErr(t, err)
	var last uint64
	for range 2000 {
		last, err = s.Publish(make([]byte, 200))
		noErr(t, err)
	}
	noErr(t, s.WaitDurable(context.Background(), last))
	// Acked: the first 500 records, more than the first segment holds.
	const acked = 500
	for range acked {
		m, err := g.Next(context.Background(), nil)
		noErr(t, err)
		noErr(t, g.Ack(m.Seq))
	}

	armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- g.Checkpoint() }()
	var ckptErr error
	select {
	case <-reached: // deleting what was acked: the group goes meanwhile
		noErr(t, g.Close())
		noErr(t, s.DeleteGroup("g"))
		close(release)
		ckptErr = <-done
	case ckptErr = <-done:
		t.Fatalf("Checkpoint returned %v without deleting the records acked", ckptErr)
	}
	noErr(t, ckptErr)
	if first := s.Stats().FirstSeq; first > acked+1 {
		t.Fatalf("FirstSeq %d: records %d to %d, which no group consumed, were deleted", first, acked+1, first-1)
	}
}
