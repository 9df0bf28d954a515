package writer

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/appendlog/appendlog/internal/sys"
)

// syncFunc returns the function that makes what was written to w durable:
// fdatasync for an *os.File, w.Sync for any other writer with a Sync method,
// and nothing for the rest (a network connection has no durability to ask
// for). For an *os.File that cannot be synced (a terminal or a pipe, where
// fdatasync fails with EINVAL), syncing is a no-op: zap users know the
// "sync /dev/stdout: invalid argument" error this avoids.
func syncFunc(w io.Writer) func() error {
	switch w := w.(type) {
	case *os.File:
		return func() error {
			err := sys.Fdatasync(w)
			if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
				return nil
			}
			return err
		}
	case interface{ Sync() error }:
		return w.Sync
	default:
		return func() error { return nil }
	}
}
