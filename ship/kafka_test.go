package ship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// cluster starts an in-process Kafka (kfake) with topic "t" of parts
// partitions, listening on 127.0.0.1.
func cluster(t *testing.T, parts int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "t"), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.1:0")
	}))
	noErr(t, err)
	t.Cleanup(c.Close)
	return c
}

// record is the payload of record seq of the test logs.
func record(seq uint64) []byte { return fmt.Appendf(nil, "key%d|record %d", seq%7, seq) }

// openLog opens a log in a new directory holding n records.
func openLog(t *testing.T, n int) *wal.Log {
	t.Helper()
	l, err := wal.Open(t.TempDir(), &wal.Options{SegmentSize: 1 << 20})
	noErr(t, err)
	t.Cleanup(func() { l.Close() })
	appendN(t, l, n)
	return l
}

func appendN(t *testing.T, l *wal.Log, n int) {
	t.Helper()
	for range n {
		seq := l.NextSeq()
		got, err := l.Append(record(seq))
		noErr(t, err)
		if got != seq {
			t.Fatalf("appended seq %d, want %d", got, seq)
		}
	}
}

// shipped is what a topic holds, as seqs per partition in offset order.
type shipped map[int32][]uint64

// readTopic consumes every record of topic "t" with a separate client and
// checks each: headers naming src and a seq, the payload of that seq.
func readTopic(t *testing.T, c *kfake.Cluster, src string, want int) shipped {
	t.Helper()
	return readTopicAt(t, c.ListenAddrs(), src, want)
}

// readTopicAt is readTopic of the brokers at addrs. It reads as the
// package documentation asks a consumer to, read_committed: the records of
// an aborted transaction (a fenced Transactional shipper's) are not read.
func readTopicAt(t *testing.T, addrs []string, src string, want int) shipped {
	t.Helper()
	return readTopicOf(t, addrs, "t", src, want)
}

// readTopicOf is readTopicAt of topic.
func readTopicOf(t *testing.T, addrs []string, topic, src string, want int) shipped {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	noErr(t, err)
	defer cl.Close()
	out := make(shipped)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", n, want)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			hsrc, hseq := recordHeaders(r)
			seq, err := strconv.ParseUint(hseq, 10, 64)
			if hsrc != src || err != nil {
				t.Fatalf("record at %d/%d: headers source %q seq %q", r.Partition, r.Offset, hsrc, hseq)
			}
			if string(r.Value) != string(record(seq)) {
				t.Fatalf("record %d: payload %q", seq, r.Value)
			}
			out[r.Partition] = append(out[r.Partition], seq)
		})
	}
	// Nothing more arrives.
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if fs := cl.PollFetches(short); fs.NumRecords() != 0 {
		t.Fatalf("%d records more than the %d expected", fs.NumRecords(), want)
	}
	return out
}

// exactlyOnce checks that the topic holds seqs 1..n once each, in order
// within each partition.
func exactlyOnce(t *testing.T, got shipped, n int) {
	t.Helper()
	seen := make(map[uint64]bool)
	for p, seqs := range got {
		for i, s := range seqs {
			if seen[s] {
				t.Fatalf("seq %d shipped twice", s)
			}
			seen[s] = true
			if i > 0 && s <= seqs[i-1] {
				t.Fatalf("partition %d: seq %d after %d", p, s, seqs[i-1])
			}
		}
	}
	for s := uint64(1); s <= uint64(n); s++ {
		if !seen[s] {
			t.Fatalf("seq %d missing", s)
		}
	}
}

// runOnce runs a shipper on l to the end and returns its stats.
func runOnce(t *testing.T, l *wal.Log, o *KafkaOptions) Stats {
	t.Helper()
	s, err := NewKafka(l, o)
	noErr(t, err)
	noErr(t, s.Run(context.Background()))
	st := s.Stats()
	noErr(t, s.Close())
	return st
}

