package ship

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnOpts are opts(c) for a Transactional shipper.
func txnOpts(c *kfake.Cluster) *KafkaOptions {
	o := opts(c)
	o.Transactional = true
	return o
}

// txnID is the default TransactionalID of txnOpts' shipper.
const txnID = "appendlog-ship/t/src-1"

// zombieRecord is record seq of source src-1 as the shipper sends it.
func zombieRecord(seq uint64) *kgo.Record {
	return &kgo.Record{Value: record(seq), Headers: []kgo.RecordHeader{
		{Key: HeaderSource, Value: []byte("src-1")},
		{Key: HeaderSeq, Value: []byte(strconv.FormatUint(seq, 10))},
	}}
}

// zombie returns a client producing as an earlier Transactional shipper of
// src-1 to topic t did, with its transactional ID.
func zombie(t *testing.T, addrs []string) *kgo.Client {
	t.Helper()
	z, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(txnID), kgo.RequiredAcks(kgo.AllISRAcks()))
	noErr(t, err)
	t.Cleanup(z.Close)
	return z
}

// TestTxnExactlyOnce: a Transactional shipper ships every record once, in
// order, committing transactions as it goes; a second run sends nothing;
// records appended later are shipped once.
func TestTxnExactlyOnce(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 20000)
	o := txnOpts(c)
	o.MaxInFlightRecords = 1000 // a transaction commits when it holds 1024 records
	st := runOnce(t, l, o)
	if st.Shipped != 20000 || st.Committed != 20001 || st.Transactions < 20 {
		t.Fatalf("first run: %+v (want 20000 shipped in at least 20 transactions)", st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 20000), 20000)
	if st := runOnce(t, l, o); st.Shipped != 0 || st.Skipped != 0 || st.Committed != 20001 {
		t.Fatalf("second run: %+v", st)
	}
	appendN(t, l, 500)
	noErr(t, ToKafka(context.Background(), l, o))
	exactlyOnce(t, readTopic(t, c, "src-1", 20500), 20500)
}

// TestTxnZombieProduce is the window the package documentation describes
// for a shipper that is not Transactional: the last produce request of a
// killed shipper (records 1 to 10) is still inside the broker when a new
// shipper reads back the partition, and lands after it. A Transactional
// shipper fences it: Kafka refuses it, and the topic holds each record once.
func TestTxnZombieProduce(t *testing.T) {
	c := cluster(t, 1)
	var calls atomic.Int32
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if calls.Add(1) == 1 {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	l := openLog(t, 20)
	z := zombie(t, c.ListenAddrs())
	noErr(t, z.BeginTransaction())
	var refused atomic.Int32
	for seq := uint64(1); seq <= 10; seq++ {
		z.Produce(context.Background(), zombieRecord(seq), func(_ *kgo.Record, err error) {
			if err != nil {
				refused.Add(1)
			}
		})
	}
	zdone := make(chan struct{})
	go func() { _ = z.Flush(context.Background()); close(zdone) }()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	st := runOnce(t, l, txnOpts(c))
	if st.Shipped != 20 || st.Committed != 21 {
		t.Fatalf("restarted shipper: %+v", st)
	}
	close(release)
	<-zdone
	if err := z.EndTransaction(context.Background(), kgo.TryCommit); err == nil && refused.Load() == 0 {
		t.Fatal("the fenced shipper's records were taken and its transaction committed")
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 20), 20)
}

// TestTxnReadBackPastAborted: Kafka holds records 1 to 10, committed, then
// 300 records of a transaction an earlier shipper left open when it died.
// The new shipper fences it (Kafka aborts it) and reads back past the
// aborted records and the transaction markers, in several spans, to record
// 10: it skips nothing it must send and sends nothing twice.
func TestTxnReadBackPastAborted(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 10)
	noErr(t, ToKafka(context.Background(), l, txnOpts(c)))
	rewind(t, l, 1) // a lost checkpoint: the read-back must find record 10
	appendN(t, l, 300)
	z := zombie(t, c.ListenAddrs())
	noErr(t, z.BeginTransaction())
	for seq := uint64(11); seq <= 310; seq++ {
		z.Produce(context.Background(), zombieRecord(seq), nil)
	}
	noErr(t, z.Flush(context.Background())) // in Kafka, not committed
	st := runOnce(t, l, txnOpts(c))
	if st.Skipped != 10 || st.Shipped != 300 || st.Committed != 311 {
		t.Fatalf("after a transaction left open: %+v (want 10 skipped, 300 shipped)", st)
	}
	if err := z.EndTransaction(context.Background(), kgo.TryCommit); err == nil {
		t.Fatal("the fenced shipper committed its transaction")
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 310), 310)
}

