//go:build linux

package sys

import (
	"time"

	"golang.org/x/sys/unix"
)

// MaxRSS returns the peak resident set size of this process in bytes.
func MaxRSS() (int64, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return ru.Maxrss * 1024, nil // Linux reports KiB
}

// CPUTime returns the CPU time, user and system, this process has used.
func CPUTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
