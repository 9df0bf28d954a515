package wal

import (
	"bytes"
	"os"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// fuzzSegment builds a tail segment: a valid header page for firstSeq 1 with
// the given mark, followed by body.
func fuzzSegment(body []byte, markEnd int64, markNext uint64) []byte {
	b := make([]byte, frame.FileHeaderSize, frame.FileHeaderSize+len(body))
	frame.PutFileHeader(b, frame.FileHeader{Kind: frame.FileWAL, FirstSeq: 1})
	if markEnd != 0 {
		frame.PutMark(b[frame.MarkOffset:], frame.Mark{DurableEnd: markEnd, NextSeq: markNext})
	}
	return append(b, body...)
}

// FuzzRecover feeds arbitrary tail-segment contents to Open and Verify. It
// must never panic; Open and Verify must agree on whether the log is
// corrupt; when Open succeeds the log must verify clean and accept appends.
// When Open refuses, a forced Repair must make the log open.
func FuzzRecover(f *testing.F) {
	// Seeds: valid records, a torn record, zero fill, garbage, a footer.
	var body []byte
	for i := range 5 {
		rec := make([]byte, frame.Size(10+i))
		frame.Encode(rec, uint64(i+1), bytes.Repeat([]byte{byte('a' + i)}, 10+i))
		body = append(body, rec...)
	}
	f.Add(body, int64(0), uint64(0))
	f.Add(body, int64(frame.FileHeaderSize+len(body)), uint64(6))
	f.Add(body[:len(body)-3], int64(frame.FileHeaderSize+26), uint64(2))
	f.Add(append(append([]byte{}, body...), make([]byte, 100)...), int64(0), uint64(0))
	f.Add(append(append([]byte{}, body...), 0xff, 0x01, 0x02), int64(0), uint64(0))
	ft := make([]byte, frame.FooterSize)
	frame.PutFooter(ft, frame.Footer{FirstSeq: 1, Count: 5, DataEnd: int64(frame.FileHeaderSize + len(body))})
	f.Add(append(append([]byte{}, body...), ft...), int64(0), uint64(0))
	f.Add([]byte("garbage garbage garbage"), int64(0), uint64(0))
	// A recorded gap (records 3 and 4 lost) between records, with and
	// without a mark covering it, and a gap frame out of sequence.
	withGap := append([]byte{}, body[:frame.Size(10)+frame.Size(11)]...)
	var g [gapFrameSize]byte
	putGap(g[:], 3, 2)
	withGap = append(withGap, g[:]...)
	rec5 := make([]byte, frame.Size(14))
	frame.Encode(rec5, 5, bytes.Repeat([]byte{'e'}, 14))
	withGap = append(withGap, rec5...)
	f.Add(withGap, int64(frame.FileHeaderSize+len(withGap)), uint64(6))
	f.Add(withGap, int64(0), uint64(0))
	putGap(g[:], 7, 1)
	f.Add(append(append([]byte{}, body...), g[:]...), int64(0), uint64(0))
	f.Add([]byte{}, int64(frame.FileHeaderSize), uint64(1))

	f.Fuzz(func(t *testing.T, body []byte, markEnd int64, markNext uint64) {
		if len(body) > 1<<20 {
			return
		}
		mem := vfs.NewMem()
		const dir = "/log"
		if err := mem.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		file, err := mem.OpenFile(dir+"/"+segmentName(1), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.WriteAt(fuzzSegment(body, markEnd, markNext), 0); err != nil {
			t.Fatal(err)
		}
		file.Close()
		o := &Options{fsys: mem, SegmentSize: 64 << 10, BufferSize: 64 << 10}

		_, verr := Verify(dir, o)
		l, oerr := Open(dir, o)
		if (verr != nil) != (oerr != nil) {
			t.Fatalf("Verify and Open disagree: verify %v, open %v", verr, oerr)
		}
		if oerr != nil {
			if !IsCorrupt(oerr) {
				t.Fatalf("Open failed without a CorruptionError: %v", oerr)
			}
			if _, err := Repair(dir, true, o); err != nil {
				t.Fatalf("forced Repair of %v: %v", oerr, err)
			}
			if _, err := Verify(dir, o); err != nil {
				t.Fatalf("Verify after forced Repair: %v", err)
			}
			if l, oerr = Open(dir, o); oerr != nil {
				t.Fatalf("Open after forced Repair: %v", oerr)
			}
		}
		next := l.NextSeq()
		seq, err := l.Append([]byte("after recovery"))
		if err != nil || seq != next {
			t.Fatalf("Append after recovery: seq %d (next %d): %v", seq, next, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(dir, o)
		if err != nil || rep.Torn != nil {
			t.Fatalf("after Open and Append: %+v %v", rep, err)
		}
		r, err := OpenReader(dir, seq, o)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if !r.Next() || r.Seq() != seq || string(r.Record()) != "after recovery" {
			t.Fatalf("record appended after recovery not read back: %v", r.Err())
		}
	})
}
