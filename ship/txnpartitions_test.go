package ship

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestTxnKeyedPartitionsAdded: a keyed Transactional shipper's records
// carry HeaderPartitions, which its read-back (read_committed, past the
// transaction markers) reads: after a lost checkpoint it skips the records
// Kafka holds while the topic's partition count is the one they were sent
// with, and skips nothing once a partition was added (at least once, as
// the package documentation says); every record is in Kafka.
func TestTxnKeyedPartitionsAdded(t *testing.T) {
	c := cluster(t, 3)
	const n = 300
	l := openLog(t, n)
	o := txnOpts(c)
	o.Key = func(rec []byte) []byte { return rec[:4] }
	noErr(t, ToKafka(context.Background(), l, o))
	rewind(t, l, 1)
	if st := runOnce(t, l, o); st.Skipped != n || st.Shipped != 0 {
		t.Fatalf("a lost checkpoint, the count unchanged: %+v, want %d skipped", st, n)
	}
	adm := kadm.NewClient(mustClient(t, c))
	rs, err := adm.CreatePartitions(context.Background(), 1, "t")
	noErr(t, err)
	for _, r := range rs {
		noErr(t, r.Err)
	}
	rewind(t, l, 1)
	if st := runOnce(t, l, o); st.Skipped != 0 || st.Shipped != n {
		t.Fatalf("a lost checkpoint, a partition added: %+v, want nothing skipped, %d shipped", st, n)
	}
	got := readTopic(t, c, "src-1", 2*n)
	held := make(map[uint64]int)
	for _, seqs := range got {
		for _, seq := range seqs {
			held[seq]++
		}
	}
	for seq := uint64(1); seq <= n; seq++ {
		if held[seq] != 2 {
			t.Fatalf("record %d is in Kafka %d times, want 2", seq, held[seq])
		}
	}
}
