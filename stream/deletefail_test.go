package stream

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestDeleteFails fails each step of a Delete in turn: the rename of the
// stream's directory out of the way, the sync of the streams directory
// after it, and the removal of the renamed directory. Whatever failed,
// the store's view is consistent, now and after reopening: the stream is
// listed and usable (published to, its group opened again and delivering
// where it was), or gone. The error says which, and names the stream's
// directory.
func TestDeleteFails(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		op     vfs.Op
		listed bool                   // the stream stays
		inErr  string                 // the error says which
		fails  func(name string) bool // the operation on name fails
		// failed: a sync failed, never retried, so the store is failed
		// until it is opened again (see TestStreamsDirSyncFailsStore).
		failed bool
	}{
		{op: vfs.OpRename, listed: true, inErr: "not deleted", fails: func(name string) bool { return name == "/st/streams/s" }},
		{op: vfs.OpSyncDir, listed: false, inErr: "deleted", fails: func(name string) bool { return name == "/st/streams" }, failed: true},
		{op: vfs.OpRemove, listed: false, inErr: "deleted", fails: func(name string) bool { return strings.HasPrefix(name, "/st/streams/"+_delPrefix) }},
	} {
		t.Run("fail="+tc.op.String(), func(t *testing.T) {
			var armed atomic.Bool
			mem := vfs.NewMem()
			fsys := vfs.WithFaults(mem, func(op vfs.Op, name string, _ int64, n int) (int, error) {
				if armed.Load() && op == tc.op && tc.fails(name) {
					return 0, syscall.EIO
				}
				return n, nil
			})
			opts := &Options{IdleTimeout: -1, fsys: fsys}
			st, err := Open("/st", opts)
			noErr(t, err)
			defer func() { noErr(t, st.Close()) }()
			s, err := st.Create("s", nil)
			noErr(t, err)
			g, err := s.Group("g", &GroupOptions{AckWait: time.Hour})
			noErr(t, err)
			for _, p := range []string{"a", "b"} {
				_, err := s.Publish([]byte(p))
				noErr(t, err)
			}
			noErr(t, s.WaitDurable(ctx, 2))
			m, err := g.Next(ctx, nil)
			noErr(t, err)
			noErr(t, g.Ack(m.Seq))

			dir := filepath.Join("/st", _streamsDir, "s")
			armed.Store(true)
			err = st.Delete("s")
			armed.Store(false)
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("Delete with %s failing = %v, want EIO", tc.op, err)
			}
			if !strings.Contains(err.Error(), tc.inErr) || !strings.Contains(err.Error(), dir) ||
				strings.Contains(err.Error(), "not deleted") != tc.listed {
				t.Fatalf("Delete with %s failing = %q: want it to say %q and name %s", tc.op, err, tc.inErr, dir)
			}
			if listed := slices.Contains(st.List(), "s"); listed != tc.listed {
				t.Fatalf("after Delete = %q: List %v, want the stream listed %v", err, st.List(), tc.listed)
			}
			check := func(when string, st *Store, next uint64) {
				t.Helper()
				s, err := st.Stream("s")
				if !tc.listed {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("%s: Stream of a stream not listed = %v, want ErrNotFound", when, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s: Stream of a listed stream: %v", when, err)
				}
				g, err := s.Group("g", nil)
				if err != nil {
					t.Fatalf("%s: Group of a listed stream: %v", when, err)
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				m, err := g.Next(cctx, nil)
				if err != nil || m.Seq != next {
					t.Fatalf("%s: the group's Next = %d, %v; want record %d", when, m.Seq, err, next)
				}
				noErr(t, g.Ack(m.Seq))
				seq, err := s.Publish([]byte("c"))
				if err != nil {
					t.Fatalf("%s: Publish to a listed stream: %v", when, err)
				}
				noErr(t, s.WaitDurable(ctx, seq))
			}
			if tc.failed {
				if _, err := st.Stream("s"); !errors.Is(err, syscall.EIO) {
					t.Fatalf("Stream after the failed sync = %v, want the store's failure (EIO)", err)
				}
			} else {
				check("after the failed Delete", st, 2)
			}
			if tc.listed {
				// The group open before the Delete was closed by it; it
				// says so, not that the stream was deleted.
				if _, err := g.Next(ctx, nil); !errors.Is(err, ErrClosed) {
					t.Fatalf("Next of the group the failed Delete closed = %v, want ErrClosed", err)
				}
			}
			if err := st.Close(); tc.failed != errors.Is(err, syscall.EIO) {
				t.Fatalf("Close = %v, want the store's failure (EIO) %v", err, tc.failed)
			}
			st, err = Open("/st", opts)
			noErr(t, err)
			if listed := slices.Contains(st.List(), "s"); listed != tc.listed {
				t.Fatalf("after reopening: List %v, want the stream listed %v", st.List(), tc.listed)
			}
			check("after reopening", st, 3)
		})
	}
}

// TestDeleteFailsGroupsClosed: the groups a Delete that failed closed are
// closed, not open: the stream counts none open, and DeleteGroup removes
// one without a Close first (ErrGroupOpen, "close it first", was returned
// for a group closed already).
func TestDeleteFailsGroupsClosed(t *testing.T) {
	var armed atomic.Bool
	fsys := vfs.WithFaults(vfs.NewMem(), func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if armed.Load() && op == vfs.OpRename && name == "/st/streams/s" {
			return 0, syscall.EIO
		}
		return n, nil
	})
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: fsys})
	noErr(t, err)
	defer func() { noErr(t, st.Close()) }()
	s, err := st.Create("s", nil)
	noErr(t, err)
	_, err = s.Group("g", nil)
	noErr(t, err)
	armed.Store(true)
	if err := st.Delete("s"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Delete with its rename failing = %v, want EIO", err)
	}
	armed.Store(false)
	if n := s.Stats().Groups; n != 0 {
		t.Fatalf("after a failed Delete closed its groups: Stats().Groups = %d, want 0", n)
	}
	if err := s.DeleteGroup("g"); err != nil {
		t.Fatalf("DeleteGroup of the group a failed Delete closed = %v, want nil", err)
	}
	if names, err := s.Groups(); err != nil || len(names) != 0 {
		t.Fatalf("Groups after DeleteGroup = %v, %v; want none", names, err)
	}
}
