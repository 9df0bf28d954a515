package frame

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strconv"
)

// File header layout. These constants are part of the wire format; they
// must not change.
//
//	offset  size  field
//	     0     8  magic "APNDLOG\x00"
//	     8     2  version (Version)
//	    10     2  file kind (FileKind)
//	    12     4  reserved, zero
//	    16     8  first sequence number of the file
//	    24     4  masked CRC-32C of [0:24)
//	    28    16  log ID (all zero: none)
//	    44     4  masked CRC-32C of [28:44) (zero with no log ID)
//	    48    16  zero
//	    64    20  Mark slot: durableEnd u64, nextSeq u64, masked CRC-32C of
//	              the 16 bytes before it (all zero: no mark)
//	    84  4012  zero, up to FileHeaderSize where frames start
const (
	// FileHeaderSize is the size of the header region at the start of
	// every file; the first frame starts at this offset.
	FileHeaderSize = 4096
	// Version is the file format version this package writes and reads.
	Version = 1
	// MarkOffset is the file offset of the Mark slot.
	MarkOffset = 64
	// MarkSize is the encoded size of a Mark.
	MarkSize = 20

	// fileHeaderLen is the number of bytes PutFileHeader writes.
	fileHeaderLen = 64
	// fileHeaderCRCEnd is the end of the checksummed fields (and the
	// offset of their CRC).
	fileHeaderCRCEnd = 24
	// logIDOff is the offset of the log ID, and logIDEnd the end of it
	// and its CRC.
	logIDOff = 28
	logIDEnd = logIDOff + len(LogID{}) + 4
)

// LogID identifies a log. It is chosen at random when the log is created
// and written into the header of each of its files (and of its cursors'
// checkpoints), so that a file of another log copied among them is told
// apart rather than read as part of it. The zero LogID means none: the
// files of a log created before log IDs (version 1 files did not have
// them), which match any.
type LogID [16]byte

// NewLogID returns a random LogID, never the zero one.
func NewLogID() (LogID, error) {
	var id LogID
	for id.IsZero() {
		if _, err := rand.Read(id[:]); err != nil {
			return LogID{}, fmt.Errorf("frame: new log id: %w", err)
		}
	}
	return id, nil
}

// IsZero reports whether id is the zero LogID (none).
func (id LogID) IsZero() bool { return id == LogID{} }

// String returns id in hexadecimal, or "none" for the zero LogID.
func (id LogID) String() string {
	if id.IsZero() {
		return "none"
	}
	return hex.EncodeToString(id[:])
}

// Matches reports whether files with log IDs id and other may belong to
// one log: they are equal, or either is the zero LogID.
func (id LogID) Matches(other LogID) bool { return id == other || id.IsZero() || other.IsZero() }

// _magic identifies an appendlog file.
const _magic = "APNDLOG\x00"

// FileKind identifies what an appendlog file holds.
type FileKind uint16

// These constants are part of the wire format; they must not change. Zero is
// invalid.
const (
	// FileWAL is a write-ahead log segment.
	FileWAL FileKind = 1
	// FileShm is a shared-memory log file.
	FileShm FileKind = 2
)

// String returns the file kind's name, e.g. "wal".
func (k FileKind) String() string {
	switch k {
	case FileWAL:
		return "wal"
	case FileShm:
		return "shm"
	}
	return "FileKind(" + strconv.Itoa(int(k)) + ")"
}

// FileHeader holds the fields of a file header.
type FileHeader struct {
	// Kind is what the file holds; never zero in a valid header.
	Kind FileKind
	// FirstSeq is the sequence number of the file's first record.
	FirstSeq uint64
	// Log is the ID of the log the file belongs to; zero for none.
	Log LogID
}

// PutFileHeader writes the file header h to dst[0:64): magic, Version, kind,
// first sequence number and CRC, then the log ID and its CRC (both zero
// for the zero LogID), with [48:64) zeroed. It does not touch the Mark
// slot or the rest of the header region.
//
// REQUIRES: len(dst) >= 64. It panics otherwise.
func PutFileHeader(dst []byte, h FileHeader) {
	dst = dst[:fileHeaderLen]
	copy(dst[0:8], _magic)
	binary.LittleEndian.PutUint16(dst[8:10], Version)
	binary.LittleEndian.PutUint16(dst[10:12], uint16(h.Kind))
	binary.LittleEndian.PutUint32(dst[12:16], 0)
	binary.LittleEndian.PutUint64(dst[16:24], h.FirstSeq)
	binary.LittleEndian.PutUint32(dst[24:28], crcOf(dst[:fileHeaderCRCEnd]))
	clear(dst[logIDOff:])
	if !h.Log.IsZero() {
		copy(dst[logIDOff:], h.Log[:])
		binary.LittleEndian.PutUint32(dst[logIDEnd-4:], crcOf(dst[logIDOff:logIDEnd-4]))
	}
}

