package stream

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestStreamsDirSyncFailsStore: a failed fsync of the streams directory,
// in Create or in Delete, is never retried: the store is failed, and
// Create, Stream, Delete and its Close say so, naming the sync, not only
// the call that met it. (The store went on as if the sync had been
// retried and succeeded: the next Create's sync of the directory made the
// entry of the first durable, or not, with no one told.)
func TestStreamsDirSyncFailsStore(t *testing.T) {
	for _, op := range []string{"create", "delete"} {
		t.Run(op, func(t *testing.T) {
			var armed atomic.Bool
			fsys := vfs.WithFaults(vfs.NewMem(), func(o vfs.Op, name string, _ int64, n int) (int, error) {
				if armed.Load() && o == vfs.OpSyncDir && name == "/st/streams" {
					return 0, syscall.EIO
				}
				return n, nil
			})
			st, err := Open("/st", &Options{IdleTimeout: -1, fsys: fsys})
			noErr(t, err)
			_, err = st.Create("keep", nil)
			noErr(t, err)
			if op == "delete" {
				_, err = st.Create("s", nil)
				noErr(t, err)
			}
			armed.Store(true)
			if op == "create" {
				_, err = st.Create("s", nil)
			} else {
				err = st.Delete("s")
			}
			armed.Store(false)
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("%s with the streams directory's sync failing = %v, want EIO", op, err)
			}
			failed := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("%s after the streams directory's sync failed = %v, want the failure (EIO)", what, err)
				}
			}
			_, err = st.Create("other", nil)
			failed("Create", err)
			_, err = st.Stream("keep")
			failed("Stream", err)
			failed("Delete", st.Delete("keep"))
			failed("Close", st.Close())
			noErr(t, st.Close()) // later calls return nil
		})
	}
}
