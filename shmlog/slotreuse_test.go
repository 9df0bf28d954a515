package shmlog_test

import (
	"encoding/binary"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// TestClaimSnapshotAcrossSlotReuse: a reader waiting at a dead process's
// claim snapshots the slots while Open is taking the dead process's slot
// over, after its CAS of the slot's state and before it zeroes the slot's
// counts. The snapshot then holds the new state with the dead process's
// entered count; once the counts are zeroed, the new process, live and
// idle, never brings left up to it. The reader must still pad the claim
// over, not wait at it for as long as the new process lives.
func TestClaimSnapshotAcrossSlotReuse(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first, err := l.Append(make([]byte, 40))
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	f0, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f0.Close()
	put := func(off int64, v uint64) {
		t.Helper()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		if _, err := f0.WriteAt(b[:], off); err != nil {
			t.Fatal(err)
		}
	}
	// Slot 1: a dead process that claimed 56 bytes after the first record
	// and died before writing the header.
	const slot1 = 1024 + 64
	put(slot1, 1<<32|uint64(dead.Process.Pid))
	put(slot1+16, 1)
	put(256, 56+56)
	last, err := l.Append(make([]byte, 40))
	if err != nil {
		t.Fatal(err)
	}
	r, err := shmlog.OpenReader(path, &shmlog.Options{CommitTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rec, ok, err := r.Next(); !ok || err != nil || rec.Pos != first {
		t.Fatalf("first Next: %v %v %v", rec.Pos, ok, err)
	}
	r.Next() // stuck at the claim
	// This process takes slot 1 over: the state CAS is done; start, entered
	// and left are not stored yet when the reader snapshots the slots.
	put(slot1, 2<<32|uint64(os.Getpid()))
	time.Sleep(time.Millisecond)
	if _, ok, err := r.Next(); ok || err != nil {
		t.Fatalf("Next at the claim: %v %v", ok, err)
	}
	put(slot1+16, 0)
	put(slot1+24, 0)
	deadline := time.Now().Add(2 * time.Second)
	for {
		rec, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if rec.Pos != last {
				t.Fatalf("read %#x, want %#x", rec.Pos, last)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader still waits at the dead process's claim")
		}
		time.Sleep(time.Millisecond)
	}
	if r.Padded() != 1 {
		t.Fatalf("padded %d, want 1", r.Padded())
	}
}
