package shmlog_test

import (
	"os"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestRefusedFileLeftAsItWas: a roll that finds another log's file under
// the name of its next file refuses it, and leaves it as it was: it was
// preallocated to a whole file first, so a file the other log's Close had
// cut grew by the space of the rest of a file.
func TestRefusedFileLeftAsItWas(t *testing.T) {
	o := &shmlog.Options{MaxFileSize: 1 << 20}
	rec := make([]byte, 100<<10)
	other := logPath(t)
	b, err := shmlog.Open(other, o)
	if err != nil {
		t.Fatal(err)
	}
	for b.Stats().ActiveFile == 0 {
		if _, err := b.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil { // cuts file 1 after its tail
		t.Fatal(err)
	}
	path := logPath(t)
	a, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	data, err := os.ReadFile(other + ".00000001")
	if err != nil {
		t.Fatal(err)
	}
	if len(data) >= 1<<20 {
		t.Fatalf("the other log's file 1 has %d bytes: not cut by its Close", len(data))
	}
	file1 := path + ".00000001"
	if err := os.WriteFile(file1, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var rollErr error
	for range 20 {
		if _, rollErr = a.Append(rec); rollErr != nil {
			break
		}
	}
	if rollErr == nil || !strings.Contains(rollErr.Error(), file1) {
		t.Fatalf("appends past file 0 with another log's file 1 there: %v, want an error naming %s", rollErr, file1)
	}
	fi, err := os.Stat(file1)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(len(data)) {
		t.Errorf("%s, refused: %d bytes, want the %d it had", file1, fi.Size(), len(data))
	}
}
