package ship

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/appendlog/appendlog/internal/kafkatest"
	"github.com/appendlog/appendlog/wal"
)

// TestRealKafkaExactlyOnce ships a million records to a real Kafka broker
// and reads them back with a separate consumer: every record once, in
// order, byte-equal, with its headers; a second run sends nothing. It runs
// with and without Transactional, each on a topic of its own.
func TestRealKafkaExactlyOnce(t *testing.T) {
	b := kafkatest.Start(t)
	for _, txn := range []bool{false, true} {
		t.Run(fmt.Sprintf("transactional=%v", txn), func(t *testing.T) {
			topic := fmt.Sprintf("t-%v", txn)
			b.CreateTopic(topic, 1)
			const n = 1_000_000
			l := openLog(t, n)
			o := &KafkaOptions{Brokers: []string{b.Addr}, Topic: topic, Source: "src-1", Transactional: txn}
			start := time.Now()
			s, err := NewKafka(l, o)
			noErr(t, err)
			noErr(t, s.Run(context.Background()))
			st := s.Stats()
			noErr(t, s.Close())
			t.Logf("shipped %d records in %v, %d transactions", n, time.Since(start), st.Transactions)
			if txn != (st.Transactions > 0) {
				t.Fatalf("%+v", st)
			}
			if st := runOnce(t, l, o); st.Shipped != 0 || st.Committed != n+1 {
				t.Fatalf("second run: %+v", st)
			}
			exactlyOnce(t, readTopicOf(t, []string{b.Addr}, topic, "src-1", n), n)
		})
	}
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
	if st.ConnectErrors == 0 || st.LastError == "" {
		t.Errorf("the outage left no trace in the stats: %+v", st)
	}
	exactlyOnce(t, readTopicAt(t, []string{b.Addr}, "src-1", int(total)), int(total))
}

// TestRealKafkaTxnFencesZombie: a Transactional shipper that stalled (a
// paused process, a network partition) with records in Kafka in an open
// transaction, and more to send, while a new shipper of the same source
// started and shipped the whole log: the new one fenced it, so its open
// transaction is aborted, what it sends after is refused, and its commit
// fails. A read_committed consumer reads every record once.
func TestRealKafkaTxnFencesZombie(t *testing.T) {
	b := kafkatest.Start(t)
	b.CreateTopic("t", 1)
	l := openLog(t, 1000)
	z := zombie(t, []string{b.Addr})
	ctx := context.Background()
	noErr(t, z.BeginTransaction())
	for seq := uint64(1); seq <= 500; seq++ {
		z.Produce(ctx, zombieRecord(seq), nil)
	}
	noErr(t, z.Flush(ctx)) // in Kafka, in the open transaction
	o := &KafkaOptions{Brokers: []string{b.Addr}, Topic: "t", Source: "src-1", Transactional: true}
	if st := runOnce(t, l, o); st.Shipped != 1000 || st.Skipped != 0 || st.Committed != 1001 || st.Transactions == 0 {
		t.Fatalf("the new shipper: %+v", st)
	}
	var refused atomic.Int64
	for seq := uint64(501); seq <= 600; seq++ {
		z.Produce(ctx, zombieRecord(seq), func(_ *kgo.Record, err error) {
			if err != nil {
				refused.Add(1)
			}
		})
	}
	_ = z.Flush(ctx)
	err := z.EndTransaction(ctx, kgo.TryCommit)
	t.Logf("the fenced shipper: %d of 100 records refused; commit: %v", refused.Load(), err)
	if err == nil {
		t.Fatal("the fenced shipper committed its transaction")
	}
	exactlyOnce(t, readTopicAt(t, []string{b.Addr}, "src-1", 1000), 1000)
}

// BenchmarkShip ships b.N records of 128 B or 1 KiB from a log to a real
// Kafka broker (the timed region includes the final flush, the last
// transaction's commit and the cursor commit), through the open Log, its
// files, and the open Log with Transactional, against the baseline:
// franz-go producing the same records, with the same headers and settings,
// from memory to the same broker, in the same run. Each run writes a new
// topic.
func BenchmarkShip(b *testing.B) {
	kb := kafkatest.Start(b)
	topics := 0
	newTopic := func() string {
		topics++
		name := fmt.Sprintf("bench%d", topics)
		kb.CreateTopic(name, 1)
		return name
	}
	for _, size := range []int{128, 1024} {
		rec := bytes.Repeat([]byte("x"), size)
		for _, from := range []string{"ship", "ship-dir", "ship-txn"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, from), func(b *testing.B) {
				benchShip(b, kb.Addr, newTopic(), rec, from == "ship-dir", from == "ship-txn")
			})
		}
		for _, base := range []string{"kgo", "kgo-txn"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, base), func(b *testing.B) {
				benchKgo(b, kb.Addr, newTopic(), rec, base == "kgo-txn")
			})
		}
	}
}

