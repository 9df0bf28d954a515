package sys

import "os"

// LockHolder returns the pid of the process that holds a flock(2) lock on
// the file f refers to (through any open file description of the same
// inode, f's own included). ok is false when it cannot tell: no such lock
// is listed, the holder is outside this pid namespace, or the platform has
// no lock table to read (only Linux has one, /proc/locks). It reads and
// parses that table: use it for error messages, never on a hot path.
func LockHolder(f *os.File) (pid int, ok bool) {
	return lockHolder(f)
}
