package writer

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestRotatedFsyncErrorFailsRing: an fdatasync error on a rotated file (met
// by the closer goroutine, off the flusher) fails the Ring as one on the
// current file does: the next flush returns it, and so does every later
// call. The Ring must not go on accepting and writing records as if the
// page cache had kept everything.
func TestRotatedFsyncErrorFailsRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	reported := make(chan error, 16)
	o := faultyFS(vfs.FailAfter(vfs.OpSync, 1, syscall.EIO))
	o.Rotate = &Rotate{MaxBytes: MinRotateBytes}
	o.OnError = func(err error) {
		select {
		case reported <- err:
		default:
		}
	}
	r, err := OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	rec := append(bytes.Repeat([]byte("x"), 1023), '\n')
	for range 2 * MinRotateBytes / len(rec) {
		mustWrite(t, r, rec)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatalf("flush before the closer's sync failed: %v", err)
	}
	select {
	case err := <-reported:
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("reported %v, want EIO", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rotated file's failed fdatasync was not reported")
	}
	// The Write may be accepted (the flusher learns of the failure when it
	// next writes); the Flush that follows must not say all is well.
	r.Write(rec)
	if err := r.Flush(context.Background()); !errors.Is(err, syscall.EIO) {
		t.Errorf("flush after a rotated file's failed fdatasync = %v, want EIO", err)
	}
	if _, err := r.Write(rec); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after a rotated file's failed fdatasync = %v, want EIO", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
}
