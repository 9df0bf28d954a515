package ship

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// holdProduce makes c keep every produce request while the returned flag
// is set (Kafka stops answering, the connection stays up).
func holdProduce(c *kfake.Cluster) *atomic.Bool {
	var hold atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for hold.Load() {
			time.Sleep(time.Millisecond)
		}
		return nil, nil, false
	})
	return &hold
}

// TestShipFlushTimeoutIsErrFlushTimeout: a Run without Follow that read
// every record but was not told within FlushTimeout whether Kafka took the
// last ones returns ErrFlushTimeout, with the cursor committed below them;
// Run again on the same Shipper, once Kafka answers, ships the rest, and
// every record is in Kafka once.
func TestShipFlushTimeoutIsErrFlushTimeout(t *testing.T) {
	c := cluster(t, 1)
	hold := holdProduce(c)
	const n = 2000
	l := openLog(t, n)
	o := opts(c)
	o.FlushTimeout = 100 * time.Millisecond
	s, err := NewKafka(l, o)
	noErr(t, err)
	defer s.Close()
	hold.Store(true) // before the first produce request
	err = s.Run(context.Background())
	if !errors.Is(err, ErrFlushTimeout) || !strings.Contains(err.Error(), "not acknowledged within 100ms") {
		t.Fatalf("Run while Kafka holds every record: %v, want ErrFlushTimeout", err)
	}
	if st := s.Stats(); st.Committed > st.Shipped+1 {
		t.Fatalf("cursor committed at %d with %d records acknowledged", st.Committed, st.Shipped)
	}
	hold.Store(false)
	noErr(t, s.Run(context.Background()))
	if st := s.Stats(); st.Committed != n+1 {
		t.Fatalf("after the second Run: committed %d, want %d (%+v)", st.Committed, n+1, st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", n), n)
}

// TestSettleWaitsForInFlight: settle, which readies a second Run, returns
// as soon as the last record in flight is answered for (no polling), and
// at once when its context is done.
func TestSettleWaitsForInFlight(t *testing.T) {
	c := cluster(t, 1)
	sh, err := NewKafka(openLog(t, 10), &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second})
	noErr(t, err)
	defer sh.Close()
	sh.inFlight.Add(2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := sh.settle(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("settle with records in flight and a done context: %v", err)
	}
	answered := make(chan time.Time, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		sh.doneInFlight()
		time.Sleep(50 * time.Millisecond)
		answered <- time.Now()
		sh.doneInFlight()
	}()
	noErr(t, sh.settle(context.Background()))
	if late := time.Since(<-answered); late > 500*time.Millisecond {
		t.Fatalf("settle returned %v after the last record was answered for", late)
	}
	if n := sh.inFlight.Load(); n != 0 {
		t.Fatalf("settle returned with %d in flight", n)
	}
}
