package wal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSegmentsRemovedIsNotANewLog: a log directory whose segments were all
// deleted from outside, its index files left, must not pass for a new log:
// Open started one at sequence number 1 (new records under the numbers of
// lost ones), and Verify called the directory a clean, empty log.
func TestSegmentsRemovedIsNotANewLog(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10})
	appendN(t, l, 8000) // about 190 KiB of frames: sealed segments
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var idx int
	for _, e := range ents {
		switch {
		case strings.HasSuffix(e.Name(), segSuffix):
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(e.Name(), segSuffix+idxSuffix):
			idx++
		}
	}
	if idx == 0 {
		t.Fatalf("no index file in %s: the test needs a sealed segment", dir)
	}
	check := func(what string, err error) {
		t.Helper()
		var ce *CorruptionError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), idxSuffix) || ce.Dir != dir {
			t.Errorf("%s of a log whose segments were deleted: %v, want a *CorruptionError naming an index file", what, err)
		}
	}
	l2, err := Open(dir, nil)
	if err == nil {
		l2.Close()
	}
	check("Open", err)
	_, err = Verify(dir, nil)
	check("Verify", err)
	r, err := OpenReader(dir, 0, nil)
	if err == nil {
		r.Close()
	}
	check("OpenReader", err)
	_, err = Repair(dir, false, nil)
	check("Repair", err)

	// As the error says: without the index files, a new log starts there.
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), idxSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	l3 := mustOpen(t, dir, nil)
	if seq, err := l3.Append([]byte("a new log")); err != nil || seq != 1 {
		t.Errorf("Append to the new log = %d, %v; want 1", seq, err)
	}
	if err := l3.Close(); err != nil {
		t.Fatal(err)
	}
}
