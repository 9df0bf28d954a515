//go:build linux

package sys

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// _procLocks is the kernel's table of file locks.
const _procLocks = "/proc/locks"

func lockHolder(f *os.File) (int, bool) {
	var st unix.Stat_t
	err := control(f, func(fd uintptr) error {
		return retryEINTR(func() error { return unix.Fstat(int(fd), &st) })
	})
	if err != nil {
		return 0, false
	}
	table, err := os.ReadFile(_procLocks)
	if err != nil {
		return 0, false
	}
	return flockHolder(table, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
}

// flockHolder finds, in the text of /proc/locks, the pid holding a FLOCK
// lock on the inode ino of device major:minor. A line reads
//
//	1: FLOCK  ADVISORY  WRITE 1234 08:01:131090 0 EOF
//
// with the device numbers in hex (the kernel prints "%02x:%02x:%lu").
// Lines of waiters ("1: -> FLOCK ...") are skipped, and so is a pid that is
// not positive (a holder in another pid namespace).
func flockHolder(table []byte, major, minor uint32, ino uint64) (int, bool) {
	for line := range bytes.Lines(table) {
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[1]) != "FLOCK" {
			continue
		}
		id := bytes.Split(f[5], []byte(":"))
		if len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(string(id[0]), 16, 32)
		mnr, err2 := strconv.ParseUint(string(id[1]), 16, 32)
		in, err3 := strconv.ParseUint(string(id[2]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || uint32(maj) != major || uint32(mnr) != minor || in != ino {
			continue
		}
		pid, err := strconv.Atoi(string(f[4]))
		if err != nil || pid <= 0 {
			continue
		}
		return pid, true
	}
	return 0, false
}
