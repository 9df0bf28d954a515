package ship

import (
	"context"
	"testing"
)

// TestTxnStopStopsReading: a Run whose ctx is done stops reading, as Run
// says, even while the log has records ready: a Transactional shipper
// whose reads did not look at ctx went on shipping them after the stop,
// one transaction (and commit marker) per record, since a done ctx makes
// every transaction due at once.
func TestTxnStopStopsReading(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 3000)
	o := txnOpts(c)
	o.MaxInFlightRecords = 8
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.onAck = func(uint64) { cancel() }
	noErr(t, s.Run(ctx))
	st := s.Stats()
	noErr(t, s.Close())
	if st.Transactions > 2 || st.Shipped > 16 {
		t.Fatalf("after the stop: %+v", st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", int(st.Shipped)), int(st.Shipped))
}
