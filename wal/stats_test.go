package wal

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestStatsSyncs checks the group-commit figures of Stats: one latency
// sample per completed fdatasync, the records they made durable, and the
// failed state once an fdatasync fails.
func TestStatsSyncs(t *testing.T) {
	mem := vfs.NewMem()
	failing, cf := syncFaults()
	l := mustOpen(t, "/log", &Options{fsys: vfs.WithFaults(mem, cf.injector())})
	ctx := context.Background()
	const n = 40
	for i := range n {
		seq, err := l.Append(testPayload(1, i, 100))
		noErr(t, err)
		noErr(t, l.WaitDurable(ctx, seq))
	}
	s := l.Stats()
	// The syncer records a sync's latency before the flusher counts it, so
	// while the log runs the samples may lead Syncs by the sync in flight.
	switch {
	case s.Syncs == 0 || s.SyncLatency.Count() < s.Syncs || s.SyncLatency.Count() > s.Syncs+1:
		t.Fatalf("%d syncs but %d latency samples", s.Syncs, s.SyncLatency.Count())
	case s.SyncLatency.Sum <= 0:
		t.Fatalf("latency sum %v", s.SyncLatency.Sum)
	case s.SyncedRecords != n:
		t.Fatalf("SyncedRecords %d, want %d (every record made durable once)", s.SyncedRecords, n)
	case s.Failed:
		t.Fatal("Failed before any failure")
	}

	// Stopped, the log has counted every sync it timed.
	other := mustOpen(t, "/other", &Options{fsys: mem})
	for i := range n {
		seq, err := other.Append(testPayload(2, i, 100))
		noErr(t, err)
		noErr(t, other.WaitDurable(ctx, seq))
	}
	// A lone waiter with a context that cannot be cancelled syncs on its
	// own goroutine; one whose context can be cancelled never does.
	inline := other.Stats().InlineSyncs
	if inline == 0 || inline > other.Stats().Syncs {
		t.Fatalf("%d inline syncs of %d for a lone waiter", inline, other.Stats().Syncs)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		seq, err := other.Append(testPayload(2, n+i, 100))
		noErr(t, err)
		noErr(t, other.WaitDurable(cctx, seq))
	}
	if s := other.Stats(); s.InlineSyncs != inline {
		t.Fatalf("%d inline syncs after waits with a cancellable context, want %d as before them", s.InlineSyncs, inline)
	}
	noErr(t, other.Close())
	if s := other.Stats(); s.SyncLatency.Count() != s.Syncs || s.SyncedRecords != 2*n {
		t.Fatalf("closed log: %d syncs, %d latency samples, %d records synced (want %d)", s.Syncs, s.SyncLatency.Count(), s.SyncedRecords, 2*n)
	}

	failing.Store(true)
	seq, err := l.Append(testPayload(1, n, 100))
	noErr(t, err)
	if err := l.WaitDurable(ctx, seq); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable over a failing fsync: %v", err)
	}
	if s := l.Stats(); !s.Failed || s.SyncedRecords != n {
		t.Fatalf("after a failed fsync: Failed %v, SyncedRecords %d (want true, %d)", s.Failed, s.SyncedRecords, n)
	}
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close: %v", err)
	}
}

// syncFaults returns fault counters whose fdatasyncs fail with EIO while
// the flag is set.
func syncFaults() (*atomic.Bool, *countingFaults) {
	failing := new(atomic.Bool)
	return failing, &countingFaults{ops: map[vfs.Op]int{}, inj: func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && failing.Load() {
			return 0, syscall.EIO
		}
		return n, nil
	}}
}
