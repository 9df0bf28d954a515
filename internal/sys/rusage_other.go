//go:build !linux

package sys

import (
	"errors"
	"time"
)

// MaxRSS returns the peak resident set size of this process in bytes. It is
// only implemented on Linux.
func MaxRSS() (int64, error) {
	return 0, errors.ErrUnsupported
}

// CPUTime returns the CPU time, user and system, this process has used. It
// is only implemented on Linux.
func CPUTime() (time.Duration, error) {
	return 0, errors.ErrUnsupported
}
