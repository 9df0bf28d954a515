package sys

import "errors"

// ErrDirectUnsupported is returned (wrapped) by OpenDirect when O_DIRECT is
// not available: on platforms other than Linux, and on Linux file systems
// that reject O_DIRECT at open (EINVAL, for example tmpfs before Linux 6.6).
var ErrDirectUnsupported = errors.New("sys: O_DIRECT not supported on this platform")

// ErrLocked is returned (wrapped) by TryLock when another open file
// description already holds the lock.
var ErrLocked = errors.New("sys: file is locked")
