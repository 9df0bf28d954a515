//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package sys

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func tryLock(f *os.File) error {
	return control(f, func(fd uintptr) error {
		for {
			err := unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			switch err {
			case unix.EINTR:
				continue
			case unix.EWOULDBLOCK:
				return fmt.Errorf("%w (%w)", ErrLocked, err)
			}
			return err
		}
	})
}

func unlock(f *os.File) error {
	return control(f, func(fd uintptr) error {
		for {
			if err := unix.Flock(int(fd), unix.LOCK_UN); err != unix.EINTR {
				return err
			}
		}
	})
}
