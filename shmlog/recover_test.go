package shmlog_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/shmlog"
)

// appendN appends records 0..n-1 of writer w (40 bytes each) and returns
// their positions.
func appendN(t *testing.T, l *shmlog.Log, w, from, n int) []uint64 {
	t.Helper()
	var pos []uint64
	p := make([]byte, 40)
	for c := from; c < from+n; c++ {
		fillRecord(p, w, uint64(c), 2)
		at, err := l.Append(p)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, at)
	}
	return pos
}

// TestRecoverDeadWriters: writers killed mid-append leave an in-progress
// frame and a claim with no header; the next Open, alone, pads both, and
// appends and readers go on without waiting for CommitTimeout.
func TestRecoverDeadWriters(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 0, 0, 5)
	l.Close()
	// Both at once: an Open while another process has the log recovers
	// nothing.
	hold := startChild(t, job{path: path, goroutines: 1, records: 1, size: 40, fileSize: 1 << 20, writers: 2, hook: "hold"})
	hold.expect(t, "held")
	hole := startChild(t, job{path: path, goroutines: 1, records: 1, size: 40, fileSize: 1 << 20, writers: 2, hook: "hole"})
	hole.expect(t, "claimed")
	hold.kill(t)
	hole.kill(t)
	l, err = shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := l.Recovery()
	// The hold frame is padded; the hole claim, at the tail, is dropped.
	if rec.Padded != 1 || rec.Damage != nil {
		t.Fatalf("Recovery %+v, want 1 padded", rec)
	}
	appendN(t, l, 0, 5, 5)
	// A reader passes at once: nothing is left to wait CommitTimeout for.
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 10 {
		if _, ok, err := r.Next(); !ok || err != nil {
			t.Fatalf("record %d: %v %v", i, ok, err)
		}
	}
	verify(t, path, 40, []uint64{10})
}

// TestRecoverDamage: a damaged record (a torn write) cuts the log there,
// garbage past the tail is zeroed, and appends after recovery verify.
func TestRecoverDamage(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pos := appendN(t, l, 0, 0, 10)
	// Keep the file untrimmed, as after a crash: hold a Reader while the
	// Log closes, then damage record 6 and plant garbage far past the tail.
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	r.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{'X'}, int64(shmlog.HeaderSize+pos[6]+frame.HeaderSize+3))
	f.WriteAt([]byte("garbage"), 512<<10)
	f.Close()
	l, err = shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := l.Recovery()
	var ce *shmlog.CorruptError
	if !errors.As(rec.Damage, &ce) || ce.Offset != int64(shmlog.HeaderSize+pos[6]) || ce.File != path {
		t.Fatalf("Recovery.Damage = %v, want a CorruptError at offset %d of %s", rec.Damage, shmlog.HeaderSize+pos[6], path)
	}
	if rec.Cut < 3*40 {
		t.Fatalf("cut %d bytes, want at least the 3 records from the damage on and the garbage", rec.Cut)
	}
	// Records 6.. are gone; appends go on as writer 1 and verify.
	appendN(t, l, 1, 0, 5)
	verify(t, path, 40, []uint64{6, 5})
}

// TestRecoverStaleTail: a tail word older than the frames (the header page
// written back before the data pages, then a power cut) is moved to the
// end of the valid frames, so no record is overwritten or lost.
func TestRecoverStaleTail(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pos := appendN(t, l, 0, 0, 10)
	r, _ := l.NewReader(0)
	l.Close()
	r.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], pos[4])
	f.WriteAt(b[:], 256)
	f.Close()
	l, err = shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rec := l.Recovery(); rec.Damage != nil || rec.Padded != 0 || rec.Cut != 0 {
		t.Fatalf("Recovery %+v, want nothing to do", rec)
	}
	appendN(t, l, 0, 10, 5)
	verify(t, path, 40, []uint64{15})
}
