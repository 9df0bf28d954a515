package payload

import (
	"errors"
	"fmt"
)

// These errors are returned by Encode, Stamp, Append, NewTags and
// NewChecker for arguments outside the format.
var (
	ErrSize    = errors.New("payload: record size out of range")
	ErrWriter  = errors.New("payload: writer id out of range")
	ErrCounter = errors.New("payload: counter out of range")
	ErrWriters = errors.New("payload: writer count out of range")
)

// Kind says what is wrong with a record or with the order of records.
type Kind int

// Kinds of problems. Torn, Foreign, Checksum and Filler concern one record's
// bytes; Missing, Reordered, Duplicate and Extra concern a writer's order
// and counts.
const (
	// Torn is a record that is not whole: shorter than its size, not ending
	// in '\n', a tail that is not a record's, or a stream ending inside a
	// record.
	Torn Kind = iota + 1
	// Foreign is bytes that are no record at all: zeros, garbage, a head
	// that is not one, or a record of a writer that did not run.
	Foreign
	// Checksum is a record whose check does not match its head and length:
	// a damaged head or check, or a record spliced from two.
	Checksum
	// Filler is a record with a wrong filler byte: a flipped bit, or the
	// bytes of another record inside it.
	Filler
	// Missing is a record that was written but is not there.
	Missing
	// Reordered is a record that comes before a record its writer wrote
	// earlier.
	Reordered
	// Duplicate is a record found twice in a row.
	Duplicate
	// Extra is a record numbered past the last one its writer wrote, or
	// more records of a writer than it wrote.
	Extra
)

// String returns the kind's name as used in reports.
func (k Kind) String() string {
	switch k {
	case Torn:
		return "torn record"
	case Foreign:
		return "foreign bytes"
	case Checksum:
		return "checksum mismatch"
	case Filler:
		return "filler mismatch"
	case Missing:
		return "missing record"
	case Reordered:
		return "reordered record"
	case Duplicate:
		return "duplicate record"
	case Extra:
		return "extra record"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// A Problem is one thing wrong with a record or with the order of records:
// what (Kind, Detail) and where.
type Problem struct {
	Kind Kind
	// Record is the index of the record in the order checked, from 0, or
	// -1 when the problem has no place (a count that does not add up).
	Record int64
	// Offset is the record's byte offset in its file or stream, or -1
	// (records located by Seq, or no place).
	Offset int64
	// Seq is the record's sequence number in a log, or 0.
	Seq uint64
	// Byte is the offset of the first wrong byte within the record, or -1.
	Byte int
	// Writer is the writer the problem concerns, or -1 if unknown.
	Writer int
	// Detail says exactly what was wrong.
	Detail string
}

// Error returns "<kind> at <where>: <detail>".
func (p Problem) Error() string {
	at := ""
	switch {
	case p.Seq > 0:
		at = fmt.Sprintf(" at seq %d", p.Seq)
	case p.Offset >= 0:
		at = fmt.Sprintf(" at byte %d", p.Offset)
	case p.Record >= 0:
		at = fmt.Sprintf(" at record %d", p.Record)
	}
	return fmt.Sprintf("%s%s: %s", p.Kind, at, p.Detail)
}
