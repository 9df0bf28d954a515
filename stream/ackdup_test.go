package stream

import (
	"errors"
	"sync"
	"testing"
)

// TestDuplicateAckRacingClose is TestAckRacingClose with every record
// acked twice, by two members at once (as a member whose delivery expired
// and the one it went to may): an Ack that finds the record acked in its
// slot already returns nil only if the first Ack's reaches the close's last
// checkpoint. After reopening, the committed position is exactly past the
// records of which an Ack, all of them below it included, returned nil.
func TestDuplicateAckRacingClose(t *testing.T) {
	const (
		records = 256
		ackers  = 4
		rounds  = 30
	)
	for _, closer := range []string{"group", "store"} {
		t.Run("close="+closer, func(t *testing.T) {
			for round := range rounds {
				mem, st, g := deliveredGroup(t, records)
				var errs [2][records + 1]error
				var wg sync.WaitGroup
				started := make(chan struct{})
				for a := range 2 * ackers {
					wg.Go(func() {
						if a == 0 {
							close(started)
						}
						for seq := uint64(1 + a%ackers); seq <= records; seq += ackers {
							errs[a/ackers][seq] = g.Ack(seq)
						}
					})
				}
				<-started
				if closer == "group" {
					noErr(t, g.Close())
				}
				noErr(t, st.Close())
				wg.Wait()

				prefix := uint64(0) // of each of 1..prefix an Ack returned nil
				for seq := uint64(1); seq <= records; seq++ {
					for _, err := range []error{errs[0][seq], errs[1][seq]} {
						if err != nil && !errors.Is(err, ErrClosed) {
							t.Fatalf("round %d: Ack(%d) racing Close = %v, want nil or ErrClosed", round, seq, err)
						}
					}
					if (errs[0][seq] == nil || errs[1][seq] == nil) && prefix == seq-1 {
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
					var next [2]error
					if prefix+1 <= records {
						next = [2]error{errs[0][prefix+1], errs[1][prefix+1]}
					}
					t.Fatalf("round %d: committed position after reopening = %d, want %d: of each of 1..%d an Ack returned nil; the Acks of %d returned %v",
						round, got, prefix+1, prefix, prefix+1, next)
				}
			}
		})
	}
}
