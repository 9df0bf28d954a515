//go:build !linux

package sys

import (
	"errors"
	"io/fs"
)

func freeSpace(path string) (int64, error) {
	return 0, &fs.PathError{Op: "statfs", Path: path, Err: errors.ErrUnsupported}
}
