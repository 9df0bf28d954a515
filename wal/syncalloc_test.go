package wal_test

import (
	"context"
	"testing"
)

// TestSyncedAppendAllocs pins the allocations of one synced append at a
// time (Append, then WaitDurable) on a warm log. The wal's own sync path
// (PrepareSync and the sync it hands the engine) allocates nothing; the
// two that remain are the engine's progress broadcast, one channel per
// wait, which the waiter needs to select on with its context.
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
	const want = 2
	if allocs > want {
		t.Errorf("Append + WaitDurable of 128 bytes: %v allocs per call, want at most %d", allocs, want)
	}
}
