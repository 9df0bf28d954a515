package wal

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestVerifyOnOpen(t *testing.T) {
	dir := t.TempDir()
	segs := buildLog(t, dir, 2500)
	if len(segs) < 8 {
		t.Fatalf("only %d segments", len(segs))
	}
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, VerifyOnOpen: true}
	l := mustOpen(t, dir, o)
	rec := l.Recovery()
	noErr(t, l.Close())
	if rec.ScannedBytes < int64(len(segs)-1)*(60<<10) {
		t.Fatalf("VerifyOnOpen scanned %d bytes of %d segments", rec.ScannedBytes, len(segs))
	}

	// A bit flip in the 3rd sealed segment: Open trusts its footer, but
	// VerifyOnOpen reads it and refuses.
	flipByte(t, filepath.Join(dir, segs[2]), 9000)
	plain := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	noErr(t, plain.Close())
	_, err := Open(dir, o)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != segs[2] || ce.Offset > 9000 || ce.Offset < 9000-300 {
		t.Fatalf("Open with VerifyOnOpen of a damaged sealed segment: %v, want corruption in %s near offset 9000", err, segs[2])
	}
	// The refused Open released the lock.
	l = mustOpen(t, dir, nil)
	noErr(t, l.Close())
}
