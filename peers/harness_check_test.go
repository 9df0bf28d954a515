package peers

import (
	"bytes"
	"strings"
	"testing"
)

// TestChecker makes sure the verification fails the ways a broken writer
// would: a fast wrong answer must not pass.
func TestChecker(t *testing.T) {
	stream := func(recs ...[2]int) []byte {
		var buf bytes.Buffer
		rec := make([]byte, recSize)
		for _, r := range recs {
			fillRecord(rec, r[0], uint64(r[1]))
			buf.Write(rec)
		}
		return buf.Bytes()
	}
	good := stream([2]int{0, 0}, [2]int{1, 0}, [2]int{0, 1}, [2]int{1, 1}, [2]int{0, 2})
	written := []uint64{3, 2}

	// Accepted whole, and split at every offset (bufio splits records).
	for split := 0; split <= len(good); split += 7 {
		c := newChecker(2, false)
		c.Write(good[:split])
		c.Write(good[split:])
		if err := c.finish(written, 0); err != nil {
			t.Fatalf("split at %d: %v", split, err)
		}
	}

	torn := bytes.Clone(good)
	torn[2*recSize+50] ^= 1
	spliced := append(bytes.Clone(good[:recSize+64]), good[2*recSize+64:]...)
	partial := good[:len(good)-1]
	zeros := append(bytes.Clone(good), make([]byte, recSize)...)
	for _, tc := range []struct {
		name, want string
		data       []byte
		written    []uint64
		gaps       bool
		dropped    uint64
	}{
		{"torn", "filler mismatch", torn, written, false, 0},
		{"spliced", "checksum mismatch", spliced, written, false, 0},
		{"zero padding", "foreign bytes", zeros, written, false, 0},
		{"partial", "ends with 127 bytes of a 128-byte record", partial, written, false, 0},
		{"lost", "counter 1 missing", stream([2]int{0, 0}, [2]int{0, 2}), []uint64{3}, false, 0},
		{"lost at end", "read 2 records, wrote 3", stream([2]int{0, 0}, [2]int{0, 1}), []uint64{3}, false, 0},
		{"duplicated", "duplicate record", stream([2]int{0, 0}, [2]int{0, 0}), []uint64{2}, false, 0},
		{"reordered", "counter 0 missing", stream([2]int{0, 1}, [2]int{0, 0}), []uint64{2}, false, 0},
		{"unknown writer", "writer id 5", stream([2]int{5, 0}), []uint64{1}, false, 0},
		{"gaps reordered", "reordered record", stream([2]int{0, 2}, [2]int{0, 1}), []uint64{3}, true, 1},
		{"gaps miscounted", "reported dropped", stream([2]int{0, 0}, [2]int{0, 2}), []uint64{3}, true, 0},
	} {
		c := newChecker(2, tc.gaps)
		c.Write(tc.data)
		err := c.finish(tc.written, tc.dropped)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	// Gaps allowed: drops reported exactly pass.
	c := newChecker(1, true)
	c.Write(stream([2]int{0, 0}, [2]int{0, 2}))
	if err := c.finish([]uint64{3}, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.finishGaps([]uint64{2}); err == nil {
		t.Fatal("finishGaps accepted a seq beyond what was written")
	}
}
