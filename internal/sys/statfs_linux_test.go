//go:build linux

package sys

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends. It skips the test when it cannot mount (not root,
// or no mount command).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func TestFreeSpace(t *testing.T) {
	free, err := FreeSpace(t.TempDir())
	if err != nil || free <= 0 {
		t.Fatalf("FreeSpace(TempDir) = %d, %v; want a positive count", free, err)
	}

	_, err = FreeSpace(filepath.Join(t.TempDir(), "missing"))
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "statfs" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("FreeSpace(missing) error = %v; want a statfs *fs.PathError wrapping ErrNotExist", err)
	}
}

// TestFreeSpaceTmpfs checks the count exactly on a file system whose size
// the test chose.
func TestFreeSpaceTmpfs(t *testing.T) {
	const size = 8 << 20
	dir := mountTmpfs(t, size)
	free, err := FreeSpace(dir)
	if err != nil || free != size {
		t.Fatalf("FreeSpace(empty %d-byte tmpfs) = %d, %v", size, free, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	free, err = FreeSpace(filepath.Join(dir, "f"))
	if err != nil || free != size-3<<20 {
		t.Fatalf("FreeSpace after writing 3 MiB = %d, %v; want %d", free, err, size-3<<20)
	}
}
