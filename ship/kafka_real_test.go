package ship

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/kafkatest"
)

// TestRealKafkaExactlyOnce ships a million records to a real Kafka broker
// and reads them back with a separate consumer: every record once, in
// order, byte-equal, with its headers; a second run sends nothing.
func TestRealKafkaExactlyOnce(t *testing.T) {
	b := kafkatest.Start(t)
	b.CreateTopic("t", 1)
	const n = 1_000_000
	l := openLog(t, n)
	o := &KafkaOptions{Brokers: []string{b.Addr}, Topic: "t", Source: "src-1"}
	start := time.Now()
	noErr(t, ToKafka(context.Background(), l, o))
	t.Logf("shipped %d records in %v", n, time.Since(start))
	s, err := NewKafka(l, o)
	noErr(t, err)
	noErr(t, s.Run(context.Background()))
	st := s.Stats()
	noErr(t, s.Close())
	if st.Shipped != 0 || st.Committed != n+1 {
		t.Fatalf("second run: %+v", st)
	}
	exactlyOnce(t, readTopicAt(t, []string{b.Addr}, "src-1", n), n)
}

// TestRealKafkaBrokerRestart stops the broker while a following shipper
// runs and records keep being appended, then starts it again: the shipper
// retries, nothing is lost and nothing duplicated.
func TestRealKafkaBrokerRestart(t *testing.T) {
	b := kafkatest.Start(t)
	b.CreateTopic("t", 1)
	l := openLog(t, 10_000)
	o := &KafkaOptions{Brokers: []string{b.Addr}, Topic: "t", Source: "src-1", Follow: true}
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var appended atomic.Int64
	appended.Store(10_000)
	stopAppend := make(chan struct{})
	appendDone := make(chan struct{})
	go func() {
		defer close(appendDone)
		for {
			select {
			case <-stopAppend:
				return
			case <-time.After(time.Millisecond):
			}
			appendN(t, l, 50)
			appended.Add(50)
		}
	}()
	waitShipped := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for s.Stats().Shipped < n {
			if time.Now().After(deadline) {
				t.Fatalf("shipped %d of %d: %+v", s.Stats().Shipped, n, s.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitShipped(10_000)
	b.Stop()
	time.Sleep(2 * time.Second) // appends go on; the shipper retries
	before := s.Stats()
	b.Restart()
	time.Sleep(time.Second)
	close(stopAppend)
	<-appendDone
	total := uint64(appended.Load())
	waitShipped(total)
	cancel()
	noErr(t, <-done)
	st := s.Stats()
	noErr(t, s.Close())
	t.Logf("broker down: %d shipped, %d connect errors (%s); after: %+v", before.Shipped, before.ConnectErrors, before.LastError, st)
	if st.Shipped != total || st.Committed != total+1 {
		t.Fatalf("after the restart: %+v, want %d shipped", st, total)
	}
	exactlyOnce(t, readTopicAt(t, []string{b.Addr}, "src-1", int(total)), int(total))
}