// DecodeFileHeader decodes the file header at the start of b, which must
// hold at least its first 28 bytes; the log ID is read only from a b of
// 48 bytes or more (the zero LogID otherwise). It returns ErrTruncated if
// b is shorter, ErrBadMagic if b does not start with the magic, an error
// wrapping ErrVersion (naming the version found) for another version,
// ErrChecksum (wrapped, naming the log ID, for that field's), or an error
// wrapping ErrKind for file kind 0.
func DecodeFileHeader(b []byte) (FileHeader, error) {
	if len(b) < fileHeaderCRCEnd+4 {
		return FileHeader{}, ErrTruncated
	}
	if string(b[0:8]) != _magic {
		return FileHeader{}, ErrBadMagic
	}
	if v := binary.LittleEndian.Uint16(b[8:10]); v != Version {
		return FileHeader{}, fmt.Errorf("%w %d (want %d)", ErrVersion, v, Version)
	}
	if binary.LittleEndian.Uint32(b[24:28]) != crcOf(b[:fileHeaderCRCEnd]) {
		return FileHeader{}, ErrChecksum
	}
	h := FileHeader{
		Kind:     FileKind(binary.LittleEndian.Uint16(b[10:12])),
		FirstSeq: binary.LittleEndian.Uint64(b[16:24]),
	}
	if h.Kind == 0 {
		return FileHeader{}, fmt.Errorf("%w: file kind 0", ErrKind)
	}
	if len(b) >= logIDEnd && lastNonZero(b[logIDOff:logIDEnd]) >= 0 {
		stored := binary.LittleEndian.Uint32(b[logIDEnd-4:])
		if stored != crcOf(b[logIDOff:logIDEnd-4]) {
			return FileHeader{}, fmt.Errorf("%w: log id at offset %d", ErrChecksum, logIDOff)
		}
		copy(h.Log[:], b[logIDOff:])
		if h.Log.IsZero() {
			// A zero ID with a CRC: the CRC of none is not written.
			return FileHeader{}, fmt.Errorf("%w: log id at offset %d", ErrChecksum, logIDOff)
		}
	}
	return h, nil
}

// Mark records how far a file is known to be durable. It lives in the Mark
// slot at MarkOffset of the file header region and is rewritten in place;
// its own CRC tells a torn rewrite from a valid one.
type Mark struct {
	// DurableEnd is the file offset up to which data is known durable.
	DurableEnd int64
	// NextSeq is the sequence number after the last durable record.
	NextSeq uint64
}

// PutMark writes m to dst[0:MarkSize): DurableEnd, NextSeq and the masked
// CRC-32C of those 16 bytes.
//
// REQUIRES: len(dst) >= MarkSize. It panics otherwise.
func PutMark(dst []byte, m Mark) {
	dst = dst[:MarkSize]
	binary.LittleEndian.PutUint64(dst[0:8], uint64(m.DurableEnd))
	binary.LittleEndian.PutUint64(dst[8:16], m.NextSeq)
	binary.LittleEndian.PutUint32(dst[16:20], crcOf(dst[:16]))
}

// DecodeMark decodes the Mark at the start of b. ok is false when there is
// no valid mark: b is shorter than MarkSize, the slot is all zero, or its
// CRC does not match.
func DecodeMark(b []byte) (m Mark, ok bool) {
	if len(b) < MarkSize {
		return Mark{}, false
	}
	b = b[:MarkSize]
	if lastNonZero(b) < 0 || binary.LittleEndian.Uint32(b[16:20]) != crcOf(b[:16]) {
		return Mark{}, false
	}
	return Mark{
		DurableEnd: int64(binary.LittleEndian.Uint64(b[0:8])),
		NextSeq:    binary.LittleEndian.Uint64(b[8:16]),
	}, true
}

// crcOf returns the masked CRC-32C of b.
func crcOf(b []byte) uint32 {
	return Mask(crc32.Checksum(b, _crcTable))
}
