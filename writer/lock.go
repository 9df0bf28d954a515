package writer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/appendlog/appendlog/internal/sys"
)

// fileLock is a writer's exclusive lock on its log file: flock(2) LOCK_EX
// on a descriptor of its own, which no I/O goes through. flock locks belong
// to the open file description, so the lock excludes every other open of
// the file that asks for it, in this process as in others, and it never
// conflicts with the writer's own descriptors (the O_DIRECT one included),
// which do not ask. Closing the lock releases it. Go opens files
// close-on-exec, so a child process never inherits it.
type fileLock struct {
	f *os.File // nil for a file that is not a regular file (not locked)
}

var _ io.Closer = (*fileLock)(nil)

// lockFile opens path, creating it with perm if it does not exist, and
// takes the lock without waiting. If another writer holds it, the error
// wraps ErrInUse and names path and the holder. Only regular files are
// locked: a device such as /dev/null is not a log that writers could
// overwrite each other in.
func lockFile(path string, perm os.FileMode) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return &fileLock{}, nil
	}
	if err := sys.TryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, sys.ErrLocked) {
			pid, ok := sys.LockHolder(f)
			if !ok {
				pid = 0
			}
			return nil, &inUseError{path: path, pid: pid, self: ok && pid == os.Getpid()}
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, fmt.Errorf("writer: lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

// holds reports whether path names the locked file (it was not renamed
// or replaced).
func (l *fileLock) holds(path string) bool {
	if l.f == nil {
		return false
	}
	a, err := l.f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// Close releases the lock.
func (l *fileLock) Close() error {
	if l.f == nil {
		return nil
	}
	err := sys.Unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writer: unlock: %w", err) // err names the file
	}
	return nil
}

// inUseError is the refusal of a second writer on a file: another open
// file description holds the file's lock.
type inUseError struct {
	path string
	pid  int  // the holder's pid; 0 if unknown
	self bool // the holder is this process
}

func (e *inUseError) Error() string {
	holder := "(pid unknown)"
	if e.pid > 0 {
		holder = "(pid " + strconv.Itoa(e.pid) + ")"
	}
	if e.self {
		holder = "in this process " + holder
	}
	return "writer: open " + e.path + ": in use by another writer " + holder
}

func (e *inUseError) Unwrap() error { return ErrInUse }

// _openLockedTries bounds how often lockedOpen takes the lock and the file
// again when the file was renamed between the two.
const _openLockedTries = 3

// lockedOpen locks the file at path with lockFile, then opens it with open:
// the file of OpenFile, of a rotation or of a Reopen. The lock and the open
// name the path one after the other, so a file renamed away in between
// (logrotate's rename coming as the Ring opens, rotates or reopens) would
// leave the lock on one file and the writes on another: the Ring would
// write a file it does not lock, another writer could lock and write it
// too, and a Reopen would later open that same file again as if it were
// new. So once the file is open, the lock must still name the path; if
// not, both are let go and taken again.
func lockedOpen[F interface{ close() error }](lockFile func(string, os.FileMode) (io.Closer, error), path string, perm os.FileMode, open func() (F, error)) (F, io.Closer, error) {
	var zero F
	for try := 1; ; try++ {
		lock, err := lockFile(path, perm)
		if err != nil {
			return zero, nil, err
		}
		f, err := open()
		if err != nil {
			lock.Close()
			return zero, nil, err
		}
		l, ok := lock.(*fileLock)
		if !ok || l.f == nil || l.holds(path) {
			return f, lock, nil // a lock that knows no file cannot tell
		}
		f.close()
		lock.Close()
		if try == _openLockedTries {
			return zero, nil, fmt.Errorf("writer: open %s: renamed by another program while opened, %d times", path, try)
		}
	}
}
