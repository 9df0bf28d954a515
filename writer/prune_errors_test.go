package writer

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestPruneListErrorReported: the janitor cannot list the log's directory
// (a directory that lost its read permission still takes the renames and
// creates of rotation). Backups then pile up past MaxBackups: that must be
// counted and passed to OnError, not happen in silence.
func TestPruneListErrorReported(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/log", 0o755); err != nil {
		t.Fatal(err)
	}
	var failList atomic.Bool
	fsys := vfs.WithFaults(mem, func(op vfs.Op, _ string, _ int64, n int) (int, error) {
		if op == vfs.OpList && failList.Load() {
			return 0, syscall.EACCES
		}
		return n, nil
	})
	reported := make(chan error, 64)
	r, err := OpenFile("/log/app.log", &RingOptions{
		Size:     64 << 10,
		Rotate:   &Rotate{MaxBytes: MinRotateBytes, MaxBackups: 1},
		OnError:  func(err error) { reported <- err },
		fsys:     fsys,
		lockFile: noLock,
	})
	if err != nil {
		t.Fatal(err)
	}
	failList.Store(true)
	writeUntilRotated(t, r, 3, nil)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	close(reported)
	n := 0
	for err := range reported {
		if !errors.Is(err, syscall.EACCES) {
			t.Errorf("reported %v, want EACCES", err)
		}
		n++
	}
	if n == 0 || r.Stats().RotationErrors == 0 {
		t.Errorf("%d errors reported, Stats.RotationErrors = %d: backups were not pruned, and nothing said so", n, r.Stats().RotationErrors)
	}
}