// rewind moves the shipper's cursor back to seq, as a lost checkpoint
// would leave it.
func rewind(t *testing.T, l *wal.Log, seq uint64) {
	t.Helper()
	cur, err := l.Cursor(DefaultCursor)
	noErr(t, err)
	noErr(t, cur.Seek(seq))
	noErr(t, cur.Close())
}

func opts(c *kfake.Cluster) *KafkaOptions {
	return &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", Source: "src-1", ConnectTimeout: 5 * time.Second}
}

// TestShipExactlyOnce ships a log to one partition: every record once, in
// order, with its headers; the cursor passes them all; a second run ships
// nothing.
func TestShipExactlyOnce(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 20000)
	noErr(t, ToKafka(context.Background(), l, opts(c)))
	exactlyOnce(t, readTopic(t, c, "src-1", 20000), 20000)
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 1 || infos[0].Name != DefaultCursor || infos[0].Committed != 20001 {
		t.Fatalf("cursors after shipping: %+v", infos)
	}
	st := runOnce(t, l, opts(c))
	if st.Shipped != 0 || st.Skipped != 0 || st.Committed != 20001 || st.LagRecords != 0 {
		t.Fatalf("second run: %+v", st)
	}
	appendN(t, l, 500)
	noErr(t, ToKafka(context.Background(), l, opts(c)))
	exactlyOnce(t, readTopic(t, c, "src-1", 20500), 20500)
}

// TestShipResumesWithoutDuplicates: a cursor checkpoint older than what
// Kafka holds (a crash between Kafka's ack and the checkpoint) re-sends
// nothing: the records already there are skipped, per partition for a
// keyed topic.
func TestShipResumesWithoutDuplicates(t *testing.T) {
	for _, parts := range []int32{1, 3} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) {
			c := cluster(t, parts)
			l := openLog(t, 5000)
			o := opts(c)
			if parts > 1 {
				o.Key = func(rec []byte) []byte { return rec[:4] }
			}
			noErr(t, ToKafka(context.Background(), l, o))
			appendN(t, l, 3000)
			rewind(t, l, 1001) // the checkpoint was lost
			st := runOnce(t, l, o)
			if st.Skipped != 4000 || st.Shipped != 3000 {
				t.Fatalf("resumed run: %+v, want 4000 skipped and 3000 shipped", st)
			}
			got := readTopic(t, c, "src-1", 8000)
			exactlyOnce(t, got, 8000)
			if parts > 1 && len(got) != int(parts) {
				t.Fatalf("keyed records went to %d partitions of %d", len(got), parts)
			}
		})
	}
}

// TestShipAnotherWritersRecordIsAtLeastOnce: when a partition's last
// record is not this source's, the shipper cannot tell what it sent: it
// sends from its checkpoint again (at least once), and says so by
// skipping nothing.
func TestShipAnotherWritersRecordIsAtLeastOnce(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 100)
	noErr(t, ToKafka(context.Background(), l, opts(c)))
	o := opts(c)
	o.Source = "src-2"
	rewind(t, l, 51)
	st := runOnce(t, l, o)
	if st.Skipped != 0 || st.Shipped != 50 {
		t.Fatalf("another source's run: %+v", st)
	}
}

// TestShipFollow ships records appended while it runs, and on ctx's end
// finishes what is in flight and commits.
func TestShipFollow(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 100)
	o := opts(c)
	o.Follow = true
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for range 10 {
		appendN(t, l, 100)
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Shipped < 1100 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	noErr(t, <-done)
	st := s.Stats()
	noErr(t, s.Close())
	if st.Shipped != 1100 || st.Committed != 1101 {
		t.Fatalf("follow: %+v", st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 1100), 1100)
}

