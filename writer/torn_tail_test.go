package writer

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestFullDiskLeavesNoTornRecord: the disk fills up in the middle of a
// flush, and the file takes part of it. Closing the failed Ring cuts the
// file back to where its last successful write ended, so that it ends
// with a whole record: the part left would have a restarted program's
// first record glued to a torn one.
func TestFullDiskLeavesNoTornRecord(t *testing.T) {
	first := append(bytes.Repeat([]byte("a"), 99), '\n')
	second := append(bytes.Repeat([]byte("b"), 99), '\n')
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/log", 0o755); err != nil {
		t.Fatal(err)
	}
	const path = "/log/app.log"
	r, err := OpenFile(path, &RingOptions{
		Size:     64 << 10,
		fsys:     vfs.WithFaults(mem, vfs.ENOSPCAfter(int64(len(first)+len(second)/2))),
		lockFile: noLock,
	})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, first)
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, second)
	if err := r.Flush(context.Background()); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush = %v, want ENOSPC", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("close = %v, want ENOSPC", err)
	}
	if got := readVFS(t, mem, path); !bytes.Equal(got, first) {
		t.Errorf("the file holds %d bytes, ending %q: want the %d of the record written before the disk filled", len(got), got[max(len(got)-8, 0):], len(first))
	}
}
