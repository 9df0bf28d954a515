package ship

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReadBackAbortedBeforeOpenTransaction: the offset before the
// partition's last stable offset is a record of an aborted transaction (a
// killed shipper's, which the new one fences), and the last stable offset
// is held there by another writer's open transaction. A read_committed
// consumer never returns that offset; the read-back must still end there
// (at least once, as for any other writer's partition), not wait until
// ConnectTimeout and refuse to start.
func TestReadBackAbortedBeforeOpenTransaction(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 10)
	noErr(t, ToKafka(context.Background(), l, txnOpts(c)))
	appendN(t, l, 5)
	ctx := context.Background()
	// A killed shipper's transaction: record 11, left open.
	z := zombie(t, c.ListenAddrs())
	noErr(t, z.BeginTransaction())
	noErr(t, z.ProduceSync(ctx, zombieRecord(11)).FirstErr())
	// Another writer's transaction, open after it.
	other, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("other"), kgo.DefaultProduceTopic("t"))
	noErr(t, err)
	defer other.Close()
	noErr(t, other.BeginTransaction())
	noErr(t, other.ProduceSync(ctx, &kgo.Record{Value: []byte("another writer's")}).FirstErr())
	o := txnOpts(c)
	o.ConnectTimeout = 3 * time.Second
	s, err := NewKafka(l, o)
	noErr(t, err)
	start := time.Now()
	runErr := s.Run(ctx)
	st := s.Stats()
	noErr(t, s.Close())
	if runErr != nil || st.Committed != 16 {
		t.Fatalf("after %v: %v; %+v", time.Since(start), runErr, st)
	}
	noErr(t, other.EndTransaction(ctx, kgo.TryAbort))
	exactlyOnce(t, readTopic(t, c, "src-1", 15), 15)
}
