package wal

import (
	"bytes"
	"fmt"
	"os"
	"strings"
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

// FuzzRepairSealed replaces the body of the middle segment of a three-
// segment log with arbitrary bytes (keeping or dropping its header). A
// forced Repair must never panic or fail; afterwards the log verifies, every
// record of the first and last segments is intact, the middle segment's
// sequence numbers are each either a record or in a reported gap, and the
// log opens and takes appends.
func FuzzRepairSealed(f *testing.F) {
	var good []byte
	for i := range 5 {
		rec := make([]byte, frame.Size(10))
		frame.Encode(rec, uint64(4+i), bytes.Repeat([]byte{byte('a' + i)}, 10))
		good = append(good, rec...)
	}
	f.Add(good, true)
	f.Add(good[:len(good)-7], true)
	f.Add(append(append([]byte{}, good[:26]...), good[30:]...), true)
	f.Add(append([]byte("junk"), good...), true)
	f.Add(good, false)
	var g [gapFrameSize]byte
	putGap(g[:], 4, 5)
	f.Add(g[:], true)
	f.Add([]byte{}, true)

	f.Fuzz(func(t *testing.T, body []byte, header bool) {
		if len(body) > 1<<16 {
			return
		}
		mem := vfs.NewMem()
		const dir = "/log"
		noErr(t, mem.MkdirAll(dir, 0o755))
		// Segment 1: records 1..3, sealed. Segment 4: the fuzzed middle,
		// which should hold records 4..8. Segment 9: records 9..10, tail.
		seg := func(first uint64, body []byte, sealed, header bool) []byte {
			b := make([]byte, frame.FileHeaderSize)
			if header {
				frame.PutFileHeader(b, frame.FileHeader{Kind: frame.FileWAL, FirstSeq: first})
			}
			b = append(b, body...)
			if sealed {
				var ft [frame.FooterSize]byte
				frame.PutFooter(ft[:], frame.Footer{FirstSeq: first, Count: 0, DataEnd: int64(len(b))})
				b = append(b, ft[:]...)
			}
			return b
		}
		records := func(first, n uint64) []byte {
			var out []byte
			for s := first; s < first+n; s++ {
				rec := make([]byte, frame.Size(8))
				frame.Encode(rec, s, fmt.Appendf(nil, "rec %04d", s))
				out = append(out, rec...)
			}
			return out
		}
		first := seg(1, records(1, 3), false, true)
		var ft [frame.FooterSize]byte
		frame.PutFooter(ft[:], frame.Footer{FirstSeq: 1, Count: 3, DataEnd: int64(len(first))})
		first = append(first, ft[:]...)
		middle := seg(4, body, false, header)
		tail := seg(9, records(9, 2), false, true)
		frame.PutMark(tail[frame.MarkOffset:], frame.Mark{DurableEnd: int64(len(tail)), NextSeq: 11})
		for name, b := range map[string][]byte{segmentName(1): first, segmentName(4): middle, segmentName(9): tail} {
			file, err := mem.OpenFile(dir+"/"+name, os.O_RDWR|os.O_CREATE, 0o644)
			noErr(t, err)
			_, err = file.WriteAt(b, 0)
			noErr(t, err)
			noErr(t, file.Close())
		}
		o := &Options{fsys: mem, SegmentSize: 64 << 10, BufferSize: 64 << 10}
		if _, err := Repair(dir, true, o); err != nil {
			if strings.Contains(err.Error(), "cannot tell which is right") {
				return // the fuzzed segment claims records the next one holds
			}
			t.Fatalf("forced Repair: %v", err)
		}
		seqs, gaps := readAcrossGapsOn(t, dir, o, func(s uint64, p []byte) bool {
			return string(p) == fmt.Sprintf("rec %04d", s) || s >= 4 && s <= 8
		})
		for s := uint64(1); s <= 10; s++ {
			inGap := false
			for _, g := range gaps {
				inGap = inGap || g.First <= s && s < g.End
			}
			if seqs[s] == inGap {
				t.Fatalf("seq %d: read %v, in a gap %v (gaps %+v)", s, seqs[s], inGap, gaps)
			}
			if (s <= 3 || s >= 9) && !seqs[s] {
				t.Fatalf("intact record %d lost", s)
			}
		}
		l, err := Open(dir, o)
		noErr(t, err)
		seq, err := l.Append([]byte("after repair"))
		noErr(t, err)
		noErr(t, l.Close())
		if seq != 11 {
			t.Fatalf("append after repair got seq %d", seq)
		}
	})
}
