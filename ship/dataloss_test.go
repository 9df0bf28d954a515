package ship

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShipBrokerDataLossIsLoud: Kafka answers a produce request with
// OUT_OF_ORDER_SEQUENCE_NUMBER, which for the idempotent producer means
// the broker no longer holds records this producer wrote before (an
// unclean leader election, a replica that lost its disk). The cursor has
// passed those records, so they are lost unless Run says so: it must stop
// with the error, not let the client take a new producer ID, renumber and
// go on as if nothing happened.
func TestShipBrokerDataLossIsLoud(t *testing.T) {
	c := cluster(t, 1)
	var lose atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !lose.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		return produceError(r, kerr.OutOfOrderSequenceNumber), nil, true
	})
	l := openLog(t, 10)
	o := opts(c)
	o.Follow = true
	s, err := NewKafka(l, o)
	noErr(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "the first 10 records acknowledged", func() bool { return s.Stats().Shipped == 10 })
	lose.Store(true) // the next produce request: Kafka lost the first 10
	appendN(t, l, 10)
	select {
	case err := <-done:
		if !errors.Is(err, kerr.OutOfOrderSequenceNumber) || !strings.Contains(err.Error(), "record 11") {
			t.Fatalf("Run after Kafka reported lost records: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER naming record 11", err)
		}
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("Run went on after Kafka reported lost records (%+v); it returned %v when stopped", s.Stats(), <-done)
	}
	if st := s.Stats(); st.Committed != 11 {
		t.Fatalf("cursor committed at %d after Kafka refused record 11", st.Committed)
	}
}
