package shmlog

import (
	"errors"
	"fmt"
)

// These errors are returned (wrapped) by Open, OpenReader and Verify when a
// file is not a usable shmlog file; the *CorruptError wrapping them names
// the file and byte offset.
var (
	// ErrNotShm means the file is an appendlog file of another kind.
	ErrNotShm = errors.New("shmlog: not a shared-memory log file")
	// ErrHeader means the shmlog fields of the header page are damaged or
	// inconsistent.
	ErrHeader = errors.New("shmlog: bad header")
	// ErrTruncated means a file is shorter than its header says.
	ErrTruncated = errors.New("shmlog: file truncated")
	// ErrFrame means a frame in the data region does not decode or its
	// checksum does not match.
	ErrFrame = errors.New("shmlog: bad frame")
)

// These errors are returned by Append, Reserve and Commit.
var (
	// ErrClosed is returned by calls on a closed Log or Reader.
	ErrClosed = errors.New("shmlog: closed")
	// ErrTooLarge means a record does not fit in one file.
	ErrTooLarge = errors.New("shmlog: record too large")
	// ErrPadded means another process padded over the claim before it was
	// committed (it judged the writer dead): the record is not in the log.
	ErrPadded = errors.New("shmlog: claim was padded over")
	// ErrNoSlot means every slot is held by a live process.
	ErrNoSlot = errors.New("shmlog: no free process slot")
	// ErrNilContext is returned by Sync and Reader.Wait when given a nil
	// context; the call does nothing else.
	ErrNilContext = errors.New("shmlog: nil context")
)

// CorruptError says where a file failed to decode.
type CorruptError struct {
	// File is the file's name.
	File string
	// Offset is the byte offset in the file.
	Offset int64
	// Err is the reason; it wraps one of the errors above or frame's.
	Err error
}

// Error implements error, e.g. "shmlog: /tmp/log: offset 10: shmlog: not a
// shared-memory log file".
func (e *CorruptError) Error() string {
	return fmt.Sprintf("shmlog: %s: offset %d: %v", e.File, e.Offset, e.Err)
}

// Unwrap returns e.Err.
func (e *CorruptError) Unwrap() error { return e.Err }

func corrupt(file string, off int64, err error) error {
	return &CorruptError{File: file, Offset: off, Err: err}
}
