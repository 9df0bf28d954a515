package shmlog_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestNewFileSyncedBeforeLink: a roll makes the new file's header durable
// before it links the file into place. Page writeback keeps no order: a
// power cut that kept the new name but not its header page would leave a
// file that every later Open, roll and Reader refuses. A failed sync
// links nothing.
func TestNewFileSyncedBeforeLink(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	next := path + ".00000001"
	var synced []string
	fail := true
	l.SetFdatasync(func(f *os.File) error {
		if !strings.HasSuffix(f.Name(), ".tmp") {
			return f.Sync()
		}
		if _, err := os.Stat(next); err == nil {
			t.Errorf("%s is in place before its temporary file %s was synced", next, f.Name())
		}
		b := make([]byte, shmlog.HeaderSize)
		if _, err := f.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if _, idx, err := shmlog.DecodeHeader(f.Name(), b); err != nil || idx != 1 {
			t.Errorf("%s synced before its header was written: file %d, %v", f.Name(), idx, err)
		}
		synced = append(synced, f.Name())
		if fail {
			return errors.New("injected sync failure")
		}
		return f.Sync()
	})
	rec := make([]byte, 3000)
	for range 2 {
		if _, err = l.Append(rec); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "injected sync failure") {
		t.Fatalf("Append with the new file's sync failing: %v, want that error", err)
	}
	if _, err := os.Stat(next); err == nil {
		t.Fatalf("%s linked into place though its sync failed", next)
	}
	fail = false
	if _, err := l.Append(rec); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 {
		t.Fatalf("temporary files synced: %q, want file 1's twice (a failed roll and its retry)", synced)
	}
	if _, err := os.Stat(next); err != nil {
		t.Fatal(err)
	}
}
