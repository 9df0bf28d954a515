//go:build !linux

package sys

import (
	"errors"
	"io/fs"
)

func fsType(path string) (string, error) {
	return "", &fs.PathError{Op: "statfs", Path: path, Err: errors.ErrUnsupported}
}
