package wal

import (
	"errors"
	"fmt"
)

// These errors are returned by Log methods.
var (
	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("wal: log closed")
	// ErrTooLarge is returned by Append and AppendBatch when a record or
	// batch exceeds what the buffer can hold (Options.MaxRecordSize, and
	// half of Options.BufferSize for a whole batch).
	ErrTooLarge = errors.New("wal: record too large")
	// ErrNotAppended is returned by WaitDurable for a sequence number that
	// has not been appended yet.
	ErrNotAppended = errors.New("wal: sequence number not appended yet")
)

// CorruptionError reports damage that recovery must not repair silently:
// bytes that do not decode at a place where acknowledged data lives, a
// missing segment, or an inconsistent footer. Segment is the file's base
// name and Offset the byte offset of the first bad byte in it.
type CorruptionError struct {
	Dir     string
	Segment string
	Offset  int64
	Err     error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corruption in %s at byte offset %d: %v", e.Segment, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// IsCorrupt reports whether err is, or wraps, a *CorruptionError.
func IsCorrupt(err error) bool {
	var c *CorruptionError
	return errors.As(err, &c)
}
