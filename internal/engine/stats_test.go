package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStatsSnapshotIsOrdered reads Stats while producers commit and
// callers Sync: no snapshot may show more synced than written, or more
// written than claimed, whatever the flusher does between the loads.
func TestStatsSnapshotIsOrdered(t *testing.T) {
	e, err := New(Config{Size: MinSize, BlockSize: 1024, FlushInterval: time.Microsecond, Sync: SyncBatch, BatchBytes: 1, BatchAge: time.Microsecond}, nullSink{})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			p := make([]byte, 100)
			for !stop.Load() {
				c, err := e.Claim(len(p), 1)
				if err != nil {
					t.Error(err)
					return
				}
				e.Put(c, 0, p)
				e.Commit(c)
			}
		})
	}
	wg.Go(func() {
		for !stop.Load() {
			if err := e.Sync(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
	})
	deadline := time.Now().Add(300 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		s := e.Stats()
		if s.Synced > s.Written || s.Written > s.Claimed {
			t.Errorf("snapshot %d: claimed %d, written %d, synced %d", n, s.Claimed, s.Written, s.Synced)
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
