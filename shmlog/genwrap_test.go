package shmlog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// TestSlotGenerationWrap: an in-progress word names its owner by slot and
// the low 16 bits of the slot's generation. A writer that claimed a frame
// and went away without committing it leaves the word behind; once its
// slot has been taken again often enough for the generation's low 16 bits
// to come round to the same value, the word names a live process. A reader
// must still see that the frame is no claim of that process (it was made
// before the process took the slot) and pad it over, not wait behind it
// for as long as that process lives.
func TestSlotGenerationWrap(t *testing.T) {
	const timeout = 20 * time.Millisecond
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 1 << 20, CommitTimeout: timeout}
	// l0 keeps the log open throughout: no Open recovers it.
	l0, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l0.Close()
	l1, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := l1.Reserve(8)
	if err != nil {
		t.Fatal(err)
	}
	stalePos, slot := stale.Pos(), l1.Slot()
	if err := l1.Close(); err != nil { // the claim is never committed
		t.Fatal(err)
	}
	if err := stale.Commit(); !errors.Is(err, shmlog.ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
	// l1 took the slot at generation 1 and Close freed it at 2. The next
	// Open takes it at the generation after the one set here: 1<<16 | 1,
	// whose low 16 bits are those of l1's word.
	l0.SetSlotGen(slot, 1<<16)
	l2, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.Slot() != slot {
		t.Fatalf("the new Log took slot %d, want the freed slot %d", l2.Slot(), slot)
	}
	pos, err := l2.Append([]byte("live"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := l0.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*timeout)
	defer cancel()
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("reader stuck at the dead claim at %#x, whose generation's low bits match the slot's live owner: %v", stalePos, err)
	}
	rec, ok, err := r.Next()
	if !ok || err != nil || rec.Pos != pos || string(rec.Payload) != "live" {
		t.Fatalf("Next: %#x %q %v %v, want %#x \"live\"", rec.Pos, rec.Payload, ok, err, pos)
	}
	if r.Padded() != 1 {
		t.Fatalf("padded %d frames, want 1", r.Padded())
	}
	// The live owner's own claims are still waited for, not padded.
	res, err := l2.Reserve(8)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*timeout)
	defer cancel2()
	if err := r.Wait(ctx2); err != context.DeadlineExceeded {
		t.Fatalf("Wait at the live owner's claim: %v, want a timeout", err)
	}
	if err := res.Commit(); err != nil {
		t.Fatalf("the live owner's Commit: %v", err)
	}
}