// TestShipFromDir: NewKafkaFromDir ships a log while a Log in this
// process (another process, as far as the shipper can tell: it reads the
// files and takes no lock) keeps appending; a Shipper on the open Log
// itself then resumes where it stopped, with nothing sent twice.
func TestShipFromDir(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 1000)
	o := opts(c)
	o.Follow = true
	s, err := NewKafkaFromDir(l.Dir(), nil, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for range 20 {
		appendN(t, l, 500)
		noErr(t, l.Flush(context.Background()))
		time.Sleep(2 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Stats().Committed < 11001 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	noErr(t, <-done)
	st := s.Stats()
	noErr(t, s.Close())
	if st.Shipped != 11000 || st.Committed != 11001 || st.LagRecords != 0 {
		t.Fatalf("from dir: %+v", st)
	}
	// Without Follow it stops at the end of the files when it starts.
	appendN(t, l, 300)
	noErr(t, l.Flush(context.Background()))
	s2, err := NewKafkaFromDir(l.Dir(), nil, opts(c))
	noErr(t, err)
	noErr(t, s2.Run(context.Background()))
	noErr(t, s2.Close())
	if st := s2.Stats(); st.Shipped != 300 || st.Committed != 11301 {
		t.Fatalf("from dir, caught up: %+v", st)
	}
	// The same log through its open Log: same source, same cursor.
	appendN(t, l, 200)
	if st := runOnce(t, l, opts(c)); st.Shipped != 200 || st.Skipped != 0 || st.Committed != 11501 {
		t.Fatalf("on the Log after the dir: %+v", st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 11500), 11500)

	// The cursor has one owner at a time.
	cur, err := l.Cursor(DefaultCursor)
	noErr(t, err)
	if _, err := NewKafkaFromDir(l.Dir(), nil, opts(c)); !errors.Is(err, wal.ErrCursorOpen) {
		t.Fatalf("a second shipper on a cursor in use: %v", err)
	}
	noErr(t, cur.Close())
}

// TestShipStoppedWhileStarting: a context done before Kafka answered (a
// SIGTERM while the shipper connects) stops Run with no error, nothing
// sent and the cursor where it was, reachable brokers or not.
func TestShipStoppedWhileStarting(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err)
	dead := ln.Addr().String()
	ln.Close()
	for _, brokers := range [][]string{c.ListenAddrs(), {dead}} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		o := opts(c)
		o.Brokers, o.Follow = brokers, true
		s, err := NewKafka(l, o)
		noErr(t, err)
		if err := s.Run(ctx); err != nil {
			t.Fatalf("brokers %v, stopped before starting: %v", brokers, err)
		}
		st := s.Stats()
		noErr(t, s.Close())
		if st.Shipped != 0 || st.Committed != 1 {
			t.Fatalf("brokers %v: %+v", brokers, st)
		}
	}
}

// TestShipErrors: a bad broker address, a missing topic, a partition the
// topic does not have and bad options are clear errors.
func TestShipErrors(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 10)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err)
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	o := &KafkaOptions{Brokers: []string{dead}, Topic: "t", ConnectTimeout: time.Second}
	err = ToKafka(context.Background(), l, o)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("unreachable broker: %v", err)
	}

	o = opts(c)
	o.Topic = "missing"
	err = ToKafka(context.Background(), l, o)
	if !errors.Is(err, ErrTopicMissing) || !strings.Contains(err.Error(), `"missing"`) || !strings.Contains(err.Error(), "--create-topic") {
		t.Fatalf("missing topic: %v", err)
	}

	// A damaged cursor file, through the open Log and through the files.
	noErr(t, os.MkdirAll(filepath.Join(l.Dir(), "cursors"), 0o755))
	bad := filepath.Join(l.Dir(), "cursors", "broken")
	noErr(t, os.WriteFile(bad, []byte("APNDCUR\x00 not a checkpoint"), 0o644))
	o = opts(c)
	o.Cursor = "broken"
	err = ToKafka(context.Background(), l, o)
	if !errors.Is(err, wal.ErrBadCursorFile) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a damaged cursor file: %v", err)
	}
	if _, err := NewKafkaFromDir(l.Dir(), nil, o); !errors.Is(err, wal.ErrBadCursorFile) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a damaged cursor file, from the directory: %v", err)
	}

	o = opts(c)
	o.Partition = 3
	if err := ToKafka(context.Background(), l, o); err == nil || !strings.Contains(err.Error(), "no partition 3") {
		t.Fatalf("partition 3 of 1: %v", err)
	}

	for _, bad := range []*KafkaOptions{
		{Topic: "t"},
		{Brokers: c.ListenAddrs()},
		{Brokers: c.ListenAddrs(), Topic: "t", Compression: "gzip9"},
		{Brokers: c.ListenAddrs(), Topic: "t", Partition: -1},
	} {
		if _, err := NewKafka(l, bad); err == nil {
			t.Fatalf("NewKafka(%+v) succeeded", bad)
		}
	}
	// Nothing was shipped and the cursor did not move.
	infos, err := l.Cursors()
	noErr(t, err)
	for _, in := range infos {
		if in.Name != "broken" && in.Committed != 1 || in.Name == "broken" && !errors.Is(in.Err, wal.ErrBadCursorFile) {
			t.Fatalf("cursor after failed runs: %+v", in)
		}
	}
}

