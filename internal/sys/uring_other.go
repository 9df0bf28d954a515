//go:build !linux

package sys

import (
	"fmt"
	"os"
	"runtime"
)

type uring struct{ inflight int }

func (u *uring) setup(entries uint32) error {
	return fmt.Errorf("%w: io_uring is Linux-only (GOOS=%s)", ErrUringUnsupported, runtime.GOOS)
}

func (u *uring) entries() int { return 0 }

func (u *uring) write(f *os.File, b []byte, off int64, tag uint64) error {
	return ErrUringUnsupported
}

func (u *uring) wait() (UringCompletion, error) { return UringCompletion{}, ErrUringUnsupported }

func (u *uring) close() error { return nil }
