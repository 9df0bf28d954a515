package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"testing"

	"github.com/appendlog/appendlog/frame"
)

// FuzzCursorDecode feeds arbitrary bytes to the cursor file decoder: it
// must never panic, must accept only what it can re-encode byte for byte
// (a version 2 file with encodeCursor, a version 1 file with
// encodeCursorV1), and must reject anything else with a description of
// the problem.
func FuzzCursorDecode(f *testing.F) {
	id := frame.LogID{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	f.Add(encodeCursor("c", 1, frame.LogID{}))
	f.Add(encodeCursor("orders-consumer.v2", 1<<40, id))
	f.Add(encodeCursorV1("c", 1))
	f.Add(encodeCursorV1("orders-consumer.v2", 1<<40))
	f.Add([]byte(_cursorMagic))
	f.Add([]byte{})
	f.Add([]byte("not a cursor file at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, committed, gotID, problem := decodeCursor(b)
		if problem != "" {
			if name != "" || committed != 0 || !gotID.IsZero() {
				t.Fatalf("rejected (%s) but returned %q %d %v", problem, name, committed, gotID)
			}
			return
		}
		if committed == 0 || checkCursorName(name) != nil {
			t.Fatalf("accepted %q at %d", name, committed)
		}
		re := encodeCursor(name, committed, gotID)
		if binary.LittleEndian.Uint32(b[len(_cursorMagic):]) == 1 {
			if !gotID.IsZero() {
				t.Fatalf("version 1 file decoded with log id %v", gotID)
			}
			re = encodeCursorV1(name, committed)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("decoded %q %d %v, which encodes to %x, not %x", name, committed, gotID, re, b)
		}
	})
}

// encodeCursorV1 is the version 1 encoder (no log ID), which this build
// no longer writes but still reads.
func encodeCursorV1(name string, committed uint64) []byte {
	b := make([]byte, _cursorFixed1+len(name))
	copy(b, _cursorMagic)
	o := len(_cursorMagic)
	binary.LittleEndian.PutUint32(b[o:], 1)
	binary.LittleEndian.PutUint64(b[o+4:], committed)
	binary.LittleEndian.PutUint16(b[o+12:], uint16(len(name)))
	copy(b[o+14:], name)
	n := len(b) - 4
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], _cursorCRC))
	return b
}

// TestCursorFileFormat pins the cursor file's bytes: the format must not
// change. Both golden files were written by an independent encoder of the
// layout (a CRC-32C written out by hand, in Python), as was the fuzz
// corpus in testdata (version 1, which is still read).
func TestCursorFileFormat(t *testing.T) {
	const golden1 = "41504e444355520001000000393000000000000006006f7264657273e0840b9d"
	b, _ := hex.DecodeString(golden1)
	if name, committed, id, problem := decodeCursor(b); name != "orders" || committed != 12345 || !id.IsZero() || problem != "" {
		t.Fatalf("decode version 1 golden: %q %d %v %s", name, committed, id, problem)
	}
	if got := hex.EncodeToString(encodeCursorV1("orders", 12345)); got != golden1 {
		t.Fatalf("encodeCursorV1 drifted from the version 1 golden file: %s", got)
	}
	id := frame.LogID{0: 0x11, 15: 0xff}
	const golden2 = "41504e4443555200020000003930000000000000110000000000000000000000000000ff06006f7264657273ea62c7b8"
	if got := hex.EncodeToString(encodeCursor("orders", 12345, id)); got != golden2 {
		t.Fatalf("cursor file of orders@12345 is\n%s\nwant\n%s", got, golden2)
	}
	b, _ = hex.DecodeString(golden2)
	if name, committed, got, problem := decodeCursor(b); name != "orders" || committed != 12345 || got != id || problem != "" {
		t.Fatalf("decode golden: %q %d %v %s", name, committed, got, problem)
	}
}
