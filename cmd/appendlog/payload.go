package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Load payloads prove, record by record, that nothing was lost, torn, mixed
// up or reordered: each one names the writer goroutine that appended it and
// that writer's counter, carries filler derived from both, and a checksum
// over all of it. The layout (little-endian), at least payloadMinSize bytes:
//
//	+-----------+-------------+----------------+--- ... ---+
//	| CRC (4B)  | writer (4B) | counter (8B)   | filler    |
//	+-----------+-------------+----------------+--- ... ---+
//	0           4             8                16          len
//
// CRC is the CRC-32C (Castagnoli) of bytes [4:len). writer is the writer
// id; counter counts that writer's records from 0. filler is a splitmix64
// stream seeded from (writer, counter), so a payload whose header and body
// come from different records fails even if its CRC was recomputed.
//
// The layout is shared by load, verify --payloads and the crash tests; it
// must not change without changing all three.
const (
	payloadHeaderSize = 16
	// payloadMinSize is the smallest payload load writes: the header and at
	// least one filler word.
	payloadMinSize = payloadHeaderSize + 8
)

var _castagnoli = crc32.MakeTable(crc32.Castagnoli)

// These errors are returned by CheckPayload.
var (
	errPayloadSize     = errors.New("payload shorter than 24 bytes")
	errPayloadChecksum = errors.New("payload checksum mismatch")
	errPayloadFiller   = errors.New("payload filler does not match its writer and counter")
)

// EncodePayload fills p, which must be at least payloadMinSize bytes, with
// the payload of record counter of writer. It does not allocate.
func EncodePayload(p []byte, writer uint32, counter uint64) {
	_ = p[payloadMinSize-1]
	binary.LittleEndian.PutUint32(p[4:8], writer)
	binary.LittleEndian.PutUint64(p[8:16], counter)
	f := newFiller(writer, counter)
	body := p[payloadHeaderSize:]
	for len(body) >= 8 {
		binary.LittleEndian.PutUint64(body, f.next())
		body = body[8:]
	}
	if len(body) > 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], f.next())
		copy(body, w[:])
	}
	binary.LittleEndian.PutUint32(p[0:4], crc32.Checksum(p[4:], _castagnoli))
}

// CheckPayload verifies a payload written by EncodePayload and returns its
// writer and counter. It does not allocate.
func CheckPayload(p []byte) (writer uint32, counter uint64, err error) {
	if len(p) < payloadMinSize {
		return 0, 0, fmt.Errorf("%w (%d bytes)", errPayloadSize, len(p))
	}
	if got, want := crc32.Checksum(p[4:], _castagnoli), binary.LittleEndian.Uint32(p[0:4]); got != want {
		return 0, 0, fmt.Errorf("%w: stored %08x, computed %08x", errPayloadChecksum, want, got)
	}
	writer = binary.LittleEndian.Uint32(p[4:8])
	counter = binary.LittleEndian.Uint64(p[8:16])
	f := newFiller(writer, counter)
	body := p[payloadHeaderSize:]
	off := payloadHeaderSize
	for len(body) >= 8 {
		if binary.LittleEndian.Uint64(body) != f.next() {
			return writer, counter, fmt.Errorf("%w (writer %d, counter %d, payload byte %d)", errPayloadFiller, writer, counter, off)
		}
		body = body[8:]
		off += 8
	}
	if len(body) > 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], f.next())
		for i := range body {
			if body[i] != w[i] {
				return writer, counter, fmt.Errorf("%w (writer %d, counter %d, payload byte %d)", errPayloadFiller, writer, counter, off+i)
			}
		}
	}
	return writer, counter, nil
}

// filler is a splitmix64 generator.
type filler struct{ s uint64 }

func newFiller(writer uint32, counter uint64) filler {
	return filler{s: mix64(uint64(writer)<<40 ^ uint64(writer) ^ counter*0xbf58476d1ce4e5b9)}
}

func (f *filler) next() uint64 {
	f.s += 0x9e3779b97f4a7c15
	return mix64(f.s)
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// payloadOrder checks that each writer's counters arrive in order with no
// gaps, which holds for any prefix of a log written by load: a writer appends
// counter k+1 only after Append returned for k, so k has the smaller seq.
// Not safe for concurrent use.
type payloadOrder struct {
	// restarts allows a writer's counter to fall back to 0, as it does when
	// load runs again on an existing log.
	restarts bool
	next     map[uint32]uint64
	// restarted counts the times a writer's counter fell back to 0.
	restarted int
}

// errPayloadOrder is returned by payloadOrder.observe.
var errPayloadOrder = errors.New("payload out of order")

func (o *payloadOrder) observe(writer uint32, counter uint64) error {
	if o.next == nil {
		o.next = make(map[uint32]uint64)
	}
	want, seen := o.next[writer]
	switch {
	case counter == want && (seen || counter == 0):
	case counter == 0 && seen && o.restarts:
		o.restarted++
	case !seen:
		return fmt.Errorf("%w: writer %d starts at counter %d, want 0", errPayloadOrder, writer, counter)
	default:
		return fmt.Errorf("%w: writer %d: counter %d follows %d", errPayloadOrder, writer, counter, want-1)
	}
	o.next[writer] = counter + 1
	return nil
}

// writers returns how many distinct writers were observed.
func (o *payloadOrder) writers() int { return len(o.next) }
