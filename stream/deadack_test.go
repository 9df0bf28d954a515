package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestAckRacingDeath acks each record while another member nacks its last
// delivery (MaxDeliver 1): the record is acked or dead, never both, and
// OnDead reports only the records counted dead.
func TestAckRacingDeath(t *testing.T) {
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: vfs.NewMem()})
	noErr(t, err)
	defer func() { noErr(t, st.Close()) }()
	s, err := st.Create("s", nil)
	noErr(t, err)
	var reported atomic.Uint64
	g, err := s.Group("g", &GroupOptions{MaxDeliver: 1, OnDead: func(uint64, int) { reported.Add(1) }})
	noErr(t, err)
	defer func() { noErr(t, g.Close()) }()
	const n = 20000
	for range n {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	ctx := context.Background()
	for range n {
		m, err := g.Next(ctx, nil)
		noErr(t, err)
		var wg sync.WaitGroup
		wg.Go(func() { _ = g.Nack(m.Seq) })
		noErr(t, g.Ack(m.Seq))
		wg.Wait()
	}
	gs := g.Stats()
	if gs.Acked+gs.Dead != n || reported.Load() != gs.Dead {
		t.Fatalf("%d records: Acked %d + Dead %d, OnDead calls %d; want every record acked or dead, once", n, gs.Acked, gs.Dead, reported.Load())
	}
}
