package wal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/engine"
)

// TestEngineSyncMode pins the mapping of every valid SyncMode to the engine
// policy of the same meaning, so that reordering either set of constants
// cannot turn group commit into interval syncing.
func TestEngineSyncMode(t *testing.T) {
	want := map[SyncMode]engine.SyncMode{
		SyncNever:    engine.SyncNever,
		SyncInterval: engine.SyncInterval,
		SyncBatch:    engine.SyncBatch,
	}
	for m := SyncNever; m <= SyncBatch; m++ {
		w, ok := want[m]
		if !ok {
			t.Fatalf("SyncMode %v has no expected engine mode: add it here and to engineSyncMode", m)
		}
		if got := engineSyncMode(m); got != w {
			t.Errorf("engineSyncMode(%v) = %d, want %d", m, got, w)
		}
	}
	if len(want) != int(SyncBatch-SyncNever+1) {
		t.Fatalf("the table covers %d modes, Validate accepts %d", len(want), SyncBatch-SyncNever+1)
	}
}

// TestNilContext: every method that takes a context returns an error for a
// nil one, does not panic, and leaves the log working.
func TestNilContext(t *testing.T) {
	l := mustOpen(t, t.TempDir(), nil)
	defer l.Close()
	seq, err := l.Append([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	// A nil context is the misuse under test.
	var nilCtx context.Context
	for name, call := range map[string]func() error{
		"Flush":       func() error { return l.Flush(nilCtx) },
		"Sync":        func() error { return l.Sync(nilCtx) },
		"WaitDurable": func() error { return l.WaitDurable(nilCtx, seq) },
	} {
		if err := call(); !errors.Is(err, ErrNilContext) {
			t.Errorf("%s(nil): %v, want ErrNilContext", name, err)
		}
	}
	if _, err := l.Append([]byte("y")); err != nil {
		t.Fatalf("Append after nil-context calls: %v", err)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatalf("Sync after nil-context calls: %v", err)
	}
	if l.DurableSeq() != seq+1 {
		t.Fatalf("DurableSeq %d, want %d", l.DurableSeq(), seq+1)
	}
}

// TestDamageErrIsAFrameError: package frame documents that Damage.Err is
// one of its decode errors. A frame that decodes but has the wrong
// sequence number is the wal's own finding and must not be dressed as a
// frame.Damage.
func TestDamageErrIsAFrameError(t *testing.T) {
	dir := t.TempDir()
	segs := buildLog(t, dir, 100)
	end := dataEnd(t, dir)
	// A well-formed record with a wrong sequence number past the durable
	// mark: a torn tail whose first frame decodes.
	fr := make([]byte, frame.Size(10))
	frame.Encode(fr, 5000, []byte("0123456789"))
	f, err := os.OpenFile(filepath.Join(dir, segs[len(segs)-1]), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(fr, end)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Torn == nil || rep.Torn.Offset != end {
		t.Fatalf("torn tail %+v, want one at %d", rep.Torn, end)
	}
	var d *frame.Damage
	if errors.As(rep.Torn.Damage, &d) {
		switch d.Err {
		case frame.ErrZeroed, frame.ErrTruncated, frame.ErrKind, frame.ErrChecksum, frame.ErrTooLarge:
		default:
			t.Fatalf("frame.Damage with an Err outside its documented set: %v", d.Err)
		}
	}
}
