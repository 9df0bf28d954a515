package shmlog_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

// TestLostActiveMove: a power cut lost file 0's move of active to file 1
// (Sync makes it durable; without one, page writeback is in any order),
// while file 1's frames were written back with a stale tail and a torn
// last record, and file 0's last pages were lost (a torn record there).
// The next Open recovers file 0, the active one; the roll into file 1
// keeps it, as it holds records, but must not append at its stale tail:
// claims there land on its records (Append fails, or a frame lands inside
// a record's payload). Open, alone, recovers the files after the active
// one too: file 1's records stand, the torn one is cut, and appends go on
// after them, not in file 0 before them (the space cut there is padded).
func TestLostActiveMove(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	// Writer 0 in file 0, then writer 2 to its end (its last record rolls
	// into file 1), then writer 0 in file 1.
	n := 0
	for st := l.Stats(); st.ActiveBytes+8*56 <= st.Capacity; st = l.Stats() {
		appendN(t, l, 0, n, 1)
		n++
	}
	var lost []uint64
	for c := 0; l.Stats().ActiveFile == 0; c++ {
		lost = append(lost, appendN(t, l, 2, c, 1)...)
	}
	pos := appendN(t, l, 0, n, 10)
	n += 9 // the last is torn
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The power cut: active back to 0, file 1's tail back to its fourth
	// record of writer 0, its last record torn, and writer 2's first
	// record in file 0 torn.
	put := func(name string, off int64, v uint64) {
		t.Helper()
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		if _, err := f.WriteAt(b[:], off); err != nil {
			t.Fatal(err)
		}
	}
	file1 := path + ".00000001"
	put(path, 320, 0)
	put(file1, 256, pos[3]&(1<<32-1))
	put(file1, int64(shmlog.HeaderSize+pos[9]&(1<<32-1)+24), 0xbad)
	put(path, int64(shmlog.HeaderSize+lost[0]+24), 0xbad)

	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	var ce *shmlog.CorruptError
	if rec := l.Recovery(); !errors.As(rec.Damage, &ce) || ce.File != path || ce.Offset != int64(shmlog.HeaderSize+lost[0]) {
		t.Errorf("Recovery %+v, want the torn record of %s as its damage", rec, path)
	}
	newPos := appendN(t, l, 1, 0, 200) // fills file 1 and rolls on
	if newPos[0] <= pos[8] {
		t.Errorf("the first record after the power cut is at %#x, before file 1's records (the last at %#x)", newPos[0], pos[8])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Writers 0 and 1 whole and in order; of writer 2, what is left is
	// its record in file 1.
	var next [3]uint64
	next[2] = uint64(len(lost) - 1) // its last, in file 1
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		w, c, err := payload.Decode(r.Payload)
		if err != nil || w > 2 || c != next[w] {
			t.Fatalf("record %#x: writer %d counter %d (%v), want counter %d", r.Pos, w, c, err, next[w])
		}
		next[w]++
		return nil
	})
	if err != nil || next != [3]uint64{uint64(n), 200, uint64(len(lost))} {
		t.Fatalf("Verify: %+v, %v: %v records, want %d, 200 and 1", st, err, next, n)
	}
}

// TestLostActiveFile: a power cut kept file 0's move of active to file 1
// but lost file 1's directory entry (rolls leave both to the next Sync,
// and file 0's page may be written back first; a Sync racing another
// process's roll syncs file 0 naming a file made after its directory
// sync). Nothing of file 1 is left. Open failed for good ("open file 1:
// no such file"); alone, it goes on from file 0, reporting file 1 missing
// in Recovery.Damage.
func TestLostActiveFile(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l.Stats().ActiveFile == 0 {
		appendN(t, l, 0, n, 1)
		n++
	}
	n-- // the record that rolled is in file 1
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	file1 := path + ".00000001"
	if err := os.Remove(file1); err != nil {
		t.Fatal(err)
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	var ce *shmlog.CorruptError
	if rec := l.Recovery(); !errors.As(rec.Damage, &ce) || ce.File != file1 {
		t.Errorf("Recovery %+v, want file 1 missing as its damage", rec)
	}
	appendN(t, l, 1, 0, 200) // rolls into a new file 1 and on
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	verify(t, path, 40, []uint64{uint64(n), 200})
}
