package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/appendlog/appendlog/frame"
)

// A gap records, in the log itself, a range of sequence numbers whose
// records were lost to damage and cut by a forced Repair. It is a
// frame.KindPadding frame whose seq field is the first missing sequence
// number and whose 16-byte payload is:
//
//	+--------------------+------------------+
//	| magic "APNDGAP\x00" | count (8B, LE)   |
//	+--------------------+------------------+
//
// so records First .. First+count-1 are missing and the next frame has
// sequence number First+count. A sealed segment's footer counts the gap's
// sequence numbers (FirstSeq+Count is still the next segment's first), and
// a tail's durable mark includes them.
//
// These constants are part of the wire format; they must not change.
const (
	_gapMagic       = "APNDGAP\x00"
	_gapPayloadSize = 16
	// gapFrameSize is the encoded size of a gap frame.
	gapFrameSize = frame.HeaderSize + _gapPayloadSize
)

// putGap encodes a gap frame for records [first, first+count) into
// dst[:gapFrameSize].
func putGap(dst []byte, first, count uint64) {
	var p [_gapPayloadSize]byte
	copy(p[:8], _gapMagic)
	binary.LittleEndian.PutUint64(p[8:], count)
	frame.EncodeKind(dst, frame.KindPadding, first, p[:])
}

// decodeGap returns the number of missing records a gap frame records, or
// ok false if fr is not a gap frame.
func decodeGap(fr frame.Frame) (count uint64, ok bool) {
	if fr.Kind != frame.KindPadding || len(fr.Payload) != _gapPayloadSize || !bytes.Equal(fr.Payload[:8], []byte(_gapMagic)) {
		return 0, false
	}
	count = binary.LittleEndian.Uint64(fr.Payload[8:])
	if count == 0 || fr.Seq+count < fr.Seq {
		return 0, false
	}
	return count, true
}

// GapError reports a recorded gap: records First to End-1 were lost to
// damage, and a forced Repair cut them and recorded the range at byte
// Offset of Segment. A Reader returns it from Err after Next returned
// false; calling Next again continues with record End.
type GapError struct {
	Segment    string
	Offset     int64
	First, End uint64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("wal: gap in the log: %s lost to damage and cut by repair (recorded at byte offset %d of segment %s)",
		e.Range(), e.Offset, e.Segment)
}

// Range describes the missing records, e.g. "records 5..9 (5 records)".
func (e *GapError) Range() string {
	n := e.End - e.First
	if n == 1 {
		return fmt.Sprintf("record %d (1 record)", e.First)
	}
	return fmt.Sprintf("records %d..%d (%d records)", e.First, e.End-1, n)
}

// IsGap reports whether err is, or wraps, a *GapError: a Reader stopped at
// a recorded gap and Next goes on after it.
func IsGap(err error) bool {
	var g *GapError
	return errors.As(err, &g)
}
