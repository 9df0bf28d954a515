//go:build !linux

package sys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

func fdatasync(f *os.File, _ bool) error {
	return f.Sync()
}

func fallocate(f *os.File, off, n int64) error {
	return extend(f, off+n)
}

func openDirect(name string, flag int, perm os.FileMode) (*os.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: ErrDirectUnsupported}
}

func pwritev(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.WriteAt(b, off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func mmap(f *os.File, off int64, length int, writable bool) ([]byte, error) {
	return nil, fmt.Errorf("mmap on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func munmap(b []byte) error {
	return fmt.Errorf("munmap on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func madvise(b []byte, a Advice) error {
	return nil
}

func syncDir(dir string, _ bool) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if runtime.GOOS == "windows" {
		// Directory handles cannot be flushed on Windows; NTFS journals
		// metadata itself.
		err = nil
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func hugeBuffer(n int) ([]byte, func() error, error) {
	return AlignedBuffer(n), func() error { return nil }, nil
}
