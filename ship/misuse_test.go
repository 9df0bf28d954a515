package ship

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// waitFor waits, with a generous deadline, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runResult waits, with a generous deadline, for a Run started on a
// goroutine to return.
func runResult(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: Run did not return", what)
		return nil
	}
}

// TestShipCloseDuringRun: Close of a Shipper whose Run is following the
// log stops that Run as a done ctx would (it commits what Kafka acked)
// and waits for it. Before, Close closed the cursor under Run's Next,
// and Run waited for new records forever.
func TestShipCloseDuringRun(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 1000)
	o := opts(c)
	o.Follow = true
	s, err := NewKafka(l, o)
	noErr(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	waitFor(t, "1000 records shipped", func() bool { return s.Stats().Shipped == 1000 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	noErr(t, runResult(t, done, "Close during Run"))
	select {
	case err := <-closed:
		noErr(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Close did not return")
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	noErr(t, s.Close())
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 1 || infos[0].Committed != 1001 {
		t.Fatalf("cursor after Close during Run: %+v, want committed 1001", infos)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 1000), 1000)
}

// TestShipRunMisuse: a second Run while one runs is refused at once (two
// Runs read one cursor: they raced, and one hung); Run on a closed
// Shipper is ErrClosed, not "cannot reach Kafka: client closed"; a nil
// ctx is an error, not a panic; Run may run again once it returned.
func TestShipRunMisuse(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 100)
	o := opts(c)
	o.Follow = true
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "100 records shipped", func() bool { return s.Stats().Shipped == 100 })
	second := make(chan error, 1)
	go func() { second <- s.Run(context.Background()) }()
	if err := runResult(t, second, "a second Run"); err == nil || !strings.Contains(err.Error(), "another Run") {
		t.Fatalf("a second Run while one runs: %v", err)
	}
	cancel()
	noErr(t, runResult(t, done, "the first Run"))

	//lint:ignore SA1012 a nil ctx is the misuse tested
	if err := s.Run(nil); err == nil {
		t.Fatal("Run(nil) succeeded")
	}
	// Run again, on new records, after the first returned.
	appendN(t, l, 50)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() { done <- s.Run(ctx2) }()
	waitFor(t, "150 records shipped", func() bool { return s.Stats().Committed == 151 || s.Stats().Shipped == 150 })
	cancel2()
	noErr(t, runResult(t, done, "Run again"))
	noErr(t, s.Close())
	if err := s.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 150), 150)
}

// TestShipEmptyBroker: an empty entry in Brokers (a trailing comma in a
// list) is refused: the client took it for localhost:9092 and shipped to
// whatever Kafka listens there.
func TestShipEmptyBroker(t *testing.T) {
	l := openLog(t, 1)
	for _, brokers := range [][]string{{""}, {"127.0.0.1:9092", ""}, {" "}} {
		s, err := NewKafka(l, &KafkaOptions{Brokers: brokers, Topic: "t"})
		if err == nil {
			s.Close()
			t.Fatalf("NewKafka with Brokers %q succeeded", brokers)
		}
		if !strings.Contains(err.Error(), "Brokers[") {
			t.Fatalf("NewKafka with Brokers %q: %v", brokers, err)
		}
	}
}