// TestTxnFollowCommitsWhileIdle: a following Transactional shipper commits
// a transaction CommitInterval after it began even when no record comes
// after it, so that its records become visible and the cursor moves.
func TestTxnFollowCommitsWhileIdle(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 5)
	o := txnOpts(c)
	o.Follow = true
	o.CommitInterval = 20 * time.Millisecond
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor := func(what string, ok func(Stats) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(s.Stats()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, s.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first 5 records committed", func(st Stats) bool { return st.Committed == 6 && st.Transactions >= 1 })
	appendN(t, l, 3)
	waitFor("3 more committed with no record after them", func(st Stats) bool { return st.Committed == 9 && st.Shipped == 8 })
	exactlyOnce(t, readTopic(t, c, "src-1", 8), 8)
	cancel()
	noErr(t, <-done)
	noErr(t, s.Close())
}

// TestTxnRefusedRecordAbortsTransaction: Kafka takes the first produce
// request of a transaction and refuses the second for good. The shipper
// aborts the transaction, so that the records Kafka took are not visible
// to a read_committed consumer either (a shipper that is not Transactional
// leaves them there, and a restart would take the refused ones for
// shipped), acks none of them, and Run fails; a new shipper, once the
// cause is gone, ships them all once.
func TestTxnRefusedRecordAbortsTransaction(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 1000)
	var calls atomic.Int32
	var refuse atomic.Bool
	refuse.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n := calls.Add(1); refuse.Load() && n == 2 {
			return produceError(req, kerr.TopicAuthorizationFailed), nil, true
		}
		return nil, nil, false
	})
	o := txnOpts(c)
	o.ClientOptions = []kgo.Opt{kgo.ProducerBatchMaxBytes(1024)} // many produce requests
	s, err := NewKafka(l, o)
	noErr(t, err)
	if err := s.Run(context.Background()); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("Run after Kafka refused a record: %v", err)
	}
	if st := s.Stats(); st.Shipped != 0 || st.Committed != 1 || calls.Load() < 2 {
		t.Fatalf("after a refused record: %+v, %d produce requests", st, calls.Load())
	}
	noErr(t, s.Close())
	refuse.Store(false)
	if st := runOnce(t, l, txnOpts(c)); st.Shipped != 1000 || st.Committed != 1001 {
		t.Fatalf("the next shipper: %+v", st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 1000), 1000)
}

// TestTxnCloseAbortsWhatRunLeftOpen: a Run stopped while Kafka holds its
// produce requests gives up on them after FlushTimeout, and its abort
// cannot finish while they are unanswered. Close, once Kafka answers,
// aborts that transaction, so it does not hold read_committed consumers
// back (the partition's last stable offset reaches its end) until Kafka
// times it out.
func TestTxnCloseAbortsWhatRunLeftOpen(t *testing.T) {
	c := cluster(t, 1)
	var hold atomic.Bool
	hold.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for deadline := time.Now().Add(5 * time.Second); hold.Load() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		return nil, nil, false
	})
	l := openLog(t, 50)
	o := txnOpts(c)
	o.Follow = true
	o.FlushTimeout = 50 * time.Millisecond
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for s.Stats().InFlight == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	noErr(t, <-done)
	if st := s.Stats(); st.Shipped != 0 || st.Committed != 1 || !strings.Contains(st.LastError, "abort the transaction") {
		t.Fatalf("after giving up: %+v", st)
	}
	hold.Store(false)
	noErr(t, s.Close())
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	noErr(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stable, err1 := adm.ListCommittedOffsets(context.Background(), "t")
		end, err2 := adm.ListEndOffsets(context.Background(), "t")
		noErr(t, errors.Join(err1, err2))
		so, _ := stable.Lookup("t", 0)
		eo, _ := end.Lookup("t", 0)
		if so.Offset == eo.Offset && eo.Offset > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a transaction is still open after Close: last stable offset %d, end %d", so.Offset, eo.Offset)
		}
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 0), 0)
}
