package shmlog_test

import (
	"os"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestCloseAfterFailedRollLock: a roll whose lock of PATH.lock failed
// (PATH.lock replaced by a directory) leaves the Log with no lock file
// open. Its Close must still take PATH.lock before it trims, or else not
// trim and say why: it trimmed without the lock, which Open and rolls
// hold while they map and extend the active file.
func TestCloseAfterFailedRollLock(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 1 << 20}
	a, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := shmlog.Open(path, o)
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	// b fills file 0 and rolls to file 1, where it appends a little; a
	// still has file 0, full, mapped.
	for b.Stats().ActiveFile == 0 {
		if _, err := b.Append(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	lock := path + ".lock"
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(lock, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(make([]byte, 1000)); err == nil || !strings.Contains(err.Error(), lock) {
		t.Errorf("a's Append, whose roll cannot lock %s: %v, want an error naming it", lock, err)
	}
	if err := b.Close(); err == nil {
		t.Errorf("b's Close with %s a directory: nil error", lock)
	}
	file1 := path + ".00000001"
	err = a.Close()
	if err == nil || !strings.Contains(err.Error(), lock) {
		t.Errorf("the last Close with %s a directory: %v, want an error naming it", lock, err)
	}
	if fi, err := os.Stat(file1); err != nil || fi.Size() != o.MaxFileSize {
		t.Fatalf("%s after a Close that could not lock %s: %v, %v; want it untrimmed, %d bytes", file1, lock, fi.Size(), err, o.MaxFileSize)
	}
	// With PATH.lock a file again, the log opens and reads whole.
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := shmlog.Verify(path, nil); err != nil {
		t.Fatal(err)
	}
}
