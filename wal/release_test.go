package wal

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile returns the process's resident file-backed memory (RssFile of
// /proc/self/status): mapped file pages it has touched and not let go of.
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("RssFile line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReaderReleasesPagesBehind: a Reader of an open log that has read
// 32 MiB of its active segment keeps at most its ReaderWindow of it
// resident; the records it read are still whole.
func TestReaderReleasesPagesBehind(t *testing.T) {
	const size, n = 4000, 8 << 10 // 32 MiB in one segment
	const window = 4 << 20
	l := mustOpen(t, t.TempDir(), &Options{SegmentSize: 64 << 20, ReaderWindow: window})
	defer l.Close()
	p := bytes.Repeat([]byte("r"), size)
	for range n {
		_, err := l.Append(p)
		noErr(t, err)
	}
	noErr(t, l.Flush(context.Background()))
	r, err := l.NewReader(1, nil)
	noErr(t, err)
	defer r.Close()
	if r.ls.m == nil {
		t.Skip("the segment is not mapped here")
	}
	before := rssFile(t)
	var first []byte
	got := 0
	for r.Next() {
		if !bytes.Equal(r.Record(), p) {
			t.Fatalf("record %d differs", r.Seq())
		}
		if got == 0 {
			first = r.Record()
		}
		got++
	}
	noErr(t, r.Err())
	if got != n {
		t.Fatalf("read %d records, want %d", got, n)
	}
	grew := rssFile(t) - before
	t.Logf("RssFile grew %d KiB reading %d MiB with a %d KiB ReaderWindow", grew>>10, n*size>>20, window>>10)
	if grew > window+2<<20 {
		t.Fatalf("RssFile grew %d KiB reading %d MiB with a %d KiB ReaderWindow: the pages behind the Reader stay resident", grew>>10, n*size>>20, window>>10)
	}
	// A released page of the file mapping faults back in with its data.
	if !bytes.Equal(first, p) {
		t.Fatal("the first record changed after its pages were released")
	}
}
