package shmlog_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestForeignFileAppears: a file of another log, of the same size and
// index, appears under the name of this log's next file (copied in by
// hand, or left by a log once at this path). The roll kept it as a file
// of this log that a roll made: appends went on after its records, and
// readers delivered them as this log's. Files carry their log's id: the
// roll fails, naming the file, and readers read only this log's records.
func TestForeignFileAppears(t *testing.T) {
	o := &shmlog.Options{MaxFileSize: 8192}
	other := logPath(t)
	b, err := shmlog.Open(other, o)
	if err != nil {
		t.Fatal(err)
	}
	for b.Stats().ActiveFile == 0 {
		if _, err := b.Append([]byte("b")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
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
	file1 := path + ".00000001"
	if err := os.WriteFile(file1, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var rollErr error
	for range 1000 {
		if _, rollErr = a.Append([]byte("a")); rollErr != nil {
			break
		}
	}
	if rollErr == nil || !strings.Contains(rollErr.Error(), file1) {
		t.Errorf("appends past file 0 with another log's file 1 there: %v, want an error naming %s", rollErr, file1)
	}
	// Active stays at file 0: readers read this log's records only, and
	// once the file is removed, appends roll on.
	verifyA := func() {
		t.Helper()
		_, err := shmlog.Verify(path, func(r shmlog.Record) error {
			if !bytes.Equal(r.Payload, []byte("a")) {
				t.Fatalf("record %#x of the log: %q, another log's", r.Pos, r.Payload)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	verifyA()
	if err := os.Remove(file1); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := a.Append([]byte("a")); err != nil {
			t.Fatal(err)
		}
	}
	if a.Stats().ActiveFile != 1 {
		t.Fatalf("active file %d, want 1", a.Stats().ActiveFile)
	}
	verifyA()
}