// TestShipKeyedSmallWindow: with keys over 3 partitions, acks come out of
// order; with few records in flight the shipper waits for room in its
// cursor's window instead of failing an ack, and commits every record.
func TestShipKeyedSmallWindow(t *testing.T) {
	c := cluster(t, 3)
	l := openLog(t, 5000)
	o := opts(c)
	o.Key = func(rec []byte) []byte { return rec[:4] }
	o.MaxInFlightRecords = 8
	st := runOnce(t, l, o)
	if st.Shipped != 5000 || st.Committed != 5001 || st.LastError != "" {
		t.Fatalf("keyed with 8 in flight: %+v", st)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 5000), 5000)
}

// TestShipFromGroup ships a stream through a consumer group: every record
// once, in order, with the stream's identity; a second run ships only what
// was published since, and the group's position is checkpointed.
func TestShipFromGroup(t *testing.T) {
	c := cluster(t, 1)
	st, err := stream.Open(t.TempDir(), nil)
	noErr(t, err)
	defer st.Close()
	s, err := st.Create("orders", nil)
	noErr(t, err)
	seq := uint64(0)
	publish := func(n int) {
		for range n {
			seq++
			got, err := s.Publish(record(seq))
			noErr(t, err)
			if got != seq {
				t.Fatalf("published seq %d, want %d", got, seq)
			}
		}
	}
	publish(3000)
	o := &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second}
	run := func() Stats {
		t.Helper()
		sh, err := NewKafkaFromGroup(s, o)
		noErr(t, err)
		noErr(t, sh.Run(context.Background()))
		stats := sh.Stats()
		noErr(t, sh.Close())
		return stats
	}
	if stats := run(); stats.Shipped != 3000 || stats.Committed != 3001 {
		t.Fatalf("first run: %+v", stats)
	}
	publish(500)
	if stats := run(); stats.Shipped != 500 || stats.Skipped != 0 || stats.Committed != 3501 {
		t.Fatalf("second run: %+v", stats)
	}
	exactlyOnce(t, readTopic(t, c, "stream:orders", 3500), 3500)
	g, err := s.Group(DefaultCursor, nil)
	noErr(t, err)
	if g.Committed() != 3501 {
		t.Fatalf("the group reopened at %d, want 3501", g.Committed())
	}
	noErr(t, g.Close())
}

