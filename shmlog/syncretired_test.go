package shmlog_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestSyncRetiredFile: a Reservation in a file that appends have since
// rolled past, committed after a Sync, is made durable by the next Sync:
// that Sync fdatasyncs its file again, though the last one covered it.
func TestSyncRetiredFile(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var synced []string
	l.SetFdatasync(func(f *os.File) error {
		synced = append(synced, f.Name())
		return nil
	})
	res, err := l.Reserve(100)
	if err != nil {
		t.Fatal(err)
	}
	for l.Stats().ActiveFile == 0 {
		if _, err := l.Append(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	copy(res.Bytes(), "late")
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	synced = synced[:0]
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(synced, path) {
		t.Fatalf("Sync after a commit in %s fdatasynced %q", path, synced)
	}
}

// TestSyncActiveWord: a Sync after appends rolled to a new file makes
// file 0 durable too, after the new files: its header page holds active,
// the file appends go to. Left behind by a power cut, active would name a
// file before the records synced since, and the next Open would append
// and recover there.
func TestSyncActiveWord(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var synced []string
	l.SetFdatasync(func(f *os.File) error {
		synced = append(synced, f.Name())
		return nil
	})
	ctx := context.Background()
	for file := range uint64(3) {
		for l.Stats().ActiveFile == file {
			if _, err := l.Append(make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
		synced = synced[:0]
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if len(synced) == 0 || synced[len(synced)-1] != path {
			t.Fatalf("Sync after the roll to file %d fdatasynced %q, want %s last", file+1, synced, path)
		}
	}
}
