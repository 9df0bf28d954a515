package shmlog_test

import (
	"os"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// TestLockFileRemoved: PATH.lock removed while the log is in use. A Log
// opened since locks a new file of that name; a Log opened before must
// lock that one too, not the removed file it still holds open, or the two
// would roll (and join, and close) at once.
func TestLockFileRemoved(t *testing.T) {
	path := logPath(t)
	a, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	b, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	unlockA, err := a.LockLog()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		unlockB, err := b.LockLog()
		if err == nil {
			unlockB()
		}
		got <- err
	}()
	select {
	case err := <-got:
		unlockA()
		t.Fatalf("the Log opened after the removal took the lock while the one opened before held it (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlockA()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not handed over once released")
	}
	// Both Logs append and roll on.
	for range 2000 {
		for _, l := range []*shmlog.Log{a, b} {
			if _, err := l.Append(make([]byte, 1<<10)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
