//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package sys

import (
	"io/fs"
	"os"
	"syscall"
)

func openNoFollow(name string, flag int, perm os.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ELOOP}
	}
	return os.OpenFile(name, flag, perm)
}
