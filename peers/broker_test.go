package peers

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

// Message brokers. The workload is `appendlog broker --mode streams`:
// S streams, each with one publisher goroutine and one consumer group of
// one member, 128-byte messages (an 8-byte publish time, then a payload
// record naming the publisher and its counter). The timed region runs from
// the first publish until every group has received and acked every
// message, and includes the publishers' last confirm. Each consumer checks
// every message as it arrives: well formed, from its stream's publisher,
// counters exactly once and in order; after the run the counts must equal
// what was published. End-to-end latency is publish call to delivery.
//
// Contenders:
//   - appendlog: package stream in this process. sync=batch is SyncBatch
//     (an fdatasync at least every 10 ms while data arrives, shared by
//     everything it covers); sync=never leaves syncing to the OS.
//   - nats: NATS JetStream, github.com/nats-io/nats-server/v2 embedded as a
//     library with file storage, over a loopback client connection
//     (github.com/nats-io/nats.go/jetstream): publishes are asynchronous
//     with acks, consumers are durable pull consumers with explicit acks.
//     sync=batch sets the server's SyncInterval to 10 ms, the closest
//     match; sync=never keeps its default (2 minutes).

// brokerMsgSize is the size of a message: the publish time and a record.
const brokerMsgSize = 128

// brokerContender runs one broker: open creates S streams and their
// groups; the returned run publishes n messages to each stream through
// publish and hands every delivery to deliver, until done.
type brokerContender struct {
	name string
	open func(tb testing.TB, dir string, streams int, syncBatch bool) (brokerRun, error)
}

// brokerRun is an open broker.
type brokerRun interface {
	// publish publishes msg to stream i; one goroutine per stream.
	publish(i int, msg []byte) error
	// confirm waits until every message published to stream i is
	// confirmed (durable where the sync mode says so, stored by NATS).
	confirm(ctx context.Context, i int) error
	// consume delivers stream i's messages to fn, acking each after fn,
	// until ctx is done. One goroutine per stream.
	consume(ctx context.Context, i int, fn func(msg []byte)) error
	close() error
}

var brokerContenders = []brokerContender{
	{name: "appendlog", open: openAppendlogBroker},
	{name: "nats", open: openNATSBroker},
}

// appendlogBroker is a stream.Store.
type appendlogBroker struct {
	st      *stream.Store
	streams []*stream.Stream
	groups  []*stream.Group
	last    []atomic.Uint64 // last seq published per stream
}

func openAppendlogBroker(tb testing.TB, dir string, streams int, syncBatch bool) (brokerRun, error) {
	st, err := stream.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	mode := wal.SyncNever
	if syncBatch {
		mode = wal.SyncBatch
	}
	b := &appendlogBroker{st: st, last: make([]atomic.Uint64, streams)}
	for i := range streams {
		s, err := st.Create(fmt.Sprintf("s%05d", i), &stream.Config{Sync: mode})
		if err != nil {
			st.Close()
			return nil, err
		}
		g, err := s.Group("g", nil)
		if err != nil {
			st.Close()
			return nil, err
		}
		b.streams, b.groups = append(b.streams, s), append(b.groups, g)
	}
	return b, nil
}

func (b *appendlogBroker) publish(i int, msg []byte) error {
	seq, err := b.streams[i].Publish(msg)
	b.last[i].Store(seq)
	return err
}

func (b *appendlogBroker) confirm(ctx context.Context, i int) error {
	if seq := b.last[i].Load(); seq > 0 {
		return b.streams[i].WaitDurable(ctx, seq)
	}
	return nil
}

