// Package frame defines appendlog's one on-disk record format: the frame.
// The write-ahead log (wal) and the shared-memory log (shmlog) both store
// their records as frames behind the same file header. appendlog verify and
// dump read wal directories; a shared-memory log is checked by
// shmlog.Verify.
//
// The package is pure: it encodes into and decodes from caller-provided
// byte slices and reads from an [io.Reader]; it never opens, writes or syncs
// a file.
//
// # Frames
//
// A frame is a 16-byte header followed by its payload. In a wal segment
// frames follow each other with no padding in between, so the overhead is
// exactly [HeaderSize] bytes per record (shmlog starts each frame at a
// multiple of 8, see its package doc):
//
//	+-----------+---------------------------+-----------+--- ... ---+
//	| CRC (4B)  | kind<<30 | length (4B)    | seq (8B)  | payload   |
//	+-----------+---------------------------+-----------+--- ... ---+
//	0           4                           8           16          16+length
//
// All integers are little-endian.
//
//   - CRC is the CRC-32C (Castagnoli) of header bytes [4:16) followed by the
//     payload, masked as in LevelDB and Pebble (see [Mask]) so that a frame
//     embedded in a payload does not checksum itself.
//   - The top 2 bits of the word at [4:8) are the [Kind]; the low 30 bits
//     are the payload length, at most [MaxPayload].
//   - seq is the sequence number the writer gave the frame. The format does
//     not require sequence numbers to be contiguous; callers check that.
//
// Zero is invalid: [KindInvalid] is 0, so a header of zero bytes (such as
// the tail of a preallocated, zero-filled file) never decodes as a frame.
// [Decode] reports it as [ErrZeroed], and any other header with kind 0 as
// [ErrKind]. [KindPadding] frames fill space that readers skip;
// a [KindFooter] frame seals a segment (see [Footer]).
//
// # Scanning and damage
//
// A [Scanner] reads consecutive frames from a stream and decides where the
// valid data ends:
//
//   - Clean end: EOF exactly at a frame boundary, or a zero header followed
//     by nothing but zero bytes up to EOF (a zero-filled, preallocated tail).
//     Fewer than [HeaderSize] bytes left, all zero, is also a clean end.
//   - Damage: anything else that does not decode (a zero header with
//     non-zero bytes after it, a truncated frame, an invalid kind, a
//     checksum mismatch, a length above the scanner's limit). The scanner
//     reads on to EOF only to find the last non-zero byte, and reports a
//     [*Damage] with the offset of the first undecodable byte and the extent
//     of the non-zero bytes from there. A torn tail (the last write of a
//     crash) is Damage whose bytes all lie after the last durable point;
//     telling a torn tail from corruption in the middle is the caller's job.
//
// # Files
//
// Every appendlog file starts with a [FileHeaderSize]-byte header region
// (magic, version, file kind, first sequence number, and a [Mark] slot, see
// [PutFileHeader]); frames start at offset [FileHeaderSize]. A wal segment
// keeps the rest of the region zero, and a sealed segment ends with exactly
// one footer frame ([FooterSize] bytes); a shmlog file keeps its own shared
// fields in the region after its first 128 bytes (see shmlog's package doc).
//
// # Concurrency and lifetimes
//
// The functions are safe for concurrent use on distinct buffers. A Scanner
// is not safe for concurrent use. A decoded [Frame]'s Payload aliases the
// decoded buffer; a Scanner's frame is valid until the next call to Next.
package frame
