package vfs

import (
	"io"
	"io/fs"
	"os"
)

// File is an open file. Its methods are safe for concurrent use.
type File interface {
	io.ReaderAt
	// WriteAt writes all of p at off or returns an error; it never returns
	// n < len(p) with a nil error. Writing past the end extends the file,
	// zero-filling any gap.
	io.WriterAt
	// WritevAt writes the concatenation of bufs at off as one gathered
	// write (pwritev), with the same all-or-error rule as WriteAt. It
	// returns the number of bytes written.
	WritevAt(bufs [][]byte, off int64) (int, error)
	// Sync makes the file's data and size durable (fdatasync). An error
	// means data may have been lost; it must not be retried as if the data
	// were safe.
	Sync() error
	// Truncate sets the file's size, zero-filling when it grows.
	Truncate(size int64) error
	// Preallocate ensures the range [off, off+n) exists, zero-filled where
	// it was not written, extending the size if needed. It never shrinks
	// the file or changes existing bytes.
	Preallocate(off, n int64) error
	// Size returns the file's current size.
	Size() (int64, error)
	// Name returns the path the file was opened with.
	Name() string
	// Close closes the file. Closing does not sync.
	Close() error
}

// FS is a file system. Paths use the host separator (filepath.Join).
// Its methods are safe for concurrent use.
type FS interface {
	// OpenFile opens name with os.OpenFile flags: one of os.O_RDONLY,
	// os.O_WRONLY, os.O_RDWR, optionally combined with os.O_CREATE,
	// os.O_EXCL and os.O_TRUNC. perm is used when creating.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// OpenRegular opens name as OpenFile does, but only a regular file: it
	// does not follow a symbolic link at name, does not block on a named
	// pipe, and refuses anything but a regular file (a symbolic link, a
	// directory, a named pipe, a socket, a device) with a
	// *NotRegularError, which wraps ErrNotRegular. With os.O_CREATE it
	// creates a missing file but never through a symbolic link. Use it for
	// files a program owns inside its own directory, which a link must not
	// redirect elsewhere.
	OpenRegular(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames oldname to newname, replacing newname if it is a
	// file; an existing directory at newname is refused (fs.ErrExist), as
	// os.Rename refuses it.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the sorted base names of the entries in dir. A missing
	// dir gives an error wrapping fs.ErrNotExist.
	List(dir string) ([]string, error)
	// ReadDir returns the entries of dir sorted by name, each with the type
	// of the entry itself (Type, as fs.DirEntry; a symbolic link is
	// fs.ModeSymlink, not followed). A missing dir gives an error wrapping
	// fs.ErrNotExist.
	ReadDir(dir string) ([]fs.DirEntry, error)
	// Stat describes the file or directory name.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the creates, renames and removes of entries in dir
	// durable.
	SyncDir(dir string) error
	// Lock creates name if missing (never through a symbolic link, and
	// only a regular file: otherwise a *NotRegularError), takes an exclusive non-blocking lock on
	// it and writes holder (for example "pid 1234") into it. If the lock is
	// held, the error wraps ErrLocked and its message includes name and the
	// holder text read from the file. Closing the returned io.Closer
	// releases the lock; the file stays.
	Lock(name string, holder string) (io.Closer, error)
}
