package shmlog_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestLostActiveMove: a power cut lost file 0's move of active to file 1
// (Sync makes it durable; without one, page writeback is in any order),
// while file 1's frames were written back with a stale tail and a torn
// last record. The next Open recovers file 0, the active one; the roll
// into file 1 keeps it, as it holds records, but must not append at its
// stale tail: claims there land on its records (Append fails, or a frame
// lands inside a record's payload). Open, alone, recovers the files after
// the active one too: file 1's records stand, the torn one is cut, and
// appends go on after them.
func TestLostActiveMove(t *testing.T) {
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
	pos := appendN(t, l, 0, n, 10)
	n += 10
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The power cut: active back to 0, file 1's tail back to its fourth
	// record, and its last record torn.
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
	n--

	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	var ce *shmlog.CorruptError
	if rec := l.Recovery(); !errors.As(rec.Damage, &ce) || ce.File != file1 || ce.Offset != int64(shmlog.HeaderSize+pos[9]&(1<<32-1)) {
		t.Errorf("Recovery %+v, want the torn record of %s as its damage", rec, file1)
	}
	appendN(t, l, 1, 0, 200) // fills file 1 and rolls on
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	verify(t, path, 40, []uint64{uint64(n), 200})
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