// benchKgo is a BenchmarkShip baseline: franz-go producing b.N records of
// rec from memory to topic, with the shipper's headers and settings; with
// txn, in transactions of as many records as a Transactional shipper's
// (its in-flight window less one), as it commits them.
func benchKgo(b *testing.B, addr, topic string, rec []byte, txn bool) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(DefaultLinger),
		kgo.MaxBufferedRecords(DefaultMaxInFlightRecords), kgo.MaxBufferedBytes(DefaultMaxInFlightBytes)}
	if txn {
		opts = append(opts, kgo.TransactionalID("bench-"+topic))
	}
	cl, err := kgo.NewClient(opts...)
	noErr(b, err)
	defer cl.Close()
	src := []byte("bench")
	var acked, failed atomic.Int64
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
		acked.Add(1)
	}
	ctx := context.Background()
	commit := func() {
		noErr(b, cl.Flush(ctx))
		noErr(b, cl.EndTransaction(ctx, kgo.TryCommit))
	}
	const perTxn = DefaultMaxInFlightRecords - 1
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	for i := range b.N {
		if txn && i%perTxn == 0 {
			if i > 0 {
				commit()
			}
			noErr(b, cl.BeginTransaction())
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: bytes.Clone(rec),
			Headers: []kgo.RecordHeader{{Key: HeaderSource, Value: src}, {Key: HeaderSeq, Value: strconv.AppendUint(nil, uint64(i+1), 10)}}}, promise)
	}
	if txn {
		commit()
	} else {
		noErr(b, cl.Flush(ctx))
	}
	b.StopTimer()
	if acked.Load() != int64(b.N) || failed.Load() != 0 {
		b.Fatalf("acked %d of %d, %d failed", acked.Load(), b.N, failed.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// benchShip is a BenchmarkShip run of ship: b.N records of rec from a log
// to topic, through the open Log (NewKafka) or, with fromDir, through the
// files of the closed log (NewKafkaFromDir: a follower sees the records of
// a segment only once the writer named it, after sealing the one before,
// so the writer is stopped first to offer it every record), Transactional
// with txn.
func benchShip(b *testing.B, addr, topic string, rec []byte, fromDir, txn bool) {
	l, err := wal.Open(b.TempDir(), nil)
	noErr(b, err)
	defer l.Close()
	for range b.N {
		_, err := l.Append(rec)
		noErr(b, err)
	}
	noErr(b, l.Flush(context.Background()))
	if fromDir {
		noErr(b, l.Close())
	}
	o := &KafkaOptions{Brokers: []string{addr}, Topic: topic, Source: "bench", Transactional: txn}
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	var s *Shipper
	if fromDir {
		s, err = NewKafkaFromDir(l.Dir(), nil, o)
	} else {
		s, err = NewKafka(l, o)
	}
	noErr(b, err)
	noErr(b, s.Run(context.Background()))
	b.StopTimer()
	st := s.Stats()
	noErr(b, s.Close())
	if st.Shipped != uint64(b.N) || st.Committed != uint64(b.N)+1 || txn != (st.Transactions > 0) {
		b.Fatalf("shipped %d of %d, committed %d, in %d transactions", st.Shipped, b.N, st.Committed, st.Transactions)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if txn {
		b.ReportMetric(float64(b.N)/float64(st.Transactions), "records/txn")
	}
}

// BenchmarkShipLag appends 128-byte records at a steady 100,000 a second
// for five seconds while a following shipper ships them to a real broker,
// and reports the lag from Append's return to Kafka's acknowledgement (for
// a Transactional shipper, to the commit of the record's transaction,
// when a read_committed consumer may read it): p50 and p99 over every
// record. Run it with -benchtime 1x.
func BenchmarkShipLag(b *testing.B) {
	kb := kafkatest.Start(b)
	for _, txn := range []bool{false, true} {
		b.Run(fmt.Sprintf("transactional=%v", txn), func(b *testing.B) {
			topic := fmt.Sprintf("lag-%v", txn)
			kb.CreateTopic(topic, 1)
			shipLag(b, kb.Addr, topic, txn)
		})
	}
}

// shipLag is BenchmarkShipLag on topic.
func shipLag(b *testing.B, addr, topic string, txn bool) {
	const rate, run = 100_000, 5 * time.Second
	for range b.N {
		l, err := wal.Open(b.TempDir(), nil)
		noErr(b, err)
		n := int(rate * run.Seconds())
		appended := make([]atomic.Int64, n+1)
		acked := make([]atomic.Int64, n+1)
		s, err := NewKafka(l, &KafkaOptions{Brokers: []string{addr}, Topic: topic, Source: "lag", Follow: true, Transactional: txn})
		noErr(b, err)
		s.onAck = func(seq uint64) {
			if seq >= 2 && seq <= uint64(n)+1 {
				acked[seq-1].Store(time.Now().UnixNano())
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		rec := bytes.Repeat([]byte("x"), 128)
		// Warm up: the client connects and gets its producer ID with the
		// first record, which is not measured.
		_, err = l.Append(rec)
		noErr(b, err)
		for s.Stats().Shipped < 1 {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		for i := 1; i <= n; i++ {
			if d := time.Duration(i)*time.Second/rate - time.Since(start); d > 200*time.Microsecond {
				time.Sleep(d)
			}
			seq, err := l.Append(rec)
			noErr(b, err)
			appended[seq-1].Store(time.Now().UnixNano())
		}
		deadline := time.Now().Add(time.Minute)
		for s.Stats().Shipped < uint64(n)+1 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		noErr(b, <-done)
		noErr(b, s.Close())
		noErr(b, l.Close())
		lags := make([]time.Duration, 0, n)
		for i := 1; i <= n; i++ {
			a, k := appended[i].Load(), acked[i].Load()
			if k == 0 {
				b.Fatalf("record %d was not acknowledged", i+1)
			}
			lags = append(lags, time.Duration(max(k-a, 0)))
		}
		slices.Sort(lags)
		b.Logf("lag p50 %v p90 %v p95 %v p99 %v max %v", lags[len(lags)/2], lags[len(lags)*90/100], lags[len(lags)*95/100], lags[len(lags)*99/100], lags[len(lags)-1])
		b.ReportMetric(float64(lags[len(lags)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
	}
}

// TestRealKafkaSASL: on a real broker's SASL_PLAINTEXT listener a wrong
// password or an unknown user is ErrNotAuthorized carrying Kafka's
// SASL_AUTHENTICATION_FAILED, and nothing is acked; the right password
// ships.
func TestRealKafkaSASL(t *testing.T) {
	b := kafkatest.Start(t)
	b.CreateTopic("t", 1)
	l := openLog(t, 100)
	as := func(user, pass string) *KafkaOptions {
		return &KafkaOptions{Brokers: []string{b.SASLAddr}, Topic: "t", Source: "src-1",
			ConnectTimeout: 5 * time.Second, FlushTimeout: 5 * time.Second,
			ClientOptions: []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())}}
	}
	for _, c := range [][2]string{{"shipper", "wrong"}, {"nobody", "pw"}} {
		err := ToKafka(context.Background(), l, as(c[0], c[1]))
		t.Logf("user %q, password %q: %v", c[0], c[1], err)
		if !errors.Is(err, ErrNotAuthorized) || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") || !strings.Contains(err.Error(), b.SASLAddr) {
			t.Fatalf("user %q with a wrong password: %v; want ErrNotAuthorized naming the broker and SASL_AUTHENTICATION_FAILED", c[0], err)
		}
	}
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 1 || infos[0].Committed != 1 {
		t.Fatalf("cursor after refused runs: %+v", infos)
	}
	noErr(t, ToKafka(context.Background(), l, as("shipper", kafkatest.SASLUsers["shipper"])))
	exactlyOnce(t, readTopicAt(t, []string{b.Addr}, "src-1", 100), 100)
}

// TestRealKafkaRecordTooLarge: a real broker's topic with a small
// max.message.bytes: the shipper reads the limit, ships the records before
// a larger one, and stops before it, run after run.
func TestRealKafkaRecordTooLarge(t *testing.T) {
	b := kafkatest.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	noErr(t, err)
	defer cl.Close()
	v := "10000"
	res, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &v}, "t")
	noErr(t, err)
	noErr(t, res.Err)
	l := openLog(t, 100)
	big := make([]byte, 20_000)
	rand.Read(big) // incompressible: too large for the broker after compression too
	_, err = l.Append(big)
	noErr(t, err)
	appendN(t, l, 99)
	o := &KafkaOptions{Brokers: []string{b.Addr}, Topic: "t", Source: "src-1"}
	for run := range 2 {
		err := ToKafka(context.Background(), l, o)
		if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "record 101 ") || !strings.Contains(err.Error(), "at most 9872") {
			t.Fatalf("run %d: %v; want ErrRecordTooLarge for record 101 within the topic's 10000 bytes", run, err)
		}
	}
	exactlyOnce(t, readTopicAt(t, []string{b.Addr}, "src-1", 100), 100)
}
