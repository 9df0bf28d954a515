package shmlog_test

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestLogIDZeroCompat: files made by a binary that predates the log id
// carry 0 there (unknown), and a log may hold both kinds: files 0 and 1
// of an old binary's making, file 2 of a new one's. They are all this
// log's: Open recovers it, Readers read it through, and a roll copies
// file 0's id (0) into the files it makes.
func TestLogIDZeroCompat(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l.Stats().ActiveFile < 2 {
		if _, err := l.Append([]byte("before")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Rewrite the fixed fields of files 0 and 1 as an old binary wrote
	// them: log id 0, the CRC over them again.
	for idx, name := range []string{path, path + ".00000001"} {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		page := make([]byte, shmlog.HeaderSize)
		shmlog.PutHeader(page, 8192-shmlog.HeaderSize, uint64(idx))
		if _, err := f.WriteAt(page[:160], 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatalf("Open of a log whose files 0 and 1 have log id 0: %v", err)
	}
	defer l.Close()
	if d := l.Recovery().Damage; d != nil {
		t.Fatalf("Open reported damage: %v", d)
	}
	for l.Stats().ActiveFile < 4 {
		if _, err := l.Append([]byte("after")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	st, err := shmlog.Verify(path, nil)
	if err != nil || st.Records != uint64(n) {
		t.Fatalf("Verify: %+v, %v; want %d records", st, err, n)
	}
	b, err := os.ReadFile(path + ".00000003")
	if err != nil {
		t.Fatal(err)
	}
	if id := binary.LittleEndian.Uint32(b[152:]); id != 0 {
		t.Errorf("file 3, made by a roll of a log whose file 0 has log id 0: log id %#x, want 0", id)
	}
}
