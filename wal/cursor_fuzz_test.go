package wal

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// FuzzCursorDecode feeds arbitrary bytes to the cursor file decoder: it
// must never panic, must accept only what it can re-encode byte for byte,
// and must reject anything else with a description of the problem.
func FuzzCursorDecode(f *testing.F) {
	f.Add(encodeCursor("c", 1))
	f.Add(encodeCursor("orders-consumer.v2", 1<<40))
	f.Add([]byte(_cursorMagic))
	f.Add([]byte{})
	f.Add([]byte("not a cursor file at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, committed, problem := decodeCursor(b)
		if problem != "" {
			if name != "" || committed != 0 {
				t.Fatalf("rejected (%s) but returned %q %d", problem, name, committed)
			}
			return
		}
		if committed == 0 || checkCursorName(name) != nil {
			t.Fatalf("accepted %q at %d", name, committed)
		}
		if re := encodeCursor(name, committed); !bytes.Equal(re, b) {
			t.Fatalf("decoded %q %d, which encodes to %x, not %x", name, committed, re, b)
		}
	})
}

// TestCursorFileFormat pins the cursor file's bytes: the format must not
// change (the fuzz corpus in testdata was written by an independent
// encoder of the same layout).
func TestCursorFileFormat(t *testing.T) {
	const golden = "41504e444355520001000000393000000000000006006f7264657273e0840b9d"
	if got := hex.EncodeToString(encodeCursor("orders", 12345)); got != golden {
		t.Fatalf("cursor file of orders@12345 is\n%s\nwant\n%s", got, golden)
	}
	b, _ := hex.DecodeString(golden)
	if name, committed, problem := decodeCursor(b); name != "orders" || committed != 12345 || problem != "" {
		t.Fatalf("decode golden: %q %d %s", name, committed, problem)
	}
}
