package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Op is a kind of file-system operation, as seen by an Injector. The zero
// value is invalid.
type Op int

// The operations an Injector is consulted about.
const (
	// OpOpen is FS.OpenFile and FS.OpenRegular.
	OpOpen Op = iota + 1
	// OpWrite is File.WriteAt and File.WritevAt; n is the byte count.
	OpWrite
	// OpRead is File.ReadAt; n is len(p).
	OpRead
	// OpSync is File.Sync.
	OpSync
	// OpTruncate is File.Truncate; off is the new size.
	OpTruncate
	// OpPreallocate is File.Preallocate; off and n are its range.
	OpPreallocate
	// OpRemove is FS.Remove.
	OpRemove
	// OpRename is FS.Rename; name is the old name.
	OpRename
	// OpSyncDir is FS.SyncDir.
	OpSyncDir
	// OpClose is File.Close. The file is closed even when the injector
	// fails it, as close(2) does.
	OpClose
	// OpMkdirAll is FS.MkdirAll.
	OpMkdirAll
	// OpList is FS.List and FS.ReadDir.
	OpList
	// OpStat is FS.Stat and File.Size.
	OpStat
	// OpLock is FS.Lock.
	OpLock
)

var _opNames = [...]string{
	OpOpen:        "open",
	OpWrite:       "write",
	OpRead:        "read",
	OpSync:        "sync",
	OpTruncate:    "truncate",
	OpPreallocate: "preallocate",
	OpRemove:      "remove",
	OpRename:      "rename",
	OpSyncDir:     "syncdir",
	OpClose:       "close",
	OpMkdirAll:    "mkdirall",
	OpList:        "list",
	OpStat:        "stat",
	OpLock:        "lock",
}

