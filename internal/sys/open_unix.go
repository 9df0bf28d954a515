//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package sys

import (
	"os"

	"golang.org/x/sys/unix"
)

func openNoFollow(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK, perm)
}
