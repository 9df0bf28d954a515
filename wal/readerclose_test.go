package wal

import (
	"context"
	"testing"
)

// TestReaderRecordAfterClose: Record after Close returns nil, not a
// slice of the mapping Close released (touching it would crash the
// process), for a Reader of an open Log in a sealed segment and for a
// Reader from OpenReader.
func TestReaderRecordAfterClose(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	l := mustOpen(t, dir, o)
	defer l.Close()
	for l.Stats().SegmentsCreated < 2 {
		appendN(t, l, 100)
		noErr(t, l.Flush(context.Background()))
	}
	r, err := l.NewReader(1, nil)
	noErr(t, err)
	if !r.Next() {
		t.Fatalf("no first record: %v", r.Err())
	}
	noErr(t, r.Close())
	if rec := r.Record(); rec != nil {
		t.Fatalf("Record after Close of a Reader of an open Log: %d bytes, want nil", len(rec))
	}
	if r.Next() {
		t.Fatal("Next after Close returned true")
	}

	fr, err := OpenReader(dir, 1, o)
	noErr(t, err)
	if !fr.Next() {
		t.Fatalf("no first record: %v", fr.Err())
	}
	noErr(t, fr.Close())
	if rec := fr.Record(); rec != nil {
		t.Fatalf("Record after Close of a Reader from OpenReader: %d bytes, want nil", len(rec))
	}
}
