package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// ErrLocked is returned (wrapped) by FS.Lock when another holder has the
// lock. The error message names the lock file and the holder text found in
// it.
var ErrLocked = errors.New("vfs: locked")

// ErrCrashed is returned (wrapped) by every operation on a MemFS, its files
// and its locks after MemFS.Crash.
var ErrCrashed = errors.New("vfs: file system crashed")

// ErrNotRegular is wrapped by every *NotRegularError.
var ErrNotRegular = errors.New("vfs: not a regular file")

// NotRegularError reports that Path, expected to be a regular file, is
// something else: Mode holds its type bits (fs.ModeSymlink for a symbolic
// link). FS.OpenRegular and FS.Lock return it, and so may callers that
// find such an entry with FS.ReadDir. It wraps ErrNotRegular.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

// Error says what Path is, for example "/log/LOCK is a symbolic link, not
// a regular file".
func (e *NotRegularError) Error() string {
	return e.Path + " is " + Describe(e.Mode) + ", not a regular file"
}

// Unwrap returns ErrNotRegular.
func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// Describe names the kind of file that mode's type bits say, with an
// article: "a regular file", "a symbolic link", "a directory", "a named
// pipe (FIFO)", "a socket", "a device" or "a special file" for
// anything else.
func Describe(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a regular file"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// lockedError reports that name is locked by holder.
func lockedError(name, holder string) error {
	return fmt.Errorf("lock %s: held by %q: %w", name, holder, ErrLocked)
}

// Errors MemFS returns that mirror the system's errno values, so that
// errors.Is checks behave like they do with OS.
var (
	errIsDir    error = syscall.EISDIR
	errNotDir   error = syscall.ENOTDIR
	errNotEmpty error = syscall.ENOTEMPTY
	errBadFD    error = syscall.EBADF
	errInvalid  error = syscall.EINVAL
)
