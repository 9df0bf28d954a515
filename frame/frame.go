package frame

import (
	"encoding/binary"
	"hash/crc32"
	"strconv"
)

// These constants are part of the wire format; they must not change.
const (
	// HeaderSize is the size of a frame header, and the whole per-frame
	// overhead: frames are not padded.
	HeaderSize = 16
	// MaxPayload is the largest payload a frame can carry (30 bits of
	// length).
	MaxPayload = 1<<30 - 1

	// crcMaskDelta is added to the rotated CRC by Mask (LevelDB's value).
	crcMaskDelta = 0xa282ead8
	// kindShift positions the kind in the top 2 bits of the length word.
	kindShift = 30
)

// Kind is the type of a frame, stored in the top 2 bits of the length word.
type Kind uint8

// These constants are part of the wire format; they must not change.
const (
	// KindInvalid is reserved so that zero-filled space never decodes.
	KindInvalid Kind = 0
	// KindRecord is a user record.
	KindRecord Kind = 1
	// KindPadding fills space; readers skip it.
	KindPadding Kind = 2
	// KindFooter is a segment footer (see Footer).
	KindFooter Kind = 3
)

// String returns the kind's lower-case name, e.g. "record".
func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid"
	case KindRecord:
		return "record"
	case KindPadding:
		return "padding"
	case KindFooter:
		return "footer"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// _crcTable is the CRC-32C (Castagnoli) table; crc32 uses the hardware
// instruction where available when given this table. Never written.
var _crcTable = crc32.MakeTable(crc32.Castagnoli)

// Mask returns the masked form of a CRC, as stored on disk. Masking (as in
// LevelDB and Pebble) makes the CRC of a string that itself contains
// embedded CRCs well behaved.
func Mask(crc uint32) uint32 {
	return (crc>>15 | crc<<17) + crcMaskDelta
}

// Unmask is the inverse of Mask.
func Unmask(m uint32) uint32 {
	rot := m - crcMaskDelta
	return rot>>17 | rot<<15
}

// Size returns the encoded size of a frame with a payloadLen-byte payload:
// HeaderSize + payloadLen.
func Size(payloadLen int) int { return HeaderSize + payloadLen }

// checksum returns the masked CRC-32C of hdr[4:16] followed by payload.
func checksum(hdr, payload []byte) uint32 {
	c := crc32.Update(0, _crcTable, hdr[4:HeaderSize])
	return Mask(crc32.Update(c, _crcTable, payload))
}

// PutHeader fills hdr[:HeaderSize] with the header of a frame of kind k,
// sequence number seq and the given payload, including the CRC over
// hdr[4:16] and payload. The payload is not copied. It does not allocate.
//
// REQUIRES: len(hdr) >= HeaderSize, len(payload) <= MaxPayload,
// KindRecord <= k <= KindFooter. It panics otherwise.
func PutHeader(hdr []byte, k Kind, seq uint64, payload []byte) {
	_ = hdr[HeaderSize-1]
	if k == KindInvalid || k > KindFooter {
		panic("frame: PutHeader: invalid kind " + k.String())
	}
	if len(payload) > MaxPayload {
		panic("frame: PutHeader: payload too large: " + strconv.Itoa(len(payload)))
	}
	binary.LittleEndian.PutUint32(hdr[4:8], uint32(k)<<kindShift|uint32(len(payload)))
	binary.LittleEndian.PutUint64(hdr[8:16], seq)
	binary.LittleEndian.PutUint32(hdr[0:4], checksum(hdr, payload))
}

// Encode writes a KindRecord frame with sequence number seq and the given
// payload to the start of dst and returns its size, Size(len(payload)).
// payload may already sit at dst[HeaderSize:] (encoding in place). It does
// not allocate.
//
// REQUIRES: len(dst) >= Size(len(payload)), len(payload) <= MaxPayload. It
// panics otherwise.
func Encode(dst []byte, seq uint64, payload []byte) int {
	return EncodeKind(dst, KindRecord, seq, payload)
}

// EncodeKind is like Encode but writes a frame of kind k.
//
// REQUIRES: as Encode, and KindRecord <= k <= KindFooter.
func EncodeKind(dst []byte, k Kind, seq uint64, payload []byte) int {
	n := HeaderSize + len(payload)
	dst = dst[:n]
	copy(dst[HeaderSize:], payload)
	PutHeader(dst, k, seq, dst[HeaderSize:])
	return n
}

// Frame is a decoded frame.
type Frame struct {
	// Kind is the frame's kind, never KindInvalid.
	Kind Kind
	// Seq is the sequence number stored in the frame.
	Seq uint64
	// Payload aliases the decoded buffer.
	Payload []byte
}

// Decode decodes the frame at the start of b and returns it with its encoded
// size n. The Frame's Payload aliases b. On failure it returns one of
// ErrZeroed (the 16 header bytes are all zero), ErrTruncated (b is shorter
// than the header, or than the header plus the stored length), ErrKind (kind
// 0 in a non-zero header) or ErrChecksum. Decode never returns ErrTooLarge:
// every 30-bit length is within MaxPayload. It never panics and does not
// allocate.
func Decode(b []byte) (f Frame, n int, err error) {
	return decode(b, MaxPayload)
}

// decode is Decode with a payload limit; a longer stored length is
// ErrTooLarge.
func decode(b []byte, maxPayload int) (f Frame, n int, err error) {
	if len(b) < HeaderSize {
		return Frame{}, 0, ErrTruncated
	}
	if binary.LittleEndian.Uint64(b[0:8])|binary.LittleEndian.Uint64(b[8:16]) == 0 {
		return Frame{}, 0, ErrZeroed
	}
	word := binary.LittleEndian.Uint32(b[4:8])
	k := Kind(word >> kindShift)
	length := int(word & MaxPayload)
	if k == KindInvalid {
		return Frame{}, 0, ErrKind
	}
	if length > maxPayload {
		return Frame{}, 0, ErrTooLarge
	}
	if len(b)-HeaderSize < length {
		return Frame{}, 0, ErrTruncated
	}
	n = HeaderSize + length
	payload := b[HeaderSize:n:n]
	if binary.LittleEndian.Uint32(b[0:4]) != checksum(b, payload) {
		return Frame{}, 0, ErrChecksum
	}
	return Frame{Kind: k, Seq: binary.LittleEndian.Uint64(b[8:16]), Payload: payload}, n, nil
}
