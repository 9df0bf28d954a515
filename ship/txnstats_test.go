package ship

import (
	"context"
	"testing"
	"time"
)

// TestTxnStatsCountWhatWaitsForCommit: records Kafka acknowledged in a
// transaction that has not committed yet are not shipped: Stats counts
// them in LagRecords, and in LagBytes and OldestUnshipped too, not as if
// nothing waited.
func TestTxnStatsCountWhatWaitsForCommit(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 5)
	var want uint64
	for seq := uint64(1); seq <= 5; seq++ {
		want += uint64(len(record(seq)))
	}
	o := txnOpts(c)
	o.Follow = true
	o.CommitInterval = time.Minute
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for st := s.Stats(); st.InFlight != 0 || st.LagRecords != 5 || st.OldestUnshipped < 50*time.Millisecond; st = s.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("acknowledged, waiting for the commit: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := s.Stats()
	if st.LagBytes != want || st.Shipped != 0 {
		t.Fatalf("acknowledged, waiting for the commit: %+v, want LagBytes %d", st, want)
	}
	cancel()
	noErr(t, <-done)
	st = s.Stats()
	noErr(t, s.Close())
	if st.Shipped != 5 || st.LagRecords != 0 || st.LagBytes != 0 || st.OldestUnshipped != 0 {
		t.Fatalf("committed: %+v", st)
	}
}
