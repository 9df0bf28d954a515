package frame

import (
	"errors"
	"fmt"
)

// These errors are returned by Decode, and wrapped in a *Damage by Scanner,
// when bytes do not decode as a frame.
var (
	// ErrZeroed means the 16 header bytes are all zero: unwritten space.
	ErrZeroed = errors.New("frame: zeroed header")
	// ErrTruncated means the input ends inside a header or a payload.
	ErrTruncated = errors.New("frame: truncated")
	// ErrKind means the kind is invalid (zero in a non-zero header).
	ErrKind = errors.New("frame: invalid kind")
	// ErrChecksum means the stored CRC does not match the header and payload.
	ErrChecksum = errors.New("frame: checksum mismatch")
	// ErrTooLarge means the payload length exceeds the scanner's limit.
	ErrTooLarge = errors.New("frame: payload too large")
)

// These errors are returned by DecodeFileHeader and DecodeFooter (which also
// return ErrChecksum, ErrTruncated and the Decode errors above).
var (
	// ErrBadMagic means the file does not start with the appendlog magic.
	ErrBadMagic = errors.New("frame: not an appendlog file")
	// ErrVersion means the file header has a version this package does not
	// read. The returned error wraps it and names the version found.
	ErrVersion = errors.New("frame: unsupported version")
	// ErrFooter means the bytes are a valid frame but not a consistent
	// segment footer.
	ErrFooter = errors.New("frame: invalid segment footer")
)

// Damage describes where and how a frame stream stopped being decodable.
// Scanner.Err returns it; use errors.As or IsDamage to detect it.
type Damage struct {
	// Offset is the file offset of the first byte that does not decode.
	Offset int64
	// Err is the reason: ErrZeroed, ErrTruncated, ErrKind, ErrChecksum or
	// ErrTooLarge.
	Err error
	// Extent is the number of bytes from Offset to the last non-zero byte
	// of the stream, inclusive; 0 if everything from Offset on is zero.
	Extent int64
}

// Error implements error, e.g.
// "frame: checksum mismatch at offset 4242 (132 bytes to end)".
func (d *Damage) Error() string {
	msg := "frame: damage"
	if d.Err != nil {
		msg = d.Err.Error()
	}
	return fmt.Sprintf("%s at offset %d (%d bytes to end)", msg, d.Offset, d.Extent)
}

// Unwrap returns d.Err, so errors.Is(d, ErrChecksum) works.
func (d *Damage) Unwrap() error { return d.Err }

// IsDamage reports whether err is or wraps a *Damage.
func IsDamage(err error) bool {
	var d *Damage
	return errors.As(err, &d)
}
