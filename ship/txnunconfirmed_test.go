package ship

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnCloseAbortsWhatAnUnconfirmedCommitLeft: Kafka does not answer the
// commit of a transaction (the connection drops: its outcome is unknown),
// and cannot be reached for the abort after it either (InitProducerID, by
// which franz-go aborts a transaction whose end is unconfirmed, fails
// too). The transaction is still open in Kafka: Run fails, and Close, once
// Kafka answers again, aborts it, so that it does not hold read_committed
// consumers back until Kafka times it out.
func TestTxnCloseAbortsWhatAnUnconfirmedCommitLeft(t *testing.T) {
	c := cluster(t, 1)
	var down atomic.Bool
	var dropped atomic.Bool // once, the first commit
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.EndTxnRequest).Commit && !dropped.Swap(true) {
			down.Store(true)
		}
		if down.Load() {
			return nil, errors.New("connection dropped"), true
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if down.Load() {
			return nil, errors.New("connection dropped"), true
		}
		return nil, nil, false
	})
	l := openLog(t, 50)
	o := txnOpts(c)
	o.FlushTimeout = time.Second
	o.ConnectTimeout = 2 * time.Second
	o.ClientOptions = []kgo.Opt{kgo.RequestRetries(1), kgo.RetryTimeout(200 * time.Millisecond)}
	s, err := NewKafka(l, o)
	noErr(t, err)
	runErr := s.Run(context.Background())
	st := s.Stats()
	t.Logf("Run: %v; %+v", runErr, st)
	if runErr == nil || st.Shipped != 0 || st.Committed != 1 {
		t.Fatalf("a commit Kafka did not answer: %v; %+v", runErr, st)
	}
	down.Store(false)
	noErr(t, s.Close())
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	noErr(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	stable, err1 := adm.ListCommittedOffsets(context.Background(), "t")
	end, err2 := adm.ListEndOffsets(context.Background(), "t")
	noErr(t, errors.Join(err1, err2))
	so, _ := stable.Lookup("t", 0)
	eo, _ := end.Lookup("t", 0)
	if so.Offset != eo.Offset {
		t.Fatalf("a transaction is still open after Close: last stable offset %d, end %d", so.Offset, eo.Offset)
	}
}
