package shmlog

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC12 checks the slicing-by-4 CRC of a header's 12 bytes against
// hash/crc32 over the same bytes.
func TestCRC12(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h [12]byte
	for i := range 100000 {
		a, b := r.Uint32(), r.Uint64()
		if i < 3 {
			a, b = [3]uint32{0, ^uint32(0), 1}[i], [3]uint64{0, ^uint64(0), 1 << 63}[i]
		}
		binary.LittleEndian.PutUint32(h[0:4], a)
		binary.LittleEndian.PutUint64(h[4:12], b)
		if got, want := crc12(a, b), crc32.Checksum(h[:], _crc); got != want {
			t.Fatalf("crc12(%#x, %#x) = %#08x, want %#08x", a, b, got, want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = recordWord(h[:], 7) }); a != 0 {
		t.Fatalf("recordWord allocates %v times", a)
	}
}
