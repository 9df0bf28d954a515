package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

func TestPayloadRoundTrip(t *testing.T) {
	for _, size := range []int{payloadMinSize, 25, 31, 32, 33, 100, 128, 4096, 4099} {
		for _, wc := range []struct {
			w uint32
			c uint64
		}{{0, 0}, {1, 0}, {0, 1}, {7, 123456}, {1<<32 - 1, 1<<64 - 1}} {
			p := make([]byte, size)
			EncodePayload(p, wc.w, wc.c)
			w, c, err := CheckPayload(p)
			if err != nil || w != wc.w || c != wc.c {
				t.Fatalf("size %d: CheckPayload(Encode(%d, %d)) = %d, %d, %v", size, wc.w, wc.c, w, c, err)
			}
			q := make([]byte, size)
			EncodePayload(q, wc.w, wc.c)
			if !bytes.Equal(p, q) {
				t.Fatalf("size %d: encoding is not deterministic", size)
			}
		}
	}
}

func TestPayloadFillerDiffers(t *testing.T) {
	// Different (writer, counter) pairs give different filler, so a payload
	// cannot pass for another record's.
	seen := map[string][2]uint64{}
	for w := range uint32(8) {
		for c := range uint64(64) {
			p := make([]byte, 40)
			EncodePayload(p, w, c)
			k := string(p[payloadHeaderSize:])
			if prev, ok := seen[k]; ok {
				t.Fatalf("writer %d counter %d has the filler of writer %d counter %d", w, c, prev[0], prev[1])
			}
			seen[k] = [2]uint64{uint64(w), c}
		}
	}
}

func TestPayloadDetectsEveryByteFlip(t *testing.T) {
	for _, size := range []int{payloadMinSize, 37, 100} {
		p := make([]byte, size)
		EncodePayload(p, 3, 99)
		for i := range p {
			for _, bit := range []byte{0x01, 0x80} {
				q := bytes.Clone(p)
				q[i] ^= bit
				if _, _, err := CheckPayload(q); !errors.Is(err, errPayloadChecksum) {
					t.Fatalf("size %d: flipping bit %#x of byte %d: err = %v, want checksum mismatch", size, bit, i, err)
				}
			}
		}
	}
}

func TestPayloadDetectsMixUp(t *testing.T) {
	// A payload whose header names another record fails on its filler
	// even with a recomputed checksum.
	for _, size := range []int{payloadMinSize, 29, 100} {
		p := make([]byte, size)
		EncodePayload(p, 2, 10)
		binary.LittleEndian.PutUint64(p[8:16], 11)
		binary.LittleEndian.PutUint32(p[0:4], crc32.Checksum(p[4:], _castagnoli))
		if _, _, err := CheckPayload(p); !errors.Is(err, errPayloadFiller) {
			t.Fatalf("size %d: err = %v, want filler mismatch", size, err)
		}
		// A different tail byte only: the partial last word is checked too.
		EncodePayload(p, 2, 10)
		p[size-1] ^= 0xff
		binary.LittleEndian.PutUint32(p[0:4], crc32.Checksum(p[4:], _castagnoli))
		if _, _, err := CheckPayload(p); !errors.Is(err, errPayloadFiller) {
			t.Fatalf("size %d, last byte: err = %v, want filler mismatch", size, err)
		}
	}
}

func TestPayloadShort(t *testing.T) {
	for _, p := range [][]byte{nil, {}, make([]byte, payloadMinSize-1), []byte("hello")} {
		if _, _, err := CheckPayload(p); !errors.Is(err, errPayloadSize) {
			t.Fatalf("CheckPayload(%d bytes) = %v, want size error", len(p), err)
		}
	}
}

func TestPayloadNoAllocs(t *testing.T) {
	p := make([]byte, 128)
	allocs := testing.AllocsPerRun(100, func() {
		EncodePayload(p, 1, 2)
		if _, _, err := CheckPayload(p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Encode+Check allocate %v times per run, want 0", allocs)
	}
}

func TestPayloadOrder(t *testing.T) {
	type obs struct {
		w  uint32
		c  uint64
		ok bool
	}
	tests := []struct {
		name     string
		restarts bool
		seq      []obs
	}{
		{"interleaved", false, []obs{{0, 0, true}, {1, 0, true}, {0, 1, true}, {1, 1, true}, {0, 2, true}}},
		{"gap", false, []obs{{0, 0, true}, {0, 2, false}}},
		{"repeat", false, []obs{{0, 0, true}, {0, 1, true}, {0, 1, false}}},
		{"backwards", false, []obs{{0, 0, true}, {0, 1, true}, {0, 2, true}, {0, 1, false}}},
		{"late start", false, []obs{{0, 0, true}, {1, 5, false}}},
		{"restart refused", false, []obs{{0, 0, true}, {0, 1, true}, {0, 0, false}}},
		{"restart allowed", true, []obs{{0, 0, true}, {0, 1, true}, {0, 0, true}, {0, 1, true}}},
		{"restart still no gap", true, []obs{{0, 0, true}, {0, 0, true}, {0, 2, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := payloadOrder{restarts: tt.restarts}
			for i, ob := range tt.seq {
				err := o.observe(ob.w, ob.c)
				if (err == nil) != ob.ok {
					t.Fatalf("step %d: observe(%d, %d) = %v, want ok=%v", i, ob.w, ob.c, err, ob.ok)
				}
				if err != nil {
					if !errors.Is(err, errPayloadOrder) {
						t.Fatalf("step %d: error %v does not wrap errPayloadOrder", i, err)
					}
					return
				}
			}
		})
	}
}

func FuzzCheckPayload(f *testing.F) {
	for _, size := range []int{0, 5, payloadMinSize, 100} {
		p := make([]byte, size)
		if size >= payloadMinSize {
			EncodePayload(p, 1, 2)
		}
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		w, c, err := CheckPayload(p)
		if err != nil {
			return
		}
		q := make([]byte, len(p))
		EncodePayload(q, w, c)
		if !bytes.Equal(p, q) {
			t.Fatalf("CheckPayload accepted %x, which re-encodes as %x", p, q)
		}
	})
}

func BenchmarkEncodePayload(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			p := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				EncodePayload(p, 1, uint64(i))
			}
		})
	}
}