func (b *appendlogBroker) consume(ctx context.Context, i int, fn func(msg []byte)) error {
	g := b.groups[i]
	var buf []byte
	for {
		m, err := g.Next(ctx, buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		buf = m.Data
		fn(m.Data)
		if err := g.Ack(m.Seq); err != nil {
			return err
		}
	}
}

func (b *appendlogBroker) close() error {
	var errs []error
	for _, g := range b.groups {
		errs = append(errs, g.Close())
	}
	return errors.Join(append(errs, b.st.Close())...)
}

// natsBroker is an embedded NATS server with JetStream and one client
// connection.
type natsBroker struct {
	srv     *server.Server
	nc      *nats.Conn
	js      jetstream.JetStream   // for setup
	pubs    []jetstream.JetStream // one per stream's publisher: each its own window of unacked publishes
	streams []string
	cons    []jetstream.Consumer
}

// natsStall makes a publisher whose window of unacked publishes is full
// wait for acks (flow control) rather than fail.
var natsStall = []jetstream.PublishOpt{jetstream.WithStallWait(time.Minute)}

func openNATSBroker(tb testing.TB, dir string, streams int, syncBatch bool) (brokerRun, error) {
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: dir,
		// No memory or store limit below what the runs write.
		JetStreamMaxMemory: 1 << 30, JetStreamMaxStore: 64 << 30,
	}
	if syncBatch {
		opts.SyncInterval = 10 * time.Millisecond
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats: the server did not start")
	}
	b := &natsBroker{srv: srv}
	if b.nc, err = nats.Connect(srv.ClientURL()); err != nil {
		b.close()
		return nil, err
	}
	if b.js, err = jetstream.New(b.nc); err != nil {
		b.close()
		return nil, err
	}
	ctx := context.Background()
	for i := range streams {
		name := fmt.Sprintf("s%05d", i)
		s, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.FileStorage})
		if err != nil {
			b.close()
			return nil, err
		}
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "g", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024})
		if err != nil {
			b.close()
			return nil, err
		}
		js, err := jetstream.New(b.nc, jetstream.WithPublishAsyncMaxPending(4096))
		if err != nil {
			b.close()
			return nil, err
		}
		b.streams, b.cons, b.pubs = append(b.streams, name), append(b.cons, c), append(b.pubs, js)
	}
	return b, nil
}

func (b *natsBroker) publish(i int, msg []byte) error {
	_, err := b.pubs[i].PublishAsync(b.streams[i], msg, natsStall...)
	return err
}

func (b *natsBroker) confirm(ctx context.Context, i int) error {
	select {
	case <-b.pubs[i].PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *natsBroker) consume(ctx context.Context, i int, fn func(msg []byte)) error {
	var ackErr atomic.Pointer[error]
	cc, err := b.cons[i].Consume(func(m jetstream.Msg) {
		fn(m.Data())
		if err := m.Ack(); err != nil {
			ackErr.CompareAndSwap(nil, &err)
		}
	}, jetstream.PullMaxMessages(1024))
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	if p := ackErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (b *natsBroker) close() error {
	if b.nc != nil {
		b.nc.Close()
	}
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
	return nil
}

// brokerResult is what one run measured and checked.
type brokerResult struct {
	elapsed  time.Duration
	received int64
	lat      []time.Duration // a sample of end-to-end latencies
}

// runBroker publishes n messages to each of the contender's streams and
// consumes them all, checking each; it returns once every message arrived,
// or with the first problem.
func runBroker(tb testing.TB, c brokerContender, streams, n int, syncBatch bool, rate float64, timed func(start bool)) (brokerResult, error) {
	br, err := c.open(tb, tb.TempDir(), streams, syncBatch)
	if err != nil {
		return brokerResult{}, fmt.Errorf("%s: open: %w", c.name, err)
	}
	var res brokerResult
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var received atomic.Int64
	var remaining sync.WaitGroup
	remaining.Add(streams)
	lats := make([][]time.Duration, streams)
	var cons sync.WaitGroup
	for i := range streams {
		next := uint64(0)
		k := 0
		cons.Go(func() {
			err := br.consume(ctx, i, func(msg []byte) {
				now := time.Now().UnixNano()
				if len(msg) != brokerMsgSize {
					cancel(fmt.Errorf("stream %d: a %d-byte message, want %d", i, len(msg), brokerMsgSize))
					return
				}
				w, ctr, err := payload.Decode(msg[8:])
				switch {
				case err != nil:
					cancel(fmt.Errorf("stream %d: message %d: %w", i, next, err))
					return
				case w != i || ctr != next:
					cancel(fmt.Errorf("stream %d: got publisher %d counter %d, want publisher %d counter %d (lost, duplicated or reordered)", i, w, ctr, i, next))
					return
				}
				next++
				if k++; k%16 == 0 {
					lats[i] = append(lats[i], time.Duration(now-int64(binary.LittleEndian.Uint64(msg))))
				}
				received.Add(1)
				if next == uint64(n) {
					remaining.Done()
				}
			})
			if err != nil {
				cancel(fmt.Errorf("stream %d: consume: %w", i, err))
			}
		})
	}
	timed(true)
	start := time.Now()
	var pubs sync.WaitGroup
	for i := range streams {
		pubs.Go(func() {
			msg := make([]byte, brokerMsgSize)
			every := time.Duration(0) // between two publishes, with rate
			if rate > 0 {
				every = time.Duration(float64(time.Second) * float64(streams) / rate)
			}
			for ctr := range uint64(n) {
				if every > 0 {
					// Keep to the schedule; a publisher behind it catches up.
					if d := time.Duration(ctr)*every - time.Since(start); d > 200*time.Microsecond {
						time.Sleep(d)
					}
				}
				binary.LittleEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
				if err := payload.Encode(msg[8:], i, ctr); err != nil {
					cancel(err)
					return
				}
				if err := br.publish(i, msg); err != nil {
					cancel(fmt.Errorf("stream %d: publish %d: %w", i, ctr, err))
					return
				}
			}
			if err := br.confirm(ctx, i); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("stream %d: confirm: %w", i, err))
			}
		})
	}
	pubs.Wait()
	all := make(chan struct{})
	go func() { remaining.Wait(); close(all) }()
	select {
	case <-all:
	case <-ctx.Done():
	case <-time.After(2 * time.Minute):
		cancel(fmt.Errorf("%s: %d of %d messages arrived in 2 minutes", c.name, received.Load(), streams*n))
	}
	res.elapsed = time.Since(start)
	timed(false)
	runErr := context.Cause(ctx)
	cancel(nil)
	cons.Wait()
	if runErr == nil {
		<-all // every stream finished; the waiter above exits
	}
	if err := br.close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("%s: close: %w", c.name, err)
	}
	if runErr != nil {
		return res, runErr
	}
	res.received = received.Load()
	if res.received != int64(streams*n) {
		return res, fmt.Errorf("%s: received %d messages, published %d", c.name, res.received, streams*n)
	}
	for _, l := range lats {
		res.lat = append(res.lat, l...)
	}
	slices.Sort(res.lat)
	return res, nil
}

