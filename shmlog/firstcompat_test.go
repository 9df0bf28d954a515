package shmlog_test

import (
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// TestSlotFirstAfterRecovery: a slot's first word is where appends stood
// when its owner took it, and readers take an in-progress claim before it
// for an earlier owner's. A recovering Open moves the tail back (it cuts
// claims whose writers died), so a first word stored before the recovery
// can lie past claims made after it. A process of a binary that predates
// the word takes a slot without storing it: were the stale word left, a
// reader would take that live process's claim for a gone owner's and pad
// it over. The recovering Open clears the words, as it zeroes waiters.
func TestSlotFirstAfterRecovery(t *testing.T) {
	const timeout = 20 * time.Millisecond
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 1 << 20, CommitTimeout: timeout}
	a, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	// A process claims 64 bytes and is killed before writing its header:
	// the tail moves on, the frame stays zero.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 64)
	if _, err := f.WriteAt(b[:], 256); err != nil { // file 0's tail word
		t.Fatal(err)
	}
	f.Close()
	a2, err := shmlog.Open(path, o) // first = 64
	if err != nil {
		t.Fatal(err)
	}
	slot := a2.Slot()
	if got := a2.SlotFirst(slot); got != 64 {
		t.Fatalf("first %d, want 64", got)
	}
	if err := a2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b0, err := shmlog.Open(path, o) // alone: recovers, the tail back to 0
	if err != nil {
		t.Fatal(err)
	}
	defer b0.Close()
	stale := b0.SlotFirst(slot)
	c, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Slot() != slot {
		t.Fatalf("took slot %d, want %d", c.Slot(), slot)
	}
	c.SetSlotFirst(slot, stale) // as a binary without the word leaves it
	res, err := c.Reserve(8)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b0.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*timeout)
	defer cancel()
	if err := r.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait at a live process's claim: %v, want a timeout", err)
	}
	if err := res.Commit(); err != nil {
		t.Fatalf("the live owner's Commit: %v (its claim at %#x was padded over: slot first %#x left from before the recovery)", err, res.Pos(), stale)
	}
}
