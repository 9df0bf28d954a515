package vfs

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrLocked is returned (wrapped) by FS.Lock when another holder has the
// lock. The error message names the lock file and the holder text found in
// it.
var ErrLocked = errors.New("vfs: locked")

// ErrCrashed is returned (wrapped) by every operation on a MemFS, its files
// and its locks after MemFS.Crash.
var ErrCrashed = errors.New("vfs: file system crashed")

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
