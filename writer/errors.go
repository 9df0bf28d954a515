package writer

import (
	"errors"
	"fmt"

	"github.com/appendlog/appendlog/internal/sys"
)

// These errors are returned by the writers of this package.
var (
	// ErrClosed is returned by Write, Flush and Sync called after Close.
	ErrClosed = errors.New("writer: closed")
	// ErrTooLarge is returned by Ring.Write for a record larger than the
	// ring can hold (RingOptions.Size minus one commit block); records are
	// never split.
	ErrTooLarge = errors.New("writer: record larger than the buffer")
	// ErrDirectUnsupported is wrapped by the error OpenFile returns when
	// RingOptions.Direct is set and the platform or file system has no
	// O_DIRECT. It is the same value as the internal sys error, so
	// errors.Is matches either.
	ErrDirectUnsupported = sys.ErrDirectUnsupported
	// ErrInUse is wrapped by the error OpenFile and OpenMmap return when
	// another writer, in this process or another, has the file open: each
	// holds an exclusive lock on its file until Close. The message names
	// the file and, where the platform can tell, the holder's pid.
	ErrInUse = errors.New("writer: file in use by another writer")
	// ErrNilContext is wrapped by the error of every method that takes a
	// context (Flush, SyncContext, CloseContext) called with a nil one.
	// The call does nothing else: the writer is not failed, and a
	// CloseContext so called does not close it.
	ErrNilContext = errors.New("writer: nil context")
	// ErrTruncated is wrapped by the sticky error of a Ring from OpenFile
	// whose file another program truncated (logrotate's copytruncate):
	// writing on at the Ring's offset would leave a hole of zero bytes, so
	// the Ring refuses. The message names the file. Use rename and
	// Ring.Reopen instead (see the package doc).
	ErrTruncated = errors.New("writer: file truncated by another program")
)

// errNilContext is the error of a method called with a nil context.
func errNilContext(method string) error {
	return fmt.Errorf("%w passed to %s", ErrNilContext, method)
}
