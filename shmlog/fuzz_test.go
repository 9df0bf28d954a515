package shmlog_test

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// FuzzDecodeHeader decodes arbitrary header pages: never a panic, and a
// page that decodes encodes back to itself (in the fields that matter).
func FuzzDecodeHeader(f *testing.F) {
	f.Add(header(0))
	f.Add(header(3))
	f.Add(header(0)[:100])
	f.Fuzz(func(t *testing.T, b []byte) {
		capacity, idx, err := shmlog.DecodeHeader("f", b)
		if err != nil {
			return
		}
		again := make([]byte, shmlog.HeaderSize)
		shmlog.PutHeader(again, capacity, idx)
		c2, i2, err := shmlog.DecodeHeader("f", again)
		if err != nil || c2 != capacity || i2 != idx {
			t.Fatalf("re-encoded header: %d %d %v, want %d %d", c2, i2, err, capacity, idx)
		}
	})
}

// FuzzVerify overwrites part of a log's data region (and its tail) with
// arbitrary bytes and reads it: never a panic, and records before the
// damage are still read.
func FuzzVerify(f *testing.F) {
	f.Add(uint16(0), []byte{1, 2, 3, 4, 5, 6, 7, 8}, uint32(4096))
	f.Add(uint16(64), []byte{0x28, 0, 0, 0, 0x0, 0, 0, 0x40}, uint32(300))
	f.Add(uint16(8), []byte{5, 0, 0, 0, 0xff, 0xff, 0xff, 0x3f}, uint32(8000))
	f.Fuzz(func(t *testing.T, at uint16, junk []byte, tail uint32) {
		path := logPath(t)
		l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if _, err := l.Append(make([]byte, 24)); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, make([]byte, 16<<10-len(b))...)
		off := 40*2 + int(at)%(16<<10-shmlog.HeaderSize-80)
		copy(b[shmlog.HeaderSize+off:], junk)
		binary.LittleEndian.PutUint64(b[256:], uint64(tail))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		n := 0
		shmlog.Verify(path, func(shmlog.Record) error { n++; return nil })
		if n < 2 && tail >= 80 {
			t.Fatalf("read %d records before damage at data offset %d", n, off)
		}
	})
}
