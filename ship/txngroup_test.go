package ship

import (
	"context"
	"testing"
	"time"

	"github.com/appendlog/appendlog/stream"
)

// TestTxnFromGroupCommitsFullTransactions: a Transactional shipper of a
// stream's consumer group commits a transaction once MaxInFlightRecords
// records wait in it, as the documentation says, rather than at
// CommitInterval: the group delivers no more records than its window
// (MaxInFlightRecords) before they are acked, which they are only once
// their transaction commits, so a shipper that waited for the next record
// to commit would stall for CommitInterval at every transaction.
func TestTxnFromGroupCommitsFullTransactions(t *testing.T) {
	c := cluster(t, 1)
	st, err := stream.Open(t.TempDir(), nil)
	noErr(t, err)
	defer st.Close()
	s, err := st.Create("orders", nil)
	noErr(t, err)
	for seq := uint64(1); seq <= 100; seq++ {
		if _, err := s.Publish(record(seq)); err != nil {
			t.Fatal(err)
		}
	}
	o := txnOpts(c)
	o.Source = ""
	o.MaxInFlightRecords = 8
	o.CommitInterval = time.Minute
	sh, err := NewKafkaFromGroup(s, o)
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	noErr(t, sh.Run(ctx))
	stats := sh.Stats()
	noErr(t, sh.Close())
	if stats.Shipped != 100 || stats.Committed != 101 || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %+v", time.Since(start), stats)
	}
	exactlyOnce(t, readTopic(t, c, "stream:orders", 100), 100)
}
