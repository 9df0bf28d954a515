package writer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/appendlog/appendlog/internal/vfs"
)

// fileSink writes the ring's bytes to a regular file with positional
// writes (pwrite, or pwritev when the range wraps around the ring) at the
// offset it tracks, starting at the file's size when opened. Its methods
// run on the flusher goroutine. Every error is sticky: a failed write or
// fdatasync may have lost data the page cache held.
//
// Before each write it reads the file's size (fstat): a file shorter than
// what the sink wrote was truncated by another program (logrotate's
// copytruncate), and writing at the sink's offset would leave a hole of
// zero bytes; the sink refuses instead, with an error wrapping
// ErrTruncated.
//
// A path that is not a regular file (a device such as /dev/null) has no
// size to check and no durability to ask for: the sink writes to it and its
// Sync does nothing, as syncFunc does for such files. (A FIFO or a terminal
// takes no positional writes: the first write fails with ESPIPE.)
type fileSink struct {
	f       vfs.File
	off     int64     // file offset of the next byte. Flusher only.
	iov     [2][]byte // scratch for WritevAt, to avoid an allocation per flush
	special bool      // not a regular file: no truncation check, no fdatasync
	// failed is set when a write failed: the file may hold part of it
	// past off (a disk filled up mid-write), which close cuts away.
	failed bool
}

func openFileSink(fsys vfs.FS, path string, perm os.FileMode) (*fileSink, error) {
	// The path is looked at before it is opened: once open, the file may
	// be renamed away (logrotate) and the path name nothing, or another
	// file. A missing file is created, and is a regular one.
	special := false
	if st, err := fsys.Stat(path); err == nil {
		special = !st.Mode().IsRegular()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("writer: %w", err)
	}
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: %w", err)
	}
	if special {
		return &fileSink{f: f, special: true}, nil
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: %w", err)
	}
	return &fileSink{f: f, off: size}, nil
}

func (s *fileSink) Write(pos uint64, a, b []byte) error {
	if !s.special {
		size, err := s.f.Size()
		if err != nil {
			return fmt.Errorf("writer: %w", namePath("stat", s.f.Name(), err))
		}
		if size < s.off {
			return &truncatedError{path: s.f.Name(), size: size, off: s.off}
		}
	}
	var err error
	if len(b) == 0 {
		_, err = s.f.WriteAt(a, s.off)
	} else {
		s.iov[0], s.iov[1] = a, b
		_, err = s.f.WritevAt(s.iov[:], s.off)
		s.iov[0], s.iov[1] = nil, nil // do not keep the ring reachable from here
	}
	if err != nil {
		s.failed = true
		return fmt.Errorf("writer: at offset %d: %w", s.off, namePath("write", s.f.Name(), err))
	}
	s.off += int64(len(a) + len(b))
	return nil
}

func (s *fileSink) Sync() error {
	if s.special {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("writer: %w", namePath("fdatasync", s.f.Name(), err))
	}
	return nil
}

// close closes the file. After a failed write it first cuts the file
// back to the end of the last write that succeeded: the part of the failed
// one the file took (a torn record, when the disk filled up) would
// otherwise stay, and the records of a later OpenFile would be appended
// after it. The Ring has failed with the write's error, which says so.
func (s *fileSink) close() error {
	if s.failed && !s.special {
		if size, err := s.f.Size(); err == nil && size > s.off {
			s.f.Truncate(s.off) // best effort: the Ring's error stands
		}
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	return nil
}

// namePath returns err, which op on the file name returned, as a
// *fs.PathError naming the operation and the file: as it is if it is one
// already, so that messages name the file once.
func namePath(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// truncatedError is the refusal to write to a file that another program
// truncated under the Ring.
type truncatedError struct {
	path      string
	size, off int64
	direct    bool // the Ring has Direct, which cannot Reopen
}

func (e *truncatedError) Error() string {
	instead := "rename the file and call Ring.Reopen instead"
	if e.direct {
		instead = "rename the file and open it again instead (Ring.Reopen needs a Ring without Direct)"
	}
	return fmt.Sprintf("writer: %s was truncated to %d bytes by another program after the Ring wrote %d "+
		"(logrotate copytruncate?): %s", e.path, e.size, e.off, instead)
}

func (e *truncatedError) Unwrap() error { return ErrTruncated }
