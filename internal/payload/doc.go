// Package payload is appendlog's one verifiable record: the payload every
// benchmark, load generator and test writes, so that one checker can prove
// that what came back is exactly what was written, record by record. It
// serves framed binary logs (wal, shmlog: the frame gives the length) and
// newline-delimited text logs (writer: each record is one greppable line)
// with one encoding: every record is printable ASCII ending in '\n'.
//
// # Records
//
// A record of n bytes, n ≥ [MinSize], written by writer w (0 ≤ w <
// [MaxWriters]) as that writer's counter c (0 ≤ c ≤ [MaxCounter]):
//
//	+--------+---+-------------+---+------- ... -------+---+----------+----+
//	| writer | ␠ | counter     | ␠ | filler            | ␠ | check    | \n |
//	| 4 hex  |   | 12 hex      |   | fill(i)           |   | 8 hex    |    |
//	+--------+---+-------------+---+------- ... -------+---+----------+----+
//	0        4   5             17  18                 n-10 n-9        n-1  n
//
// For example the 40-byte record of writer 3, counter 42 (and its newline):
//
//	0003 00000000002a yzABCDEFGHIJ 374b21da
//
// Hex digits are lowercase, most significant first, zero-padded.
//
//   - check is a 32-bit hash of (w, c, n): with z = w<<48 | c XOR
//     n×0x9e3779b97f4a7c15, the high half of (z XOR z>>29) ×
//     0xbf58476d1ce4e5b9 (mod 2⁶⁴). It ties the head to the tail and to the
//     record's length, so a record spliced from two, cut short or
//     lengthened fails it. It hashes the parsed head rather than
//     checksumming its bytes: the head is parsed strictly (lowercase hex
//     only), so its bytes and (w, c) determine each other, and a multiply
//     costs less than a CRC call.
//   - filler byte i (18 ≤ i < n-10) is fill(i) = "ghij…xyzABC…XYZ."[i mod
//     47]: it depends on the position only, has no hex digit (grep for a
//     head finds only that record) and no zero (a zero-filled hole is never
//     filler). Byte n-10 is a space; at n = MinSize = 27 it is the head's.
//
// Every byte of a record is therefore fixed by (w, c, n): [Decode] checks
// all of them (hex digits are lowercase only), and a record passes only if it is byte for byte the one
// [Encode] wrote. Encoding costs O(n) once per buffer ([Encode]) and O(1) per
// record after that ([Stamp] rewrites the head and check). Neither
// allocates.
//
// # Tiny records
//
// Records of 1 to MinSize-1 bytes (fixed-size streams only: a 1-byte shared
// log append, say) cannot hold a head. Each of their bytes is one tag, 1 +
// w×m + c mod m for writer w and counter c, where m = 255 / writers (see
// [Tags]); 0 never occurs, so zero-filled holes are caught. A [Checker]
// checks that every byte of a record is the same tag, that the tag names a
// writer that ran, per-writer order modulo m, and exact counts. There is no
// checksum: content beyond the tag cannot be checked at these sizes.
//
// # Checking
//
// A [Checker] follows the records of one output in order: it decodes each
// (checksum, filler, torn, foreign), checks each writer's counters (0, 1, 2,
// … with nothing missing, repeated or out of order; or only increasing, for a
// writer that may drop records; optionally a fall back to 0 as a restart),
// counts, and reports every problem with where (record index, byte offset or
// sequence number, byte within the record) and what ([Kind]). [Checker.Gap]
// marks records known to be lost (a recorded gap in a log). It is also an
// [io.Writer] that splits a byte stream into fixed-size records or lines.
//
// # Concurrency
//
// [Encode], [Stamp], [Append] and [Decode] are safe for concurrent use on
// distinct buffers. A Checker is not safe for concurrent use.
package payload
