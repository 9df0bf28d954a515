package frame

import (
	"bytes"
	"fmt"
	"testing"
)

var _benchSizes = []int{16, 128, 1024, 4096}

func BenchmarkEncode(b *testing.B) {
	for _, size := range _benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			payload := payloadOf(size)
			dst := make([]byte, Size(size))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				Encode(dst, uint64(i), payload)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, size := range _benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			buf := make([]byte, Size(size))
			Encode(buf, 1, payloadOf(size))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Decode(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanner scans ~64 MiB of 128-byte records.
func BenchmarkScanner(b *testing.B) {
	const size = 128
	n := 64 << 20 / Size(size)
	benchScan(b, new(stream).records(n, size).b, n)
}

// BenchmarkScannerZeroTail scans 64 MiB of zeros: the preallocated tail
// recovery must check before it calls the end clean.
func BenchmarkScannerZeroTail(b *testing.B) {
	benchScan(b, make([]byte, 64<<20), 0)
}

func benchScan(b *testing.B, in []byte, frames int) {
	r := bytes.NewReader(in)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(in)
		s := NewScanner(r, 0, 0)
		count := 0
		for s.Next() {
			count++
		}
		if s.Err() != nil || count != frames {
			b.Fatalf("%d frames, err %v", count, s.Err())
		}
	}
}
