package shmlog_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestStaleNextFile: a new log is not made at a path whose file 0 was
// removed while a later file of the old log was left (and is still in use
// by a Log of the old log): the new log would roll into that file, its
// records would show up in the new log, and two logs would append to one
// file. Open refuses, naming the file; once it is removed, the new log
// holds only its own records.
func TestStaleNextFile(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	old, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for old.Stats().ActiveFile == 0 {
		if _, err := old.Append([]byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{path, path + ".lock"} {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	file1 := path + ".00000001"
	if l, err := shmlog.Open(path, o); err == nil || !strings.Contains(err.Error(), file1) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("Open with %s left of a removed log: %v, want an error naming it", file1, err)
	}
	if err := os.Remove(file1); err != nil {
		t.Fatal(err)
	}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l.Stats().ActiveFile == 0 || n%10 != 0 {
		if _, err := l.Append([]byte("new")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	// The old Log appends on in the file it has.
	for range 5 {
		if _, err := old.Append([]byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		if !bytes.Equal(r.Payload, []byte("new")) {
			t.Errorf("record %#x of the new log: %q", r.Pos, r.Payload)
		}
		return nil
	})
	if err != nil || st.Records != uint64(n) {
		t.Fatalf("Verify: %+v, %v; want %d records", st, err, n)
	}
}

// TestRollAfterRemoval: a Log whose log was removed, and a new log made at
// the same path, must not roll into the new log's files: they are found by
// name, and the new log's file 1 would be renamed over (its records lost
// to every later reader) or appended to by both logs. The roll fails.
func TestRollAfterRemoval(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	old, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.Append([]byte("old")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{path, path + ".lock"} {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	for l.Stats().ActiveFile == 0 || n%10 != 0 {
		if _, err := l.Append([]byte("new")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	var rollErr error
	for range 1000 {
		if _, rollErr = old.Append([]byte("old")); rollErr != nil {
			break
		}
	}
	if rollErr == nil || !strings.Contains(rollErr.Error(), path) {
		t.Errorf("the old Log's roll: %v, want an error naming %s", rollErr, path)
	}
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		if !bytes.Equal(r.Payload, []byte("new")) {
			t.Errorf("record %#x of the new log: %q", r.Pos, r.Payload)
		}
		return nil
	})
	if err != nil || st.Records != uint64(n) {
		t.Fatalf("Verify: %+v, %v; want %d records", st, err, n)
	}
}
