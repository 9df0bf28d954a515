package wal

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestIndexFile: a sealed segment's index file lets a reopened Log
// position without walking; a damaged, foreign or missing one costs only
// a walk; one whose segment is gone is removed at Open.
func TestIndexFile(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 256 << 10}
	l := mustOpen(t, dir, o)
	appendRecs(t, l, 10000)
	noErr(t, l.Sync(context.Background()))
	noErr(t, l.Close())
	seg := segmentName(1)
	idx := filepath.Join(dir, seg+idxSuffix)
	good, err := os.ReadFile(idx)
	noErr(t, err)

	check := func(t *testing.T, fromFile bool) {
		t.Helper()
		l := mustOpen(t, dir, o)
		defer l.Close()
		const from = 100
		r, err := l.NewReader(from, nil)
		noErr(t, err)
		defer r.Close()
		if !r.Next() || r.Seq() != from {
			t.Fatalf("from %d: got %d: %v", from, r.Seq(), r.Err())
		}
		if _, i, err := parsePayload(r.Record()); err != nil || i != from-1 {
			t.Fatalf("from %d: counter %d: %v", from, i, err)
		}
		x := &r.ls.idx
		x.mu.Lock()
		defer x.mu.Unlock()
		// A walk stops at the target; the file holds the whole segment.
		if got := x.seqs[len(x.seqs)-1] > from; got != fromFile {
			t.Fatalf("index from the file: %v, want %v (%d entries, last %d)", got, fromFile, len(x.seqs), x.seqs[len(x.seqs)-1])
		}
	}
	t.Run("valid", func(t *testing.T) { check(t, true) })
	for name, b := range map[string][]byte{
		"flipped":   append(append([]byte(nil), good[:40]...), append([]byte{good[40] ^ 1}, good[41:]...)...),
		"truncated": good[:len(good)-3],
		"empty":     nil,
		"foreign":   []byte("not an index at all, but long enough to be read"),
	} {
		t.Run(name, func(t *testing.T) {
			noErr(t, os.WriteFile(idx, b, 0o644))
			check(t, false)
		})
	}
	t.Run("missing", func(t *testing.T) {
		noErr(t, os.Remove(idx))
		check(t, false)
	})
	t.Run("orphan", func(t *testing.T) {
		orphan := filepath.Join(dir, segmentName(7)+idxSuffix)
		noErr(t, os.WriteFile(orphan, good, 0o644))
		l := mustOpen(t, dir, o)
		noErr(t, l.Close())
		if _, err := os.Stat(orphan); !os.IsNotExist(err) {
			t.Fatalf("orphan index file: %v", err)
		}
	})
}

// FuzzIndexDecode: decodeIndex never panics, accepts only what encodeIndex
// can produce for the segment, and what it accepts re-encodes to the same
// bytes.
func FuzzIndexDecode(f *testing.F) {
	f.Add(encodeIndex([]uint64{1}, []int64{headerPage}, []uint32{0}), uint64(1), int64(1<<20))
	f.Add(encodeIndex([]uint64{1, 120, 260}, []int64{headerPage, 20480, 36864}, []uint32{0, 7, 0xffffffff}), uint64(1), int64(1<<20))
	f.Add(encodeIndex([]uint64{5, 4}, []int64{headerPage, 9000}, []uint32{0, 1}), uint64(5), int64(1<<20))
	f.Add([]byte(_idxMagic), uint64(1), int64(1<<20))
	f.Add([]byte{}, uint64(0), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, first uint64, size int64) {
		seqs, offs, crcs, err := decodeIndex(b, first, size)
		if err != nil {
			return
		}
		if len(seqs) == 0 || seqs[0] != first || offs[0] != headerPage {
			t.Fatalf("accepted an index that does not start at the segment's first record: %v %v", seqs, offs)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] || offs[i] <= offs[i-1] || offs[i] >= size {
				t.Fatalf("accepted entries out of order or past the end: %v %v", seqs, offs)
			}
		}
		if got := encodeIndex(seqs, offs, crcs); string(got) != string(b) {
			t.Fatal("accepted bytes that do not re-encode to themselves")
		}
	})
}
