//go:build linux

package sys

import (
	"io/fs"
	"math"

	"golang.org/x/sys/unix"
)

func freeSpace(path string) (int64, error) {
	var st unix.Statfs_t
	if err := retryEINTR(func() error { return unix.Statfs(path, &st) }); err != nil {
		return 0, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	// f_frsize is the unit of the block counts; f_bsize is the preferred
	// I/O size, which Linux reports as the same for the file systems that
	// leave f_frsize zero.
	bs := uint64(st.Frsize)
	if bs == 0 {
		bs = uint64(st.Bsize)
	}
	if bs != 0 && st.Bavail > math.MaxInt64/bs {
		return math.MaxInt64, nil
	}
	return int64(st.Bavail * bs), nil
}
