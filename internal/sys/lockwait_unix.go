//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package sys

import (
	"os"

	"golang.org/x/sys/unix"
)

func lockWait(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	return control(f, func(fd uintptr) error {
		for {
			if err := unix.Flock(int(fd), how); err != unix.EINTR {
				return err
			}
		}
	})
}
