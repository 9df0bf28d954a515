package ship

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShipAfterTransactionalWriter: the last offset of the partition is a
// transaction marker another (transactional) writer left. That is another
// writer's partition: the shipper cannot tell what of its own is there and
// ships from its cursor (at least once, see the package documentation),
// instead of waiting for a record at the marker's offset until
// ConnectTimeout and refusing to start.
func TestShipAfterTransactionalWriter(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 10)
	noErr(t, ToKafka(context.Background(), l, opts(c)))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("other"), kgo.DefaultProduceTopic("t"))
	noErr(t, err)
	defer cl.Close()
	ctx := context.Background()
	noErr(t, cl.BeginTransaction())
	noErr(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("another writer's")}).FirstErr())
	noErr(t, cl.EndTransaction(ctx, kgo.TryCommit))
	appendN(t, l, 10)
	st := runOnce(t, l, opts(c))
	if st.Shipped != 10 || st.Committed != 21 {
		t.Fatalf("after another writer's transaction: %+v", st)
	}
}
