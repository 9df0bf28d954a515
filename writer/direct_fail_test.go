package writer

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/sys"
)

// TestDirectFailedWriteLeavesNoPadding: a Ring with Direct whose write
// fails (a full disk) is closed, and its file must end where the last
// write that succeeded ended. That write padded its last block with zero
// bytes, to be rewritten by the next write or cut by Close; Close
// measured the true length from what the failed write had staged, found
// the file no longer than that, and left the padding. A restart then
// appended after it: zero bytes in the middle of the log.
func TestDirectFailedWriteLeavesNoPadding(t *testing.T) {
	r, path := openRingFile(t, &RingOptions{Size: 64 << 10, Direct: true})
	var full atomic.Bool
	r.sink.(*directSink).pwritevAt = func(f *os.File, iov [][]byte, off int64) (int, error) {
		if full.Load() {
			return 0, syscall.ENOSPC
		}
		return sys.Pwritev(f, iov, off)
	}
	first := []byte("a record that fits\n")
	mustWrite(t, r, first)
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	mustWrite(t, r, []byte("a record the disk has no room for\n"))
	if err := r.Flush(context.Background()); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush = %v, want ENOSPC", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("close = %v, want ENOSPC", err)
	}
	if got := readFile(t, path); string(got) != string(first) {
		t.Errorf("the file holds %d bytes (%q...), want the %d of the record written before the failure", len(got), got[:min(len(got), 32)], len(first))
	}
}

// TestDirectSyncNotRetried: a Ring with Direct whose fdatasync failed is
// closed, and Close must not fdatasync again. The kernel may have marked
// the pages it could not write clean, so a second fdatasync that returns
// nil would say that lost bytes are durable: a failed sync is never
// retried, and the Ring reports the first failure.
func TestDirectSyncNotRetried(t *testing.T) {
	r, _ := openRingFile(t, &RingOptions{Size: 64 << 10, Direct: true})
	var calls atomic.Int32
	r.sink.(*directSink).fdatasync = func(f *os.File) error {
		if calls.Add(1) == 1 {
			return syscall.EIO
		}
		return sys.Fdatasync(f)
	}
	mustWrite(t, r, []byte("a record whose sync fails\n"))
	if err := r.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync = %v, want EIO", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d fdatasync calls, want 1: Close synced again after a failed sync", n)
	}
}