// String returns the operation's lower-case name, such as "write".
func (o Op) String() string {
	if o > 0 && int(o) < len(_opNames) {
		return _opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Injector decides the fate of one operation before it runs. name is the
// file or directory; off and n describe the byte range for reads, writes,
// truncates and preallocations (zero otherwise). Returning a nil error lets
// the operation through unchanged (allowed is then ignored). Returning an
// error fails it; for OpWrite (and OpRead), the first allowed bytes (0 <=
// allowed < n) are still written (read) before the error is returned,
// which makes a short write that persists exactly that prefix.
//
// An Injector is called concurrently from every goroutine using the FS and
// must be safe for that.
type Injector func(op Op, name string, off int64, n int) (allowed int, err error)

// WithFaults wraps fs so that inj is consulted before every operation on it
// and on the files it opens. Injected errors are returned as *fs.PathError
// (Op is the Op's name) wrapping the injector's error, so
// errors.Is(err, syscall.ENOSPC) works. Locks returned by Lock are not
// wrapped.
func WithFaults(fsys FS, inj Injector) FS {
	return &faultFS{fs: fsys, inj: inj}
}

// FailAfter returns an Injector that fails the count-th and every later
// operation of kind op with err (counting from 1, so count <= 1 fails them
// all). Failed writes write nothing. It is safe for concurrent use.
func FailAfter(op Op, count int, err error) Injector {
	var seen atomic.Int64
	return func(o Op, name string, off int64, n int) (int, error) {
		if o != op || seen.Add(1) < int64(count) {
			return n, nil
		}
		return 0, err
	}
}

// ENOSPCAfter returns an Injector that lets writes through until their
// total would exceed limit bytes; the write that straddles the limit is
// short (it persists only the bytes up to the limit) and it and every later
// write fail with syscall.ENOSPC. Other operations pass. It is safe for
// concurrent use.
func ENOSPCAfter(limit int64) Injector {
	var mu sync.Mutex
	var written int64 // Protected by mu.
	return func(op Op, name string, off int64, n int) (int, error) {
		if op != OpWrite {
			return n, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if written+int64(n) <= limit {
			written += int64(n)
			return n, nil
		}
		allowed := max(limit-written, 0)
		written += allowed
		return int(allowed), syscall.ENOSPC
	}
}

// Chain returns an Injector that consults injs in order and returns the
// first failure; later injectors are not consulted for that operation.
func Chain(injs ...Injector) Injector {
	return func(op Op, name string, off int64, n int) (int, error) {
		for _, inj := range injs {
			if allowed, err := inj(op, name, off, n); err != nil {
				return allowed, err
			}
		}
		return n, nil
	}
}

// faultFS is the FS returned by WithFaults.
type faultFS struct {
	fs  FS
	inj Injector
}

var _ FS = (*faultFS)(nil)

// check consults the injector about an operation that moves no bytes.
func (f *faultFS) check(op Op, name string) error {
	_, err := f.inj(op, name, 0, 0)
	return injected(op, name, err)
}

// injected wraps an injector's error.
func injected(op Op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op.String(), Path: name, Err: err}
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return f.open(f.fs.OpenFile, name, flag, perm)
}

func (f *faultFS) OpenRegular(name string, flag int, perm os.FileMode) (File, error) {
	return f.open(f.fs.OpenRegular, name, flag, perm)
}

// open consults the injector (OpOpen), then opens name with open and wraps
// the file.
func (f *faultFS) open(open func(string, int, os.FileMode) (File, error), name string, flag int, perm os.FileMode) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := open(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{f: file, inj: f.inj}, nil
}

func (f *faultFS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, oldname); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

func (f *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir, perm)
}

func (f *faultFS) List(dir string) ([]string, error) {
	if err := f.check(OpList, dir); err != nil {
		return nil, err
	}
	return f.fs.List(dir)
}

func (f *faultFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := f.check(OpList, dir); err != nil {
		return nil, err
	}
	return f.fs.ReadDir(dir)
}

func (f *faultFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.fs.Stat(name)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

func (f *faultFS) Lock(name string, holder string) (io.Closer, error) {
	if err := f.check(OpLock, name); err != nil {
		return nil, err
	}
	return f.fs.Lock(name, holder)
}

// faultFile is a File opened through a faultFS.
type faultFile struct {
	f   File
	inj Injector
}

var _ File = (*faultFile)(nil)

func (f *faultFile) check(op Op, off int64, n int) error {
	_, err := f.inj(op, f.f.Name(), off, n)
	return injected(op, f.f.Name(), err)
}

// clampAllowed limits an injector's allowed count to [0, n).
func clampAllowed(allowed, n int) int {
	return max(0, min(allowed, n-1))
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	allowed, err := f.inj(OpRead, f.f.Name(), off, len(p))
	if err == nil {
		return f.f.ReadAt(p, off)
	}
	n := 0
	if allowed = clampAllowed(allowed, len(p)); allowed > 0 {
		var rerr error
		if n, rerr = f.f.ReadAt(p[:allowed], off); rerr != nil && rerr != io.EOF {
			return n, rerr
		}
	}
	return n, injected(OpRead, f.f.Name(), err)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	allowed, err := f.inj(OpWrite, f.f.Name(), off, len(p))
	if err == nil {
		return f.f.WriteAt(p, off)
	}
	n := 0
	if allowed = clampAllowed(allowed, len(p)); allowed > 0 {
		var werr error
		if n, werr = f.f.WriteAt(p[:allowed], off); werr != nil {
			return n, werr
		}
	}
	return n, injected(OpWrite, f.f.Name(), err)
}

func (f *faultFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	allowed, err := f.inj(OpWrite, f.f.Name(), off, total)
	if err == nil {
		return f.f.WritevAt(bufs, off)
	}
	n := 0
	if allowed = clampAllowed(allowed, total); allowed > 0 {
		var prefix [][]byte
		for _, b := range bufs {
			if allowed == 0 {
				break
			}
			k := min(len(b), allowed)
			prefix = append(prefix, b[:k])
			allowed -= k
		}
		var werr error
		if n, werr = f.f.WritevAt(prefix, off); werr != nil {
			return n, werr
		}
	}
	return n, injected(OpWrite, f.f.Name(), err)
}

func (f *faultFile) Sync() error {
	if err := f.check(OpSync, 0, 0); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.check(OpTruncate, size, 0); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *faultFile) Preallocate(off, n int64) error {
	if err := f.check(OpPreallocate, off, int(n)); err != nil {
		return err
	}
	return f.f.Preallocate(off, n)
}

func (f *faultFile) Size() (int64, error) {
	if err := f.check(OpStat, 0, 0); err != nil {
		return 0, err
	}
	return f.f.Size()
}

func (f *faultFile) Name() string { return f.f.Name() }

func (f *faultFile) Close() error {
	ierr := f.check(OpClose, 0, 0)
	err := f.f.Close()
	if ierr != nil {
		return ierr
	}
	return err
}
