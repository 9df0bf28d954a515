package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/appendlog/appendlog/frame"
)

// These errors are returned by Log methods.
var (
	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("wal: log closed")
	// ErrTooLarge is returned by Append and AppendBatch when a record or
	// batch exceeds what the buffer can hold (Options.MaxRecordSize, and
	// half of Options.BufferSize for a whole batch). Open, Readers, Verify
	// and Repair return it too, wrapped in an error naming the segment and
	// byte offset, for an intact record in the files that is longer than
	// Options.MaxRecordSize: the log was written with a larger one, and
	// must be read with one at least as large. It is never taken for
	// damage: nothing is cut for it.
	ErrTooLarge = errors.New("wal: record too large")
	// ErrNotAppended is returned by WaitDurable for a sequence number that
	// has not been appended yet.
	ErrNotAppended = errors.New("wal: sequence number not appended yet")
	// ErrNilContext is returned by Flush, Sync and WaitDurable when given a
	// nil context. The log is not failed by it.
	ErrNilContext = errors.New("wal: nil context")
	// ErrWoken is returned by Cursor.NextOrWake when its wake channel
	// fired before a record was visible. It is not a failure.
	ErrWoken = errors.New("wal: woken")
)

// These errors are returned by Open, OpenReader, Verify and Repair when the
// directory cannot be used as a log.
var (
	// ErrNotLog means the directory holds no segment and no LOCK file but
	// other files: it is something else, not an appendlog log (an empty
	// directory is a valid empty log). The returned error is a
	// *NotLogError, or a *StoreError for the root of a stream store.
	ErrNotLog = errors.New("wal: not an appendlog log")
	// ErrInUse means another Log or Repair, in this process or another,
	// holds the log's lock. The returned error names the lock file and the
	// holder written in it.
	ErrInUse = errors.New("wal: log is in use")
	// ErrForeign means a file among the log's own is of another log: a
	// segment, or a cursor's checkpoint, whose header names another log
	// ID than the log's other files (a copy from another log's
	// directory). The returned error names the file and both IDs. It is
	// not damage: Repair leaves it alone, and nothing in it is read as
	// the log's. Move the file out.
	ErrForeign = errors.New("wal: file of another log")
)

// logIDs follows the log ID of a log's segments as their headers are
// read: the first that is not zero is the log's, and a segment with
// another is ErrForeign.
type logIDs struct {
	id   frame.LogID
	from string // the segment id was read from
}

// see checks the log ID of the segment at path: an error wrapping
// ErrForeign if it names another log than the segments seen before.
func (c *logIDs) see(path string, id frame.LogID) error {
	if !id.Matches(c.id) {
		return foreignError(path, id, c.from, c.id)
	}
	if c.id.IsZero() {
		c.id, c.from = id, path
	}
	return nil
}

// foreignError reports two segments of one directory with different log
// IDs: the one at path has got, the one at wantPath has want. Which of the
// two was copied in cannot be told from them, so both are named.
func foreignError(path string, got frame.LogID, wantPath string, want frame.LogID) error {
	return fmt.Errorf("%w: %s has log id %s, but %s has log id %s: segments of two logs are mixed (one copied from another log?)", ErrForeign, path, got, wantPath, want)
}

// NotLogError reports a directory that is not an appendlog log: it has no
// segment and no LOCK file that appendlog wrote, but other files.
// errors.Is(err, ErrNotLog) matches it.
type NotLogError struct {
	Dir string
	// Count is the number of other files; Names lists the first few.
	Count int
	Names []string
}

func (e *NotLogError) Error() string {
	return fmt.Sprintf("wal: not an appendlog log: %s has no segments and no appendlog LOCK file but %s", e.Dir, e.Files())
}

// Files describes the foreign files, e.g. `3 other files (a, b, c)`.
func (e *NotLogError) Files() string {
	what := "other files"
	if e.Count == 1 {
		what = "other file"
	}
	list := strings.Join(e.Names, ", ")
	if e.Count > len(e.Names) {
		list += ", ..."
	}
	return fmt.Sprintf("%d %s (%s)", e.Count, what, list)
}

// Is reports whether target is ErrNotLog.
func (e *NotLogError) Is(target error) bool { return target == ErrNotLog }

// StoreError reports a directory that is the root of a stream store
// (package stream), not a log: its LOCK file would make it look like an
// empty log. The log of the store's stream NAME is Dir/streams/NAME/log.
// errors.Is(err, ErrNotLog) matches it.
type StoreError struct {
	Dir string
	// Count is the number of streams found; Logs lists the log
	// directories of the first few.
	Count int
	Logs  []string
}

func (e *StoreError) Error() string {
	msg := fmt.Sprintf("wal: %s is a stream store, not a log: the log of its stream NAME is %s", e.Dir, filepath.Join(e.Dir, storeStreams, "NAME", storeLog))
	switch {
	case e.Count == 0:
		return msg + " (it has no streams)"
	case e.Count > len(e.Logs):
		return fmt.Sprintf("%s (%d streams; their logs: %s, ...)", msg, e.Count, strings.Join(e.Logs, ", "))
	}
	return fmt.Sprintf("%s (its streams' logs: %s)", msg, strings.Join(e.Logs, ", "))
}

// Is reports whether target is ErrNotLog.
func (e *StoreError) Is(target error) bool { return target == ErrNotLog }

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
