package wal_test

import (
	"context"
	"testing"
)

// TestSyncedAppendAllocs pins the allocations of one synced append at a
// time (Append, then WaitDurable) on a warm log: none. The sync handed to
// the engine's syncer is one reused job, and the waiter waits on a pooled
// engine.Waiter rather than a channel made per wait.
func TestSyncedAppendAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("syncs a few hundred times")
	}
	l := openLog(t, t.TempDir(), nil) // SyncBatch
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	p := payloadTemplate(128)
	var opErr error
	appendSync := func() {
		seq, err := l.Append(p)
		if err == nil {
			err = l.WaitDurable(ctx, seq)
		}
		if err != nil && opErr == nil {
			opErr = err
		}
	}
	for range 50 {
		appendSync()
	}
	allocs := testing.AllocsPerRun(200, appendSync)
	if opErr != nil {
		t.Fatal(opErr)
	}
	if allocs != 0 {
		t.Errorf("Append + WaitDurable of 128 bytes: %v allocs per call, want 0", allocs)
	}
}