// TestShipRecordTooLarge: a record larger than the topic's
// max.message.bytes, or the client's batch limit, stops the shipper before
// it is sent, with every record before it shipped and committed and none
// after it sent; a second run stops at it again rather than skip it.
func TestShipRecordTooLarge(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 100)
	_, err := l.Append(bytes.Repeat([]byte("x"), 20_000))
	noErr(t, err)
	appendN(t, l, 99)
	adm := kadm.NewClient(mustClient(t, c))
	setMax := func(v string) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &v}}, "t")
		noErr(t, err)
		for _, r := range rs {
			noErr(t, r.Err)
		}
	}
	setMax("10000")
	for run := range 2 {
		s, err := NewKafka(l, opts(c))
		noErr(t, err)
		err = s.Run(context.Background())
		st := s.Stats()
		noErr(t, s.Close())
		t.Logf("run %d: %v", run, err)
		if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "record 101 ") || !strings.Contains(err.Error(), "max.message.bytes") {
			t.Fatalf("run %d: %v; want ErrRecordTooLarge naming record 101", run, err)
		}
		if want := uint64(100 * (1 - run)); st.Shipped != want || st.Skipped != 0 || st.Committed != 101 {
			t.Fatalf("run %d: %+v; want %d shipped, committed 101", run, st, want)
		}
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 100), 100)

	// The client's own limit counts too.
	setMax("10000000")
	o := opts(c)
	o.ClientOptions = []kgo.Opt{kgo.ProducerBatchMaxBytes(8000)}
	if err := ToKafka(context.Background(), l, o); !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "at most 7872") {
		t.Fatalf("client limit: %v", err)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 100), 100)
}

// mustClient returns a client of the cluster, closed when t ends.
func mustClient(t *testing.T, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	noErr(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// TestShipStatsLag: a broker that answers each produce request 20 ms late
// keeps the shipper behind a log of 20,000 records of 64 bytes: Stats
// shows the lag in records and bytes and an age that grows; once shipped,
// every lag figure is 0.
func TestShipStatsLag(t *testing.T) {
	c := cluster(t, 1)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		time.Sleep(20 * time.Millisecond)
		return nil, nil, false
	})
	l, err := wal.Open(t.TempDir(), nil)
	noErr(t, err)
	defer l.Close()
	const n, size = 20_000, 64
	rec := bytes.Repeat([]byte("r"), size)
	for range n {
		_, err := l.Append(rec)
		noErr(t, err)
	}
	o := opts(c)
	o.MaxInFlightRecords = 256
	o.Linger = time.Millisecond
	s, err := NewKafka(l, o)
	noErr(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	var first, later Stats
	for deadline := time.Now().Add(20 * time.Second); ; {
		st := s.Stats()
		if st.Shipped > 0 && first.Shipped == 0 {
			first = st
		}
		if st.Shipped > n/4 {
			later = st
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shipped %d in 20 s", st.Shipped)
		}
		time.Sleep(time.Millisecond)
	}
	noErr(t, <-done)
	t.Logf("first ack: %+v", first)
	t.Logf("a quarter in: %+v", later)
	// Stats reads its counters one by one while records are read and
	// acked: the records acked in between (at most a window of records in
	// flight, acknowledged together) may be counted in one figure and not
	// the other.
	slack := uint64(o.MaxInFlightRecords)
	for _, st := range []Stats{first, later} {
		if st.LagRecords == 0 || st.LagRecords > n || st.LagBytes > (st.LagRecords+slack)*size || st.LagBytes+slack*size < st.LagRecords*size {
			t.Fatalf("lag %d records, %d bytes (records of %d bytes)", st.LagRecords, st.LagBytes, size)
		}
	}
	if later.OldestUnshipped < 50*time.Millisecond || later.OldestUnshipped <= first.OldestUnshipped {
		t.Fatalf("oldest unshipped %v, then %v: want it growing while the shipper is behind", first.OldestUnshipped, later.OldestUnshipped)
	}
	st := s.Stats()
	noErr(t, s.Close())
	if st.LagRecords != 0 || st.LagBytes != 0 || st.OldestUnshipped != 0 || st.Shipped != n {
		t.Fatalf("after shipping everything: %+v", st)
	}
}

// TestShipStopGivesUpWaiting: a shipper stopped while Kafka holds its
// produce requests waits FlushTimeout for them, then commits the cursor
// without them and returns no error (the records were not refused; they
// go again next time), and the next run ships every record exactly once.
func TestShipStopGivesUpWaiting(t *testing.T) {
	c := cluster(t, 1)
	hold := holdProduce(c)
	const n = 5000
	l := openLog(t, n)
	o := opts(c)
	o.Follow = true
	o.FlushTimeout = 100 * time.Millisecond
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for s.Stats().Shipped == 0 {
		time.Sleep(time.Millisecond)
	}
	hold.Store(true) // Kafka stops answering
	// Records appended now are sent and wait: the first n may all have
	// been acknowledged before the hold.
	const more = 100
	appendN(t, l, more)
	noErr(t, l.Flush(context.Background()))
	deadline := time.Now().Add(time.Minute)
	for s.Stats().InFlight == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing in flight a minute after Kafka stopped answering: %+v", s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a stop that gave up waiting for Kafka: %v", err)
	}
	st := s.Stats()
	noErr(t, s.Close())
	if st.Committed > st.Shipped+1 {
		t.Fatalf("cursor committed at %d with %d records acknowledged", st.Committed, st.Shipped)
	}
	hold.Store(false)
	runOnce(t, l, opts(c))
	exactlyOnce(t, readTopic(t, c, "src-1", n+more), n+more)
}

