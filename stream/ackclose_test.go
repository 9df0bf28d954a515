package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestAckRacingClose acks delivered records, from several members, while
// the group (or the store) closes: an Ack that returned nil counts, and
// one the group did not take returned ErrClosed. After reopening, the
// group's committed position is exactly past the records whose acks, all
// of them below it included, returned nil.
func TestAckRacingClose(t *testing.T) {
	const (
		records = 256
		ackers  = 4
		rounds  = 30
	)
	for _, closer := range []string{"group", "store"} {
		t.Run("close="+closer, func(t *testing.T) {
			for round := range rounds {
				mem, st, g := deliveredGroup(t, records)
				// Each acker acks its share of the records in order; the
				// close comes once the first has begun.
				var errs [records + 1]error
				var wg sync.WaitGroup
				started := make(chan struct{})
				for a := range ackers {
					wg.Go(func() {
						if a == 0 {
							close(started)
						}
						for seq := uint64(1 + a); seq <= records; seq += ackers {
							errs[seq] = g.Ack(seq)
						}
					})
				}
				<-started
				if closer == "group" {
					noErr(t, g.Close())
				}
				noErr(t, st.Close())
				wg.Wait()

				prefix := uint64(0) // the acks 1..prefix returned nil
				for seq := uint64(1); seq <= records; seq++ {
					if err := errs[seq]; err != nil && !errors.Is(err, ErrClosed) {
						t.Fatalf("round %d: Ack(%d) racing Close = %v, want nil or ErrClosed", round, seq, err)
					}
					if errs[seq] == nil && prefix == seq-1 {
						prefix = seq
					}
				}
				st, err := Open("/st", &Options{IdleTimeout: -1, fsys: mem})
				noErr(t, err)
				s, err := st.Stream("s")
				noErr(t, err)
				g, err = s.Group("g", nil)
				noErr(t, err)
				got := g.Committed()
				noErr(t, st.Close())
				if got != prefix+1 {
					t.Fatalf("round %d: committed position after reopening = %d, want %d: acks 1..%d returned nil, Ack(%d) = %v",
						round, got, prefix+1, prefix, prefix+1, describeAck(errs[:], prefix+1))
				}
			}
		})
	}
}

// describeAck returns what Ack(seq) returned, or that seq is past them.
func describeAck(errs []error, seq uint64) string {
	if seq >= uint64(len(errs)) {
		return "(none: every record acked)"
	}
	return fmt.Sprint(errs[seq])
}

// deliveredGroup opens a store on a new MemFS holding stream "s" with n
// durable records, all of them delivered to its group "g" (checkpointed
// only by Close), for the tests of Acks racing a close.
func deliveredGroup(t *testing.T, n int) (*vfs.MemFS, *Store, *Group) {
	t.Helper()
	ctx := context.Background()
	mem := vfs.NewMem()
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: mem})
	noErr(t, err)
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{CheckpointEvery: 1 << 40})
	noErr(t, err)
	for range n {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	noErr(t, s.WaitDurable(ctx, uint64(n)))
	for range n {
		_, err := g.Next(ctx, nil)
		noErr(t, err)
	}
	return mem, st, g
}