// quantile returns the q quantile of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[int(math.Round(q*float64(len(ds)-1)))]
}

// TestBrokerContenders runs every broker on a small workload: every message
// arrives once, in order, checked.
func TestBrokerContenders(t *testing.T) {
	for _, c := range brokerContenders {
		for _, syncBatch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", c.name, syncBatch), func(t *testing.T) {
				res, err := runBroker(t, c, 4, 3000, syncBatch, 0, func(bool) {})
				if err != nil {
					t.Fatal(err)
				}
				if res.received != 12000 {
					t.Fatalf("received %d", res.received)
				}
			})
		}
	}
}

// BenchmarkBroker is the `appendlog broker --mode streams` shape, 20
// streams with a publisher and a one-member group each, for every
// contender; b.N messages in all. It reports msg/s and end-to-end
// latency quantiles. rate=max publishes as fast as the broker takes them
// (latency is then queueing); rate=50k paces the publishers at 50,000
// messages a second in all, below every contender's saturation here, for
// latency.
func BenchmarkBroker(b *testing.B) {
	const streams = 20
	for _, rate := range []float64{0, 50e3} {
		for _, mode := range []string{"never", "batch"} {
			for _, c := range brokerContenders {
				name := "max"
				if rate > 0 {
					name = fmt.Sprintf("%.0fk", rate/1e3)
				}
				b.Run(fmt.Sprintf("rate=%s/sync=%s/%s", name, mode, c.name), func(b *testing.B) {
					benchBroker(b, c, streams, mode == "batch", rate)
				})
			}
		}
	}
}

func benchBroker(b *testing.B, c brokerContender, streams int, syncBatch bool, rate float64) {
	n := max(b.N/streams, 1)
	b.SetBytes(brokerMsgSize)
	b.ReportAllocs()
	res, err := runBroker(b, c, streams, n, syncBatch, rate, func(start bool) {
		if start {
			b.ResetTimer()
		} else {
			b.StopTimer()
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(res.received)/res.elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(quantile(res.lat, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(quantile(res.lat, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(quantile(res.lat, 0.999).Microseconds()), "p99.9-µs")
}

// lossyBroker loses stream 0's sixth message.
type lossyBroker struct {
	brokerRun
	n atomic.Int64
}

func (b *lossyBroker) publish(i int, msg []byte) error {
	if i == 0 && b.n.Add(1) == 6 {
		return nil
	}
	return b.brokerRun.publish(i, msg)
}

// TestBrokerCheckCatchesLoss: a broker that loses a message fails the run,
// naming the stream and the counter.
func TestBrokerCheckCatchesLoss(t *testing.T) {
	lossy := brokerContender{name: "lossy", open: func(tb testing.TB, dir string, streams int, syncBatch bool) (brokerRun, error) {
		br, err := openAppendlogBroker(tb, dir, streams, syncBatch)
		if err != nil {
			return nil, err
		}
		return &lossyBroker{brokerRun: br}, nil
	}}
	_, err := runBroker(t, lossy, 2, 100, false, 0, func(bool) {})
	if err == nil || !strings.Contains(err.Error(), "stream 0: got publisher 0 counter 6, want publisher 0 counter 5") {
		t.Fatalf("a lost message: %v", err)
	}
}
