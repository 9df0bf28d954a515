package ship

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// payloadBytes sums the payloads of records from to to (inclusive) of the
// test logs.
func payloadBytes(from, to uint64) uint64 {
	var n uint64
	for seq := from; seq <= to; seq++ {
		n += uint64(len(record(seq)))
	}
	return n
}

// TestShipStatsLagBytesRunAgain: Stats.LagBytes of a Shipper that is Run
// again counts each record not shipped once. A record read and never sent
// (too large for the topic) was counted again when the next Run read it,
// and stayed in LagBytes once everything was shipped; records Kafka was
// not heard from for (a give-up) dropped out of it while they waited for
// the next Run.
func TestShipStatsLagBytesRunAgain(t *testing.T) {
	t.Run("never sent", func(t *testing.T) {
		c := cluster(t, 1)
		l := openLog(t, 100)
		big := bytes.Repeat([]byte("x"), 20_000)
		_, err := l.Append(big)
		noErr(t, err)
		setMax := func(v string) {
			t.Helper()
			rs, err := kadm.NewClient(mustClient(t, c)).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &v}}, "t")
			noErr(t, err)
			for _, r := range rs {
				noErr(t, r.Err)
			}
		}
		setMax("10000")
		s, err := NewKafka(l, opts(c))
		noErr(t, err)
		defer s.Close()
		if err := s.Run(context.Background()); !errors.Is(err, ErrRecordTooLarge) {
			t.Fatalf("Run with record 101 too large: %v", err)
		}
		if st := s.Stats(); st.LagRecords != 1 || st.LagBytes != uint64(len(big)) {
			t.Fatalf("stopped before record 101: %+v, want it alone in the lag (%d bytes)", st, len(big))
		}
		setMax("1000000")
		noErr(t, s.Run(context.Background()))
		if st := s.Stats(); st.Shipped != 101 || st.LagRecords != 0 || st.LagBytes != 0 {
			t.Fatalf("every record shipped: %+v, want no lag", st)
		}
	})
	t.Run("given up", func(t *testing.T) {
		c := cluster(t, 1)
		refuse := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.NotEnoughReplicas, Count: -1})
		const n = 200
		l := openLog(t, n)
		o := opts(c)
		o.FlushTimeout = 100 * time.Millisecond
		o.ClientOptions = []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)}
		s, err := NewKafka(l, o)
		noErr(t, err)
		defer s.Close()
		if err := s.Run(context.Background()); !errors.Is(err, ErrFlushTimeout) {
			t.Fatalf("Run while Kafka refuses every record for now: %v, want ErrFlushTimeout", err)
		}
		waitFor(t, "the client to give up on the records in flight", func() bool { return s.Stats().InFlight == 0 })
		if st, want := s.Stats(), payloadBytes(1, n); st.Shipped != 0 || st.LagRecords != n || st.LagBytes != want {
			t.Fatalf("nothing shipped: %+v, want LagBytes %d", st, want)
		}
		refuse.Remove()
		noErr(t, s.Run(context.Background()))
		if st := s.Stats(); st.Shipped != n || st.LagRecords != 0 || st.LagBytes != 0 {
			t.Fatalf("every record shipped: %+v, want no lag", st)
		}
		exactlyOnce(t, readTopic(t, c, "src-1", n), n)
	})
}

// TestTxnStatsLagBytesAfterAbort: the records of a transaction Kafka did
// not commit stay in Stats.LagBytes until they are shipped.
func TestTxnStatsLagBytesAfterAbort(t *testing.T) {
	c := cluster(t, 1)
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.EndTxnRequest)
		if !req.Commit {
			c.KeepControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.RequestTimedOut.Code // not applied: unconfirmed, for the client
		return resp, nil, true                     // once: the next commit goes through
	})
	const n = 50
	l := openLog(t, n)
	o := txnOpts(c)
	o.CommitInterval = time.Minute // one transaction, committed as Run ends
	s, err := NewKafka(l, o)
	noErr(t, err)
	defer s.Close()
	if err := s.Run(context.Background()); err == nil {
		t.Fatal("Run whose commit Kafka did not confirm succeeded")
	}
	if st, want := s.Stats(), payloadBytes(1, n); st.Shipped != 0 || st.LagRecords != n || st.LagBytes != want {
		t.Fatalf("the transaction aborted: %+v, want LagBytes %d", st, want)
	}
	noErr(t, s.Run(context.Background()))
	if st := s.Stats(); st.Shipped != n || st.LagRecords != 0 || st.LagBytes != 0 {
		t.Fatalf("every record shipped: %+v, want no lag", st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", n), n)
}
