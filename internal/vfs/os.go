package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync/atomic"

	"github.com/appendlog/appendlog/internal/sys"
)

// _maxHolderLen bounds how much of a lock file Lock reads for its error.
const _maxHolderLen = 256

// OS returns the FS of real files: *os.File with Sync = sys.Fdatasync,
// Preallocate = sys.Fallocate, WritevAt = sys.Pwritev, SyncDir =
// sys.SyncDir and Lock = sys.TryLock (flock, held per open file
// description, so two Locks in one process conflict). OpenRegular and
// Lock open with sys.OpenNoFollow.
func OS() FS {
	return osFS{}
}

// OSParked is OS with every Sync and SyncDir parked: sys.FdatasyncParked
// and sys.SyncDirParked, whose waits hold no P.
func OSParked() FS {
	return osFS{parked: true}
}

type osFS struct {
	parked bool
}

var _ FS = osFS{}

func (o osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f, parked: o.parked}, nil
}

// OpenRegular opens with sys.OpenNoFollow (O_NOFOLLOW|O_NONBLOCK) and
// checks the type of the file opened. When the open itself fails (a
// symbolic link, or a named pipe or socket that cannot be opened without
// blocking), it looks at name with os.Lstat to say what is there.
func (o osFS) OpenRegular(name string, flag int, perm os.FileMode) (File, error) {
	f, err := openRegular(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f, parked: o.parked}, nil
}

// openRegular opens the regular file name without following a symbolic
// link or blocking, or returns a *NotRegularError.
func openRegular(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := sys.OpenNoFollow(name, flag, perm)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			if fi, lerr := os.Lstat(name); lerr == nil && !fi.Mode().IsRegular() {
				return nil, &NotRegularError{Path: name, Mode: fi.Mode().Type()}
			}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: name, Mode: fi.Mode().Type()}
	}
	return f, nil
}

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) List(dir string) ([]string, error) { return entryNames(os.ReadDir(dir)) } // sorted by name

// entryNames returns the names of entries, or err.
func entryNames(entries []fs.DirEntry, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }

func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func (o osFS) SyncDir(dir string) error {
	if o.parked {
		return sys.SyncDirParked(dir)
	}
	return sys.SyncDir(dir)
}

func (osFS) Lock(name string, holder string) (io.Closer, error) {
	f, err := openRegular(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := sys.TryLock(f); err != nil {
		if errors.Is(err, sys.ErrLocked) {
			b := make([]byte, _maxHolderLen)
			n, _ := f.ReadAt(b, 0) // best effort: the text is only for the message
			err = lockedError(name, string(b[:n]))
		}
		f.Close()
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close() // releases the lock
		return nil, err
	}
	if _, err := f.WriteAt([]byte(holder), 0); err != nil {
		f.Close()
		return nil, err
	}
	return &osLock{f: f}, nil
}

// osFile is a File backed by an *os.File.
type osFile struct {
	f      *os.File
	parked bool // Sync is sys.FdatasyncParked
}

var _ File = (*osFile)(nil)

func (o *osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

// WriteAt relies on (*os.File).WriteAt, which loops until all of p is
// written or an error occurs.
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }

func (o *osFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	return sys.Pwritev(o.f, bufs, off)
}

func (o *osFile) Sync() error {
	if o.parked {
		return sys.FdatasyncParked(o.f)
	}
	return sys.Fdatasync(o.f)
}

func (o *osFile) Truncate(size int64) error { return o.f.Truncate(size) }

func (o *osFile) Preallocate(off, n int64) error { return sys.Fallocate(o.f, off, n) }

func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (o *osFile) Name() string { return o.f.Name() }

func (o *osFile) Close() error { return o.f.Close() }

// osLock is a held lock from osFS.Lock.
type osLock struct {
	f      *os.File
	closed atomic.Bool
}

func (l *osLock) Close() error {
	if l.closed.Swap(true) {
		return &fs.PathError{Op: "unlock", Path: l.f.Name(), Err: fs.ErrClosed}
	}
	err := sys.Unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
