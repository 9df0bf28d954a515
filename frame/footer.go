package frame

import (
	"encoding/binary"
	"fmt"
)

// These constants are part of the wire format; they must not change.
const (
	// footerPayloadSize is the payload size of a footer frame: firstSeq,
	// count and dataEnd, each a little-endian uint64.
	footerPayloadSize = 24
	// FooterSize is the encoded size of a segment footer frame.
	FooterSize = HeaderSize + footerPayloadSize
)

// Footer seals a segment. It is stored as the last frame of the file, of
// kind KindFooter, whose seq field is FirstSeq+Count (the next sequence
// number) and whose 24-byte payload is FirstSeq, Count and DataEnd.
type Footer struct {
	// FirstSeq is the sequence number of the segment's first record.
	FirstSeq uint64
	// Count is the number of records in the segment.
	Count uint64
	// DataEnd is the file offset of the footer frame: the end of the
	// record data.
	DataEnd int64
}

// PutFooter writes f as a footer frame to dst[0:FooterSize] and returns
// FooterSize. It does not allocate.
//
// REQUIRES: len(dst) >= FooterSize. It panics otherwise.
func PutFooter(dst []byte, f Footer) int {
	dst = dst[:FooterSize]
	p := dst[HeaderSize:]
	binary.LittleEndian.PutUint64(p[0:8], f.FirstSeq)
	binary.LittleEndian.PutUint64(p[8:16], f.Count)
	binary.LittleEndian.PutUint64(p[16:24], uint64(f.DataEnd))
	PutHeader(dst, KindFooter, f.FirstSeq+f.Count, p)
	return FooterSize
}

// DecodeFooter decodes the footer frame in the last FooterSize bytes of b
// (pass the tail of a file). It returns the Decode errors (ErrTruncated if
// b is shorter than FooterSize), or an error wrapping ErrFooter if the
// frame is not a footer, has the wrong size, or its seq is not
// FirstSeq+Count. Callers check DataEnd against the file size.
func DecodeFooter(b []byte) (Footer, error) {
	if len(b) < FooterSize {
		return Footer{}, ErrTruncated
	}
	b = b[len(b)-FooterSize:]
	fr, _, err := Decode(b)
	if err != nil {
		return Footer{}, err
	}
	if fr.Kind != KindFooter || len(fr.Payload) != footerPayloadSize {
		return Footer{}, fmt.Errorf("%w: %s frame with %d-byte payload", ErrFooter, fr.Kind, len(fr.Payload))
	}
	f := Footer{
		FirstSeq: binary.LittleEndian.Uint64(fr.Payload[0:8]),
		Count:    binary.LittleEndian.Uint64(fr.Payload[8:16]),
		DataEnd:  int64(binary.LittleEndian.Uint64(fr.Payload[16:24])),
	}
	if fr.Seq != f.FirstSeq+f.Count {
		return Footer{}, fmt.Errorf("%w: seq %d, want first %d + count %d", ErrFooter, fr.Seq, f.FirstSeq, f.Count)
	}
	return f, nil
}
