//go:build linux

package sys

import "golang.org/x/sys/unix"

// MaxRSS returns the peak resident set size of this process in bytes.
func MaxRSS() (int64, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return ru.Maxrss * 1024, nil // Linux reports KiB
}
