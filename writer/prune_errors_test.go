package writer

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// TestPruneGoesOnPastARemoveError: one backup that cannot be removed (a
// file made immutable, or owned by another user in a sticky directory)
// must not keep every older one: pruning stopped at the first failed
// remove, so retention ended for good and the disk filled, one rotation
// at a time. The failure is reported, naming the file, and the older
// backups are removed.
func TestPruneGoesOnPastARemoveError(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/log", 0o755); err != nil {
		t.Fatal(err)
	}
	const path = "/log/app.log"
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var names []string
	for h := 1; h <= 4; h++ {
		name := backupName(path, now.Add(-time.Duration(h)*time.Hour))
		f, err := mem.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		names = append(names, name)
	}
	stuck := names[1]
	fsys := vfs.WithFaults(mem, func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if op == vfs.OpRemove && name == stuck {
			return 0, syscall.EPERM
		}
		return n, nil
	})
	reported := make(chan error, 64)
	r, err := OpenFile(path, &RingOptions{
		Rotate:   &Rotate{MaxBytes: MinRotateBytes, MaxBackups: 1},
		OnError:  func(err error) { reported <- err },
		fsys:     fsys,
		lockFile: noLock,
		clock:    newFakeClockAt(now),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	close(reported)
	var errs []error
	for err := range reported {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], syscall.EPERM) || !strings.Contains(errs[0].Error(), stuck) {
		t.Errorf("reported %v, want one EPERM naming %s", errs, stuck)
	}
	for i, name := range names {
		_, err := mem.Stat(name)
		if kept := err == nil; kept != (i < 2) {
			t.Errorf("backup %s kept = %v, want %v", name, kept, i < 2)
		}
	}
}
