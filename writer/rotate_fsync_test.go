package writer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
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
	// Whatever this Write returns, the Flush that follows must not say
	// all is well (TestRotatedFsyncErrorFailsIdleRing checks each call).
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

// TestRotatedFsyncErrorFailsIdleRing: a rotated file's failed fdatasync
// fails a Ring that has nothing left to write as well: once the failure
// was reported, Flush, Sync, Write, Reopen and Close each return it,
// though no write of the flusher's would meet it. A Flush that returned
// nil here would tell the caller its records were handed over safely
// when the page cache may have dropped them. Only the first fdatasync
// fails, as on Linux, where the next one may succeed though the pages the
// first should have written are gone: no later call may take that
// success for the Ring's.
func TestRotatedFsyncErrorFailsIdleRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	reported := make(chan error, 16)
	var syncs atomic.Int64
	o := faultyFS(func(op vfs.Op, _ string, _ int64, n int) (int, error) {
		if op == vfs.OpSync && syncs.Add(1) == 1 {
			return 0, syscall.EIO
		}
		return n, nil
	})
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
	for range MinRotateBytes/len(rec) + 1 {
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
	ctx := context.Background()
	if err := r.Flush(ctx); !errors.Is(err, syscall.EIO) {
		t.Errorf("flush of an idle Ring after a rotated file's failed fdatasync = %v, want EIO", err)
	}
	if err := r.Err(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Err = %v, want EIO", err)
	}
	if _, err := r.Write(rec); !errors.Is(err, syscall.EIO) {
		t.Errorf("write = %v, want EIO", err)
	}
	if err := r.Flush(ctx); !errors.Is(err, syscall.EIO) {
		t.Errorf("second flush = %v, want EIO", err)
	}
	if err := r.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("sync = %v, want EIO", err)
	}
	if err := r.Reopen(); !errors.Is(err, syscall.EIO) {
		t.Errorf("reopen = %v, want EIO", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("second close = %v, want EIO", err)
	}
}

// TestReopenedFsyncErrorFailsClose: the fdatasync of the file Reopen
// switched away from fails after every record was synced, so the Ring's
// own last sync at Close has nothing to do (and here would succeed, as
// on Linux a sync after a failed one may): Close must still return the
// failure, as every other call does.
func TestReopenedFsyncErrorFailsClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	var syncs atomic.Int64
	o := faultyFS(func(op vfs.Op, _ string, _ int64, n int) (int, error) {
		if op == vfs.OpSync && syncs.Add(1) == 2 {
			return 0, syscall.EIO
		}
		return n, nil
	})
	r, err := OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("a record\n"))
	if err := r.Sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Reopen(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("reopen = %v, want EIO (the old file's fdatasync failed)", err)
	}
	if err := r.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("sync = %v, want EIO", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
}
