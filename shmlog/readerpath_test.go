package shmlog_test

import (
	"os"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestReaderAfterRemoval: a Reader finds each later file by name. Were the
// log removed and a new one made at its path, the Reader, reaching the
// end of a file of the old log, must not move on into the new log's file
// of the next index and deliver its records as the old log's: it fails,
// naming the path.
func TestReaderAfterRemoval(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	a, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.NewReader(0)
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	defer r.Close()
	fill := func(l *shmlog.Log, p string) {
		t.Helper()
		for n := 0; n < 5; {
			if l.Stats().ActiveFile != 0 {
				n++ // five records in file 1
			}
			if _, err := l.Append([]byte(p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill(a, "a")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{path, path + ".00000001", path + ".lock"} {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	b, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fill(b, "b")
	for {
		rec, ok, err := r.Next()
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("Next: %v, want an error naming %s", err, path)
			}
			return
		}
		if !ok {
			t.Fatal("the Reader of the removed log reached its end with no error")
		}
		if string(rec.Payload) != "a" {
			t.Fatalf("the Reader of the removed log read %q at %#x, a record of the new log", rec.Payload, rec.Pos)
		}
	}
}
