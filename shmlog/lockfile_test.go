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

// TestLockFileRemovedDuringRoll: PATH.lock removed while a roll holds its
// lock. A Log opened meanwhile locks a new PATH.lock and rolls at the same
// time: it makes the next file and appends to it. The first roll, which
// found no next file before, must not put its own file in its place: its
// rename replaced the file with the other Log's records in it, and every
// reader lost them.
func TestLockFileRemovedDuringRoll(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	a, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var b *shmlog.Log
	var bErr error
	a.SetBeforeCreate(func() {
		a.SetBeforeCreate(nil)
		if bErr = os.Remove(path + ".lock"); bErr != nil {
			return
		}
		// b locks the new PATH.lock, rolls and appends in file 1.
		if b, bErr = shmlog.Open(path, o); bErr != nil {
			return
		}
		for range 20 {
			if _, bErr = b.Append([]byte("b")); bErr != nil {
				return
			}
		}
	})
	n := 0
	for a.Stats().ActiveFile == 0 {
		if _, err := a.Append([]byte("a")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if b != nil {
		defer b.Close()
	}
	if bErr != nil {
		t.Fatal(bErr)
	}
	if _, err := a.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	var got [2]int
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		got[r.Payload[0]-'a']++
		return nil
	})
	if err != nil || got != [2]int{n + 1, 20} {
		t.Fatalf("Verify: %+v, %v: %d records of a (want %d) and %d of b (want 20)", st, err, got[0], n+1, got[1])
	}
}