// TestShipStreamLogBesideItsStore ships a stream while the process that
// holds its store publishes and consumes (what `appendlog ship --stream`
// cannot do, the store being locked): NewKafkaFromDir on the stream's log
// directory, through a cursor of its own. Every record reaches Kafka once,
// and a stream kept UntilAcked keeps what the shipper has not shipped,
// though its one group acked everything long before.
func TestShipStreamLogBesideItsStore(t *testing.T) {
	c := cluster(t, 1)
	dir := t.TempDir()
	st, err := stream.Open(dir, nil)
	noErr(t, err)
	defer st.Close()
	s, err := st.Create("orders", &stream.Config{SegmentSize: 64 << 10, Retention: stream.Retention{UntilAcked: true}})
	noErr(t, err)
	g, err := s.Group("billing", &stream.GroupOptions{CheckpointEvery: 5 * time.Millisecond})
	noErr(t, err)
	infos, err := stream.Describe(dir)
	noErr(t, err)
	if len(infos) != 1 || infos[0].Name != "orders" {
		t.Fatalf("Describe: %+v", infos)
	}
	logDir := infos[0].LogDir

	publish := func(from, n uint64) {
		for seq := from; seq < from+n; seq++ {
			got, err := s.Publish(record(seq))
			noErr(t, err)
			if got != seq {
				t.Fatalf("published seq %d, want %d", got, seq)
			}
		}
	}
	consume := func(n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var buf []byte
		for range n {
			m, err := g.Next(ctx, buf)
			noErr(t, err)
			buf = m.Data
			noErr(t, g.Ack(m.Seq))
		}
		noErr(t, g.Checkpoint())
	}

	// The shipper's cursor exists before the group acks anything: from
	// then on retention keeps what it has not shipped.
	o := opts(c)
	o.Source = "stream-log"
	o.Follow = true
	sh, err := NewKafkaFromDir(logDir, nil, o)
	noErr(t, err)
	// Records stay in the stream while the shipper is stopped.
	publish(1, 3000)
	consume(3000)
	if first := firstSeq(t, s); first != 1 {
		t.Fatalf("the group acked everything and the stream starts at %d: retention passed the shipper's cursor", first)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	publish(3001, 3000)
	consume(3000)
	deadline := time.Now().Add(30 * time.Second)
	for sh.Stats().Committed < 6001 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	noErr(t, <-done)
	stats := sh.Stats()
	noErr(t, sh.Close())
	if stats.Shipped != 6000 || stats.Committed != 6001 {
		t.Fatalf("shipped beside the store: %+v", stats)
	}
	exactlyOnce(t, readTopic(t, c, "stream-log", 6000), 6000)

	// Now that both have passed them, the old segments go.
	publish(6001, 10)
	consume(10)
	if first := firstSeq(t, s); first == 1 {
		t.Fatal("the stream kept every record after the group and the shipper passed them")
	}
	noErr(t, g.Close())
}

// firstSeq returns the first record a stream holds.
func firstSeq(t *testing.T, s *stream.Stream) uint64 {
	t.Helper()
	return s.Stats().FirstSeq
}
