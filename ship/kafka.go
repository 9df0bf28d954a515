package ship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/bits"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

// The headers every shipped record carries.
const (
	// HeaderSource is the identity of the log a record came from
	// (KafkaOptions.Source).
	HeaderSource = "appendlog-source"
	// HeaderSeq is the record's sequence number in its log, in decimal.
	HeaderSeq = "appendlog-seq"
	// HeaderPartitions, on the records of a keyed shipper
	// (KafkaOptions.Key) only, is the topic's partition count the
	// record's partition was chosen with, in decimal.
	HeaderPartitions = "appendlog-partitions"
)

// Defaults for zero KafkaOptions fields.
const (
	DefaultCursor             = "ship-kafka"
	DefaultMaxInFlightRecords = 16 << 10
	DefaultMaxInFlightBytes   = 64 << 20
	DefaultLinger             = 5 * time.Millisecond
	DefaultConnectTimeout     = 10 * time.Second
	DefaultFlushTimeout       = 30 * time.Second
	DefaultCommitInterval     = 100 * time.Millisecond
)

// ErrTopicMissing is returned (wrapped, naming the topic and the brokers)
// when the topic does not exist.
var ErrTopicMissing = errors.New("ship: the topic does not exist")

// ErrRecordTooLarge is returned (wrapped, naming the record and the
// limits) for a record larger than the topic or the client takes: the
// shipper stops before it, with the records before it shipped and
// committed, so that it is never skipped (see the package documentation).
var ErrRecordTooLarge = errors.New("ship: record too large for Kafka")

// ErrNotAuthorized is returned (wrapped, with Kafka's error) when Kafka
// refuses the shipper's user the right to write.
var ErrNotAuthorized = errors.New("ship: not authorized")

// ErrClosed is returned by Run on a Shipper that was closed.
var ErrClosed = errors.New("ship: shipper closed")

// ErrUnreachable is returned (wrapped, naming the brokers and the last
// connection error) when no broker answered within ConnectTimeout.
var ErrUnreachable = errors.New("ship: cannot reach Kafka")

// ErrFlushTimeout is returned (wrapped, with the number of records) by a
// Run that read every record it was to ship but was not told within
// FlushTimeout whether Kafka took the last ones. The cursor is committed
// below them and the next Run sends again those Kafka did not take, so
// nothing is lost: a caller may Run again. A Run stopped through its
// context that gives up so returns no error.
var ErrFlushTimeout = errors.New("ship: flush timeout")

// KafkaOptions configures a shipper. Brokers and Topic are required.
type KafkaOptions struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topic is the topic written. It must exist.
	Topic string
	// Partition is the partition every record goes to when Key is nil:
	// one partition keeps the log's total order. Default 0.
	Partition int32
	// Key, if set, returns a record's key; the record then goes to the
	// partition FNV-1a(key) modulo the topic's partition count, which
	// keeps order per key. A nil result is no key, partition 0. Key must
	// not keep rec, and must give a record the same key from run to run
	// (see Duplicates in the package documentation).
	Key func(rec []byte) []byte
	// Compression of produced batches: "zstd" (default), "lz4",
	// "snappy" or "none".
	Compression string
	// Linger is how long the producer waits to fill a batch. Default
	// DefaultLinger.
	Linger time.Duration
	// MaxInFlightRecords and MaxInFlightBytes bound what was sent to the
	// producer and not yet acknowledged. Defaults DefaultMaxInFlightRecords
	// and DefaultMaxInFlightBytes. The shipper keeps a buffer per record in
	// flight (MaxInFlightRecords rounded up to a power of two of them, each
	// as large as the largest record it held), reused from record to
	// record.
	MaxInFlightRecords int
	MaxInFlightBytes   int
	// Source is the log's identity in HeaderSource. Default: the log's
	// absolute directory.
	Source string
	// Cursor names the wal cursor the shipper reads with. Default
	// DefaultCursor.
	Cursor string
	// Follow keeps shipping new records until ctx is done. Without it,
	// Run ships the records the log holds when it starts and returns.
	Follow bool
	// ConnectTimeout bounds the wait for the brokers' first answer.
	// Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// FlushTimeout bounds how long Run waits, once it stops, for the
	// records in flight to be acknowledged before it commits the cursor
	// without them (they are sent again next time); a stop that gives up
	// so is not an error. Default DefaultFlushTimeout.
	FlushTimeout time.Duration
	// Transactional makes the shipper write through Kafka transactions,
	// which closes the one window where a record is written twice (see
	// Duplicates in the package documentation): the records Kafka
	// acknowledged are acked on the cursor only once the transaction
	// holding them committed, and a shipper that starts fences the
	// transactions of every earlier one with its TransactionalID before it
	// reads back what Kafka holds. Consumers of the topic must read with
	// isolation.level read_committed (kgo.FetchIsolationLevel(
	// kgo.ReadCommitted())): a fenced shipper's records are in the
	// partition, in an aborted transaction. The user needs Write on the
	// transactional ID.
	Transactional bool
	// TransactionalID is the transactional ID of a Transactional shipper.
	// It must stay the same from run to run of the shipper of one Source
	// and Topic, and differ from every other producer's: two shippers
	// with the same ID fence each other. Default "appendlog-ship/" +
	// Topic + "/" + Source.
	TransactionalID string
	// CommitInterval is how long a transaction of a Transactional shipper
	// gathers records before it commits (it commits sooner once
	// MaxInFlightRecords records wait in it). Records become visible to
	// read_committed consumers when it commits. Default
	// DefaultCommitInterval.
	CommitInterval time.Duration
	// ClientOptions are added to the franz-go client's options (TLS,
	// SASL, ...). kgo.TransactionTimeout bounds how long a transaction a
	// killed shipper left open holds back read_committed consumers when
	// no shipper starts to fence it (Kafka's default is used otherwise).
	ClientOptions []kgo.Opt
}

// Stats are a shipper's counters.
type Stats struct {
	// Shipped and Bytes count the records (and their payload bytes) Kafka
	// acknowledged; for a Transactional shipper, those whose transaction
	// committed.
	Shipped, Bytes uint64
	// Skipped counts the records found in Kafka already at start (see the
	// package documentation) and not sent again.
	Skipped uint64
	// InFlight is the number of records sent and not yet acknowledged
	// (for a Transactional shipper, records Kafka acknowledged wait for
	// their transaction's commit in LagRecords, not here).
	InFlight int64
	// Committed is the cursor's committed position: every record below it
	// is in Kafka. LagRecords is how many records of the log are at or
	// after it (for a log read through its files, as far as its directory
	// and last segment header tell: see wal.Cursor.End); OldestInFlight
	// how long the oldest record in flight has waited for its
	// acknowledgement.
	Committed      uint64
	LagRecords     uint64
	OldestInFlight time.Duration
	// LagBytes is the payload size of the records not yet acknowledged
	// (for a Transactional shipper, whose transaction has not committed):
	// exact for those read (in flight, about to be sent, or given up on
	// or in an aborted transaction: the next Run sends them again), and
	// for those not read yet their count times the mean size of the
	// records read. 0 once every record is shipped. Stats reads its counters
	// one at a time while the shipper runs, so a record read or acked
	// meanwhile may be counted in LagBytes and not LagRecords, or the
	// other way round.
	LagBytes uint64
	// OldestUnshipped is how long the oldest record not yet acknowledged
	// has waited to ship: since the shipper read it for a record in
	// flight, and, while records wait unread, at least since the shipper
	// last had read every record visible to it (or since Run started). A
	// shipper that keeps up shows the producer's round trip; one that
	// falls behind shows it growing.
	OldestUnshipped time.Duration
	// Transactions counts the transactions a Transactional shipper
	// committed.
	Transactions uint64
	// ConnectErrors counts failed broker connections, request writes
	// and response reads (the client retries them: these are the
	// shipper's retries); ProduceErrors counts records Kafka refused for
	// good.
	ConnectErrors, ProduceErrors uint64
	// LastAck is when Kafka last acknowledged a record; LastError the
	// last connection or produce error, if any.
	LastAck   time.Time
	LastError string
}

// Shipper ships one log to Kafka. Run ships; one Run at a time (a Run
// while another runs is refused), and Run may be called again once it
// returned. Stats and Close may be called concurrently with Run.
type Shipper struct {
	in     source
	o      KafkaOptions
	src    []byte
	cl     *kgo.Client
	nparts int32
	// maxRecord is the largest record (key, value and headers) sent (see
	// recordLimit).
	maxRecord int
	// partsHdr is nparts in decimal, a keyed shipper's HeaderPartitions.
	partsHdr []byte
	last     map[int32]uint64 // the last seq of this source per partition, at start

	shipped, bytes, skipped atomic.Uint64
	txns                    atomic.Uint64
	// txnRecs is the number of records in the open transaction, for
	// Stats: acknowledged by Kafka or not, they wait for its commit.
	txnRecs atomic.Int64
	// txnRefused is set when a record of the open transaction got an
	// error, whatever it was (see acked).
	txnRefused atomic.Bool
	inFlight   atomic.Int64
	// txn is the transaction of a Transactional shipper, used by the read
	// loop (ship), Run and Close only (never concurrently): whether one is
	// open; whether one was aborted and Kafka did not confirm it (ending:
	// Run gave up waiting for its records, and the next Run or Close
	// aborts it again); due, done when the open one is due to commit
	// (CommitInterval after it began) or the read loop's context is; and
	// the records produced in it (sequence numbers and payload bytes),
	// acked on the source once it commits.
	txn struct {
		open, ending bool
		due          context.Context
		cancelDue    context.CancelFunc
		seqs         []uint64
		bytes        uint64
	}
	// drained gets a token (capacity 1) when inFlight falls to zero, for
	// settle.
	drained chan struct{}
	// pendingBytes sums the payload bytes of the records read from the
	// committed position on (see ship) and not yet shipped: in flight,
	// waiting to be sent or in a transaction not committed, and those that
	// Kafka did not take, which the next Run reads again;
	// readRecs and readBytes count the records (and payload bytes) read
	// from the source, by every Run; nextRead is the seq after the last read;
	// started is when Run started (Unix ns). For Stats.
	pendingBytes        atomic.Int64
	readRecs, readBytes atomic.Uint64
	nextRead            atomic.Uint64
	started             atomic.Int64
	connErrs, prodErrs  atomic.Uint64
	lastAck             atomic.Int64 // Unix ns

	// out holds each record in flight at seq&outMask: the records in
	// flight are within len(out), the source's ack window, of the
	// committed position (see ship), so a slot is reused only once its
	// record was acknowledged.
	out     []outRecord
	outMask uint64

	lastErr  atomic.Pointer[string] // the last connection or produce error
	failOnce sync.Once
	failErr  error // the first produce failure; set before failc is closed
	// gaveUp is set when Run gives up waiting for the records in flight
	// (stopped, after FlushTimeout, or on return) and cancels them: their
	// cancellation is not Kafka refusing them.
	gaveUp   atomic.Bool
	failc    chan struct{}            // closed on the first produce failure
	stopRead context.CancelFunc       // ends the read loop's wait on a failure
	ackc     chan struct{}            // signalled (without blocking) after each ack
	promise  func(*kgo.Record, error) // s.acked, made once
	// onAck, if set (tests), is called with each record Kafka acknowledged.
	onAck func(seq uint64)

	// run is the Run in progress, if any (done not nil), and whether
	// Close was called.
	run struct {
		sync.Mutex
		closed bool
		stop   context.CancelFunc // stops the Run in progress
		done   chan struct{}      // closed when it returned
	}
}

// ToKafka ships l to Kafka until ctx is done (with Follow) or every record
// l holds at the start is shipped, then commits the cursor and returns.
func ToKafka(ctx context.Context, l *wal.Log, opts *KafkaOptions) error {
	s, err := NewKafka(l, opts)
	if err != nil {
		return err
	}
	err = s.Run(ctx)
	return errors.Join(err, s.Close())
}

// NewKafka opens the shipper's cursor (KafkaOptions.Cursor) on l and its
// Kafka client; it does not contact Kafka yet.
func NewKafka(l *wal.Log, opts *KafkaOptions) (*Shipper, error) {
	if l == nil {
		return nil, errors.New("ship: a log is required")
	}
	return newShipper(opts, math.MaxInt, func(o *KafkaOptions, window int) (source, string, error) {
		abs, err := filepath.Abs(l.Dir())
		if err != nil {
			return nil, "", fmt.Errorf("ship: source name: %w", err)
		}
		c, err := l.CursorWith(o.Cursor, &wal.CursorOptions{AckWindow: window})
		if err != nil {
			return nil, "", fmt.Errorf("ship: cursor %q: %w", o.Cursor, err)
		}
		open := func(from uint64) (*wal.Reader, error) { return l.NewReader(from, nil) }
		return &walSource{c: c, dir: l.Dir(), open: open}, abs, nil
	})
}

// NewKafkaFromDir is NewKafka for the log in dir, read through the files
// while another process writes it (or nobody does): it opens the cursor
// with wal.OpenCursor and never takes the log's lock, so the writer may
// start, append and stop while the shipper runs. walOpts configures the
// reads (nil means the defaults; MaxRecordSize must admit the writer's
// records). Without Follow it ships the records in the files when it
// starts: those of the segments the writer has named (a new segment is
// named once the one before it is sealed durably, so a record written into
// it just before may wait for the next run). The default Source is dir's absolute path, as for NewKafka on
// the same log, so the two resume each other's work.
func NewKafkaFromDir(dir string, walOpts *wal.Options, opts *KafkaOptions) (*Shipper, error) {
	return newShipper(opts, math.MaxInt, func(o *KafkaOptions, window int) (source, string, error) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, "", fmt.Errorf("ship: source name: %w", err)
		}
		c, err := wal.OpenCursor(dir, o.Cursor, walOpts, &wal.CursorOptions{AckWindow: window})
		if err != nil {
			return nil, "", fmt.Errorf("ship: cursor %q: %w", o.Cursor, err)
		}
		open := func(from uint64) (*wal.Reader, error) { return wal.OpenReader(dir, from, walOpts) }
		return &walSource{c: c, dir: dir, open: open}, abs, nil
	})
}

// NewKafkaFromGroup is NewKafka for a stream: it reads s through the
// consumer group named KafkaOptions.Cursor, of which the shipper must be
// the only member (a record it waits on is never handed out again: the
// group's AckWait is unbounded): a group open already in this process
// (another Shipper's, a consumer's) is refused with stream.ErrGroupOpen,
// and a record that another member takes (a consumer of this process
// opening the group after the shipper gets the shipper's) makes Run fail,
// naming it. MaxInFlightRecords is at most
// stream.MaxAckPending. The default Source is "stream:" and the stream's
// name. Records the stream's retention deletes before the group delivers
// them (a stream not kept UntilAcked) never reach Kafka: the group goes on
// after them, and Run fails saying how many.
func NewKafkaFromGroup(s *stream.Stream, opts *KafkaOptions) (*Shipper, error) {
	if s == nil {
		return nil, errors.New("ship: a stream is required")
	}
	return newShipper(opts, stream.MaxAckPending, func(o *KafkaOptions, window int) (source, string, error) {
		gopts := &stream.GroupOptions{AckWait: _groupAckWait, MaxAckPending: window}
		open := func() (*stream.Group, error) {
			// Opening an open group returns it: the shipper would share
			// it with its other holder, each getting some of the records,
			// and the read-back could no longer tell what is in Kafka.
			if _, ok := s.GroupStats()[o.Cursor]; ok {
				return nil, fmt.Errorf("%w in this process already (another Shipper's, or a consumer's): a shipper must be its group's only member; close it first, or give KafkaOptions.Cursor another name", stream.ErrGroupOpen)
			}
			return s.Group(o.Cursor, gopts)
		}
		g, err := open()
		if err != nil {
			return nil, "", fmt.Errorf("ship: group %q of stream %s: %w", o.Cursor, s.Name(), err)
		}
		return newGroupSource(s, g, open), "stream:" + s.Name(), nil
	})
}

// newShipper fills in opts' defaults, opens the source with open (given
// the ack window it needs, at most maxWindow) and the Kafka client.
func newShipper(opts *KafkaOptions, maxWindow int, open func(o *KafkaOptions, window int) (source, string, error)) (*Shipper, error) {
	if opts == nil {
		return nil, errors.New("ship: options are required")
	}
	o := *opts
	if len(o.Brokers) == 0 || o.Topic == "" {
		return nil, errors.New("ship: KafkaOptions.Brokers and Topic are required")
	}
	for i, b := range o.Brokers {
		if strings.TrimSpace(b) == "" {
			// The client would take it for localhost:9092.
			return nil, fmt.Errorf("ship: KafkaOptions.Brokers[%d] is empty", i)
		}
	}
	if o.Partition < 0 {
		return nil, fmt.Errorf("ship: KafkaOptions.Partition %d is negative", o.Partition)
	}
	codec, err := compression(o.Compression)
	if err != nil {
		return nil, err
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.MaxInFlightRecords <= 0 {
		o.MaxInFlightRecords = DefaultMaxInFlightRecords
	}
	o.MaxInFlightRecords = min(o.MaxInFlightRecords, maxWindow)
	if o.MaxInFlightBytes <= 0 {
		o.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if o.Cursor == "" {
		o.Cursor = DefaultCursor
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = DefaultFlushTimeout
	}
	// Acks may come out of order across partitions: the source's ack
	// window bounds how far above the committed position they reach, and
	// ship waits for room before it sends, so the records in flight are
	// within n of the committed position (each has its own slot of out).
	n := 1 << bits.Len(uint(o.MaxInFlightRecords-1)) // a power of two, at least MaxInFlightRecords
	in, id, err := open(&o, n)
	if err != nil {
		return nil, err
	}
	if o.Source == "" {
		o.Source = id
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	if o.Transactional && o.TransactionalID == "" {
		o.TransactionalID = "appendlog-ship/" + o.Topic + "/" + o.Source
	}
	s := &Shipper{in: in, o: o, src: []byte(o.Source), failc: make(chan struct{}), ackc: make(chan struct{}, 1), drained: make(chan struct{}, 1)}
	s.promise = s.acked
	s.out, s.outMask = make([]outRecord, n), uint64(n-1)
	kopts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// OUT_OF_ORDER_SEQUENCE_NUMBER (or UNKNOWN_PRODUCER_ID) means the
		// broker lost records this producer wrote, which the cursor may
		// have passed: by default the client would take a new producer
		// ID, renumber and go on without a word. Fail the record instead,
		// so that Run stops and says so.
		kgo.StopProducerOnDataLossDetected(),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(o.Linger),
		kgo.MaxBufferedRecords(o.MaxInFlightRecords),
		kgo.MaxBufferedBytes(o.MaxInFlightBytes),
		kgo.DialTimeout(o.ConnectTimeout),
		kgo.WithHooks(connectHook{s}),
	}
	if o.Transactional {
		kopts = append(kopts, kgo.TransactionalID(o.TransactionalID))
		s.txn.seqs = make([]uint64, 0, n)
	}
	s.cl, err = kgo.NewClient(append(kopts, o.ClientOptions...)...)
	if err != nil {
		in.close()
		return nil, fmt.Errorf("ship: kafka client: %w", err)
	}
	return s, nil
}

func compression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "zstd":
		return kgo.ZstdCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "none":
		return kgo.NoCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("ship: compression %q: want zstd, lz4, snappy or none", name)
}

// connectHook counts failed broker connections, writes and reads: the
// client retries each, so they are the shipper's retries.
type connectHook struct{ s *Shipper }

var (
	_ kgo.HookBrokerConnect = connectHook{}
	_ kgo.HookBrokerWrite   = connectHook{}
	_ kgo.HookBrokerRead    = connectHook{}
)

func (h connectHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.failed("connect to", meta, err)
}

func (h connectHook) OnBrokerWrite(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.failed("write to", meta, err)
}

func (h connectHook) OnBrokerRead(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.failed("read from", meta, err)
}

func (h connectHook) failed(what string, meta kgo.BrokerMetadata, err error) {
	if err != nil {
		h.s.connErrs.Add(1)
		h.s.setErr(fmt.Sprintf("%s %s:%d: %v", what, meta.Host, meta.Port, err))
	}
}

func (s *Shipper) setErr(msg string) {
	s.lastErr.Store(&msg)
}

// Close closes the shipper's Kafka client and cursor (Run has committed
// it). It does not close the log. A Transactional shipper whose last Run
// could not abort its transaction tries again first, for at most
// ConnectTimeout. A Run in progress is stopped as if its
// ctx were done (it waits for the records in flight and commits), and
// Close waits for it to return. Later calls of Close return nil.
func (s *Shipper) Close() error {
	s.run.Lock()
	if s.run.closed {
		s.run.Unlock()
		return nil
	}
	s.run.closed = true
	stop, done := s.run.stop, s.run.done
	s.run.Unlock()
	if done != nil {
		stop()
		<-done
	}
	var abortErr error
	if s.txn.ending {
		// A transaction left open holds read_committed consumers of its
		// partitions back until Kafka times it out: abort it now.
		ctx, cancel := context.WithTimeout(context.Background(), s.o.ConnectTimeout)
		abortErr = s.abortTxn(ctx)
		cancel()
	}
	s.cl.Close()
	return errors.Join(abortErr, s.in.close())
}

// Stats returns the shipper's counters.
func (s *Shipper) Stats() Stats {
	st := Stats{
		Shipped: s.shipped.Load(), Bytes: s.bytes.Load(), Skipped: s.skipped.Load(),
		InFlight: s.inFlight.Load(), Committed: s.in.committed(), Transactions: s.txns.Load(),
		ConnectErrors: s.connErrs.Load(), ProduceErrors: s.prodErrs.Load(),
	}
	if next := s.in.end(); next > st.Committed {
		st.LagRecords = next - st.Committed
	}
	if ns := s.lastAck.Load(); ns != 0 {
		st.LastAck = time.Unix(0, ns)
	}
	if p := s.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	if st.InFlight > 0 || s.txnRecs.Load() > 0 {
		if ns := s.out[st.Committed&s.outMask].sent.Load(); ns != 0 {
			st.OldestUnshipped = max(time.Since(time.Unix(0, ns)), 0)
			if st.InFlight > 0 {
				st.OldestInFlight = st.OldestUnshipped
			}
		}
	}
	st.LagBytes = uint64(max(s.pendingBytes.Load(), 0))
	if next, read := st.Committed+st.LagRecords, max(s.nextRead.Load(), st.Committed); next > read {
		unread := next - read
		if n := s.readRecs.Load(); n > 0 {
			st.LagBytes += unread * (s.readBytes.Load() / n)
		}
		if ns := s.started.Load(); ns != 0 {
			since := time.Unix(0, ns)
			if cu := s.in.caughtUp(); cu.After(since) {
				since = cu
			}
			st.OldestUnshipped = max(st.OldestUnshipped, time.Since(since))
		}
	}
	return st
}

// Run ships until ctx is done (Follow) or every record the log held when
// Run started is shipped, waits for the records in flight (at most
// FlushTimeout), commits the cursor and returns. It returns the first
// error Kafka gave a record for good, ErrTopicMissing, ErrUnreachable or
// ErrFlushTimeout (wrapped, with details), or a log error. ctx being done
// is not an error: Run stops reading, waits for the records in flight and
// commits, or, done before Kafka first answered, returns at once with
// nothing sent. Run after one that gave up waiting for records in flight
// (FlushTimeout), or that stopped with records read and not shipped (its
// transaction aborted, a record too large), first waits for Kafka's
// answer for those in flight (a done ctx ends the wait, as it ends the
// start), then reads every record not acknowledged again, from the
// committed position: its read-back skips those Kafka holds. A Shipper
// from NewKafkaFromGroup does so by closing its group (which checkpoints
// the committed position) and opening it again with the same name and
// options.
// Run on a closed Shipper returns ErrClosed; Run while another Run of the
// Shipper is in progress returns an error at once; Run after Kafka refused
// a record returns that error again, and sends nothing.
func (s *Shipper) Run(ctx context.Context) error {
	if ctx == nil {
		return errors.New("ship: Run: nil context")
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	s.run.Lock()
	switch {
	case s.run.closed:
		s.run.Unlock()
		return ErrClosed
	case s.run.done != nil:
		s.run.Unlock()
		return fmt.Errorf("ship: Run: another Run of this Shipper (cursor %q) is in progress", s.o.Cursor)
	}
	if err := s.failure(); err != nil {
		// Sent now, the records after the one Kafka refused would land
		// without it, and a restart would take it for shipped.
		s.run.Unlock()
		return err
	}
	done := make(chan struct{})
	s.run.stop, s.run.done = stop, done
	s.run.Unlock()
	defer func() {
		s.run.Lock()
		s.run.stop, s.run.done = nil, nil
		close(done)
		s.run.Unlock()
	}()
	if err := s.settle(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: nothing was sent, the cursor stands
		}
		return err
	}
	if s.txn.ending {
		abortCtx, cancelAbort := context.WithTimeout(ctx, s.o.ConnectTimeout)
		err := s.abortTxn(abortCtx)
		cancelAbort()
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while starting: nothing was sent, the cursor stands
			}
			return fmt.Errorf("%w, which the last Run left: nothing was sent", err)
		}
	}
	if err := s.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: nothing was sent, the cursor stands
		}
		return err
	}
	// Records are produced with their own context, cancelled only once
	// Run gives up waiting for them, so that stopping (ctx) lets the
	// batches in flight finish.
	prodCtx, cancelProd := context.WithCancel(context.Background())
	defer func() {
		s.gaveUp.Store(true) // what is still in flight is sent again next time
		cancelProd()
	}()
	var giveUp *time.Timer
	var giveUpMu sync.Mutex
	stopWatch := context.AfterFunc(ctx, func() {
		giveUpMu.Lock()
		giveUp = time.AfterFunc(s.o.FlushTimeout, func() {
			s.gaveUp.Store(true)
			cancelProd()
		})
		giveUpMu.Unlock()
	})
	defer func() {
		stopWatch()
		giveUpMu.Lock()
		if giveUp != nil {
			giveUp.Stop()
		}
		giveUpMu.Unlock()
	}()

	readErr := s.ship(ctx, prodCtx)
	flushCtx, cancelFlush := context.WithTimeout(prodCtx, s.o.FlushTimeout)
	flushErr := s.cl.Flush(flushCtx)
	cancelFlush()
	if s.txn.open && flushErr == nil {
		readErr = errors.Join(readErr, s.commitTxn(prodCtx))
	} else if s.txn.open {
		// Gave up waiting for Kafka's answer: abort the transaction, and
		// its records are sent again next time. Should Kafka not confirm
		// the abort in time either, the next Run aborts it again (or the
		// next shipper fences it) before it sends anything.
		s.gaveUp.Store(true)
		cancelProd()
		abortCtx, cancelAbort := context.WithTimeout(context.Background(), s.o.FlushTimeout)
		_ = s.abortTxn(abortCtx) // in Stats.LastError; nothing was acked
		cancelAbort()
	}
	switch {
	case flushErr != nil && ctx.Err() != nil:
		// Stopped, and the records in flight were not acknowledged within
		// FlushTimeout: the cursor is committed without them, and they
		// are sent again next time, as FlushTimeout says.
		flushErr = nil
	case flushErr != nil && s.failure() == nil:
		flushErr = fmt.Errorf("%w: %d records not acknowledged within %v; they are sent again next time: %w", ErrFlushTimeout, s.inFlight.Load(), s.o.FlushTimeout, flushErr)
	default:
		flushErr = nil
	}
	commitCtx, cancelCommit := context.WithTimeout(context.Background(), s.o.FlushTimeout)
	commitErr := s.in.commit(commitCtx)
	cancelCommit()
	if commitErr != nil {
		commitErr = fmt.Errorf("ship: commit cursor %q: %w", s.o.Cursor, commitErr)
	}
	return errors.Join(s.failure(), readErr, flushErr, commitErr)
}

// settle readies the source for a Run after an earlier one. That Run may
// have returned with records in flight (it gave up waiting for them after
// FlushTimeout) or read and not sent (stopped, or a record too large):
// settle waits until Kafka (or the client) answered for each record in
// flight, whose slots of out and acks would otherwise mix with this Run's,
// then moves the source back to its committed position, so that the
// records not acknowledged are read again: prepare's read-back finds
// those Kafka took, and the others are sent again.
func (s *Shipper) settle(ctx context.Context) error {
	for s.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.drained: // perhaps a token of an earlier drain: look again
		}
	}
	if from := s.in.committed(); s.nextRead.Load() > from {
		if err := s.in.rewind(); err != nil {
			return fmt.Errorf("ship: read %s again from record %d, which the last Run read and Kafka did not acknowledge: %w", s.in.name(), from, err)
		}
	}
	return nil
}

// prepare checks the topic and reads back the last record of each
// partition the shipper writes.
func (s *Shipper) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.ConnectTimeout)
	defer cancel()
	adm := kadm.NewClient(s.cl)
	topics, err := adm.ListTopics(ctx, s.o.Topic)
	if err != nil {
		return s.connectError(err)
	}
	td, ok := topics[s.o.Topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("%w: %q on %v: create it (kafka-topics.sh --create --topic %s), or pass --create-topic to appendlog ship", ErrTopicMissing, s.o.Topic, s.o.Brokers, s.o.Topic)
	}
	if errors.Is(td.Err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("%w to describe topic %q on %v: %w", ErrNotAuthorized, s.o.Topic, s.o.Brokers, td.Err)
	}
	if td.Err != nil {
		return fmt.Errorf("ship: topic %q: %w", s.o.Topic, td.Err)
	}
	s.nparts = int32(len(td.Partitions))
	s.partsHdr = strconv.AppendInt(nil, int64(s.nparts), 10) // not the last Run's: its records may point to it
	if s.nparts == 0 {
		// A keyed shipper's partition is its key's hash modulo the count.
		return fmt.Errorf("ship: topic %q on %v has no partitions (is it being created or deleted?)", s.o.Topic, s.o.Brokers)
	}
	s.maxRecord = s.recordLimit(ctx, adm)
	if s.o.Key == nil && s.o.Partition >= s.nparts {
		return fmt.Errorf("ship: topic %q has %d partitions, no partition %d", s.o.Topic, s.nparts, s.o.Partition)
	}
	parts := []int32{s.o.Partition}
	if s.o.Key != nil {
		parts = parts[:0]
		for p := range s.nparts {
			parts = append(parts, p)
		}
	}
	if s.o.Transactional {
		// Fence every earlier shipper with this transactional ID before
		// reading back: Kafka aborts the transaction one left open, and
		// refuses what it still sends, so nothing of it can land after
		// the read-back.
		if _, _, err := s.cl.ProducerID(ctx); err != nil {
			if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
				return fmt.Errorf("%w to use transactional ID %q on %v (the user needs Write on it): %w", ErrNotAuthorized, s.o.TransactionalID, s.o.Brokers, err)
			}
			return fmt.Errorf("ship: start transactions as %q on %v: %w", s.o.TransactionalID, s.o.Brokers, err)
		}
	}
	var lastRec map[int32]*kgo.Record
	if s.last, lastRec, err = s.lastSeqs(ctx, adm, parts); err != nil {
		return err
	}
	// Kafka holding a record of this source that the log does not would
	// make the shipper skip the log's records up to it as shipped.
	end, from := s.in.end(), s.in.committed()
	for p, seq := range s.last {
		if seq >= end {
			return fmt.Errorf("ship: the last record of %s/%d (offset %d) is record %d of source %q, but %s ends before it (its next record is %d): either it is another log with the same Source (a log made anew in the same directory: give it a Source of its own), or it lost records Kafka holds; nothing was sent",
				s.o.Topic, p, lastRec[p].Offset, seq, s.o.Source, s.in.name(), end)
		}
		if seq < from {
			continue // the records up to it are not read again
		}
		rec, ok, err := s.in.record(ctx, seq)
		if errors.Is(err, wal.ErrTruncated) {
			ok, err = false, nil // deleted since: nothing to compare with
		}
		if err != nil {
			return fmt.Errorf("ship: read record %d of %s to compare it with the last record of %s/%d (offset %d): %w", seq, s.in.name(), s.o.Topic, p, lastRec[p].Offset, err)
		}
		if ok && !bytes.Equal(rec, lastRec[p].Value) {
			return fmt.Errorf("ship: the last record of %s/%d (offset %d) is record %d of source %q, and record %d of %s is not the same: it is another log with the same Source (a log made anew in the same directory: give it a Source of its own); nothing was sent",
				s.o.Topic, p, lastRec[p].Offset, seq, s.o.Source, seq, s.in.name())
		}
	}
	if err := s.checkDeleted(ctx, parts, from, lastRec); err != nil {
		return err
	}
	for p, r := range lastRec {
		n, counted := partitionsOf(r)
		// A keyed shipper older than HeaderPartitions sent a key and no
		// count.
		keyed := counted || len(r.Key) > 0
		if s.o.Key == nil && keyed || s.o.Key != nil && n != int64(s.nparts) {
			// r was sent by a keyed shipper, and this one is not, or
			// with another partition count, or one r does not tell (no
			// HeaderPartitions, or one that is no count): a record sent
			// then that Kafka did not take may go to p now, below r, and
			// would be skipped as shipped. Skip nothing by r: the records
			// for p are sent again (at least once). A last record sent as
			// this shipper sends still says that every record for its
			// partition up to it is there: the run that sent it sent
			// those from its cursor on, in order, and those below its
			// cursor were acked.
			delete(s.last, p)
		}
	}
	return nil
}

// partitionsOf returns the partition count in r's HeaderPartitions, and
// false if it has none; -1 for a value that is no count (not a writer of
// this package's), which matches no topic's.
func partitionsOf(r *kgo.Record) (int64, bool) {
	for _, h := range r.Headers {
		if h.Key == HeaderPartitions {
			n, err := strconv.ParseInt(string(h.Value), 10, 32)
			if err != nil || n <= 0 {
				return -1, true
			}
			return n, true
		}
	}
	return 0, false
}

// checkDeleted refuses to ship when the records after the last one Kafka
// holds of this source (s.last, over parts; the records lastRec), up to
// from, where the source
// reads from, are no longer in the source: they were deleted before they
// were shipped (the shipper's cursor deleted or new, then retention or
// TruncateFront), and shipping from from would leave them out in silence.
// A partition whose last record is another writer's says nothing of what
// of ours is there, and then neither does this check.
func (s *Shipper) checkDeleted(ctx context.Context, parts []int32, from uint64, lastRec map[int32]*kgo.Record) error {
	if len(s.last) == 0 || len(s.last) < len(parts) {
		return nil
	}
	var top uint64 // no record after it is in any partition
	var at *kgo.Record
	for p, seq := range s.last {
		if at == nil || seq > top {
			top, at = seq, lastRec[p]
		}
	}
	if top+1 >= from {
		return nil
	}
	_, _, err := s.in.record(ctx, top+1)
	if !errors.Is(err, wal.ErrTruncated) {
		return nil // held still (or not readable: the run will say)
	}
	upTo := from - 1
	if te, ok := errors.AsType[*wal.TruncatedError](err); ok && te.First > top+1 {
		upTo = min(upTo, te.First-1)
	}
	return fmt.Errorf("ship: the last record of source %q in topic %q is record %d (%s/%d, offset %d), and %s no longer holds records %d to %d: they were deleted before they were shipped (or Kafka lost them), and the shipper's cursor %q starts after them at %d; nothing was sent: %w",
		s.o.Source, s.o.Topic, top, at.Topic, at.Partition, at.Offset, s.in.name(), top+1, upTo, s.o.Cursor, from, err)
}

// _recordOverhead bounds what a record adds to its size in a batch of its
// own beyond its key, value and headers (franz-go's size check): the batch
// header and the record's varints.
const _recordOverhead = 128

// recordLimit returns the largest record (key, value and headers) the
// shipper sends: one that fits a batch of its own within the client's
// ProducerBatchMaxBytes and MaxBufferedBytes and the topic's
// max.message.bytes (when the user may read the topic's configuration).
// A larger one would be refused by the client or the broker after later
// records were sent; the shipper stops before it instead.
func (s *Shipper) recordLimit(ctx context.Context, adm *kadm.Client) int {
	limit := s.o.MaxInFlightBytes
	if v, ok := s.cl.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && v > 0 {
		limit = min(limit, int(v))
	}
	if rcs, err := adm.DescribeTopicConfigs(ctx, s.o.Topic); err == nil {
		if rc, err := rcs.On(s.o.Topic, nil); err == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				if c.Key != "max.message.bytes" || c.Value == nil {
					continue
				}
				if v, err := strconv.Atoi(*c.Value); err == nil && v > 0 {
					limit = min(limit, v)
				}
			}
		}
	}
	return limit - _recordOverhead
}

// connectError describes a failure to reach the brokers, or to be let in.
func (s *Shipper) connectError(err error) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.SaslAuthenticationFailed) {
		return fmt.Errorf("%w on %v (topic %q): %w", ErrNotAuthorized, s.o.Brokers, s.o.Topic, err)
	}
	if last := s.lastErr.Load(); last != nil {
		return fmt.Errorf("%w at %v: %s (%v)", ErrUnreachable, s.o.Brokers, *last, err)
	}
	return fmt.Errorf("%w at %v: %v", ErrUnreachable, s.o.Brokers, err)
}

// lastSeqs returns, per partition of parts whose last committed data
// record this source wrote, that record's sequence number and the record.
//
// It reads as a read_committed consumer, up to the last stable offset, so
// that the records of an aborted transaction (a fenced Transactional
// shipper's) do not count. The last offsets of a partition may hold no
// data record (transaction markers, aborted records): it reads back from
// the end in spans growing 16 times from one to the next until it finds a
// data record or reaches the partition's start.
func (s *Shipper) lastSeqs(ctx context.Context, adm *kadm.Client, parts []int32) (last map[int32]uint64, recs map[int32]*kgo.Record, err error) {
	ends, err := adm.ListCommittedOffsets(ctx, s.o.Topic)
	if err != nil {
		return nil, nil, s.connectError(err)
	}
	starts, err := adm.ListStartOffsets(ctx, s.o.Topic)
	if err != nil {
		return nil, nil, s.connectError(err)
	}
	type span struct{ start, from, end int64 }
	todo := make(map[int32]*span)
	for _, p := range parts {
		e, ok1 := ends.Lookup(s.o.Topic, p)
		b, ok2 := starts.Lookup(s.o.Topic, p)
		if !ok1 || !ok2 || e.Err != nil || b.Err != nil {
			return nil, nil, fmt.Errorf("ship: offsets of %s/%d: %v %v", s.o.Topic, p, e.Err, b.Err)
		}
		if e.Offset > b.Offset {
			todo[p] = &span{start: b.Offset, from: e.Offset - 1, end: e.Offset}
		}
	}
	last, recs = make(map[int32]uint64), make(map[int32]*kgo.Record)
	for width := int64(1); len(todo) > 0; width *= 16 {
		at := make(map[int32]int64, len(todo))
		for p, sp := range todo {
			sp.from = max(sp.start, sp.end-width)
			at[p] = sp.from
		}
		found, err := s.readBack(ctx, adm, at, func(p int32) int64 { return todo[p].end })
		if err != nil {
			return nil, nil, err
		}
		for p, sp := range todo {
			if r, ok := found[p]; ok {
				if seq, ok := s.ours(r); ok {
					last[p], recs[p] = seq, r
				}
				delete(todo, p) // the last data record, ours or another writer's
			} else if sp.from == sp.start {
				delete(todo, p) // no data record at all
			}
		}
	}
	return last, recs, nil
}

// readBack reads the partitions of the topic from the offsets at, each up
// to (not including) end(p), as a read_committed consumer, and returns the
// last data record of each partition that has one there.
//
// It fetches from each partition's leader itself rather than through a
// kgo consumer: a read_committed consumer returns neither the records of
// aborted transactions nor where it is, so when the offset before end(p)
// is such a record (end(p) is the last stable offset, held there by
// another writer's open transaction), it could not tell it had read up to
// end(p). kgo.ProcessFetchPartition returns the offset after what it
// read, aborted records included.
func (s *Shipper) readBack(ctx context.Context, adm *kadm.Client, at map[int32]int64, end func(p int32) int64) (map[int32]*kgo.Record, error) {
	next := maps.Clone(at)
	found := make(map[int32]*kgo.Record)
	var lastErr error
	for retry := false; len(next) > 0; retry = true {
		if retry {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("ship: read back the last records of %d partitions of %q: %w (%v)", len(next), s.o.Topic, err, lastErr)
		}
		topics, err := adm.ListTopics(ctx, s.o.Topic)
		if err != nil {
			lastErr = err
			continue
		}
		td := topics[s.o.Topic]
		if td.Err != nil {
			lastErr = td.Err
			continue
		}
		byLeader := make(map[int32]*kmsg.FetchRequestTopic)
		for p, off := range next {
			pd, ok := td.Partitions[p]
			if !ok || pd.Err != nil || pd.Leader < 0 {
				lastErr = fmt.Errorf("no leader for %s/%d: %v", s.o.Topic, p, pd.Err)
				continue
			}
			rt := byLeader[pd.Leader]
			if rt == nil {
				rt = &kmsg.FetchRequestTopic{Topic: s.o.Topic, TopicID: td.ID}
				byLeader[pd.Leader] = rt
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		for leader, rt := range byLeader {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 64<<20
			req.IsolationLevel, req.SessionEpoch = 1, -1 // read_committed, no fetch session
			req.Topics = []kmsg.FetchRequestTopic{*rt}
			kresp, err := s.cl.Broker(int(leader)).Request(ctx, req)
			if err != nil {
				lastErr = err
				continue
			}
			resp := kresp.(*kmsg.FetchResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				lastErr = err
				continue
			}
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					rp := &resp.Topics[i].Partitions[j]
					p := rp.Partition
					from, ok := next[p]
					if !ok {
						continue
					}
					fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
						KeepControlRecords: true, Offset: from, IsolationLevel: kgo.ReadCommitted(),
						Topic: s.o.Topic, Partition: p,
					}, rp, kgo.DefaultDecompressor(), nil)
					if fp.Err != nil {
						if !kerr.IsRetriable(fp.Err) {
							return nil, fmt.Errorf("ship: read back %s/%d from offset %d: %w", s.o.Topic, p, from, fp.Err)
						}
						lastErr = fp.Err
						continue
					}
					e := end(p)
					for _, r := range fp.Records {
						if r.Offset < e && !r.Attrs.IsControl() {
							found[p] = r
						}
					}
					if after >= e {
						delete(next, p)
					} else {
						next[p] = max(from, after)
					}
				}
			}
		}
	}
	return found, nil
}

// ours returns the sequence number of r if this source wrote it.
func (s *Shipper) ours(r *kgo.Record) (uint64, bool) {
	var src, seq []byte
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderSource:
			src = h.Value
		case HeaderSeq:
			seq = h.Value
		}
	}
	if !bytes.Equal(src, s.src) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(seq), 10, 64)
	return n, err == nil
}

// partition returns the partition rec goes to, and its key.
func (s *Shipper) partition(rec []byte) (int32, []byte) {
	if s.o.Key == nil {
		return s.o.Partition, nil
	}
	key := s.o.Key(rec)
	if key == nil {
		return 0, nil
	}
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(s.nparts)), bytes.Clone(key)
}

// ship reads the source and produces each record, until the end of the
// source at the start (without Follow), ctx is done, or a failure.
func (s *Shipper) ship(ctx, prodCtx context.Context) error {
	ctx, s.stopRead = context.WithCancel(ctx)
	defer s.stopRead()
	end := s.in.end()
	next := s.in.committed()
	s.nextRead.Store(next)
	// Every record from next on is unread again: none is in flight or in
	// a transaction (settle), and those an earlier Run read and did not
	// ship are read again.
	s.pendingBytes.Store(0)
	s.started.Store(time.Now().UnixNano())
	if !s.o.Follow {
		// The records before end may end in a gap, or in records deleted
		// by retention, which the source goes on after without a record:
		// stop reading once the committed position reached end.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer func() {
			close(stop)
			wg.Wait()
		}()
		wg.Go(func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if s.in.committed() >= end {
						s.stopRead()
						return
					}
				}
			}
		})
	}
	for s.o.Follow || next < end {
		if isDone(ctx) {
			// Stopped: the source returns a record it holds whatever
			// its ctx, and a done ctx makes each transaction due at once.
			break
		}
		if s.txn.open && isDone(s.txn.due) {
			if stop, err := s.commitDue(prodCtx); stop {
				return err
			}
		}
		seq, rec, err := s.nextWithin(ctx)
		if errors.Is(err, errCommitDue) {
			if stop, err := s.commitDue(prodCtx); stop {
				return err
			}
			continue
		}
		if g, ok := errors.AsType[*wal.GapError](err); ok {
			// Records lost to damage, cut by a forced repair: there is
			// nothing to ship, and a gap may end the log.
			next = max(next, g.End)
			s.nextRead.Store(next)
			continue
		}
		switch {
		case err == nil:
		case s.failure() != nil, ctx.Err() != nil:
			return s.in.lost() // a failure Run reports, or the end of the run
		default:
			return fmt.Errorf("ship: read %s: %w", s.in.name(), err)
		}
		next = seq + 1
		s.nextRead.Store(next)
		s.readRecs.Add(1)
		s.readBytes.Add(uint64(len(rec)))
		s.pendingBytes.Add(int64(len(rec)))
		// A partition that lags keeps the committed position down while
		// others are acked: wait until seq is within the source's window.
		if s.txn.open && seq-s.in.committed() > s.outMask {
			// Nothing is acked before the transaction commits.
			if stop, err := s.commitDue(prodCtx); stop {
				return err
			}
		}
		for seq-s.in.committed() > s.outMask {
			select {
			case <-s.ackc:
			case <-s.failc:
				return nil
			case <-ctx.Done():
				return nil // seq is sent again next time
			case <-time.After(100 * time.Millisecond):
			}
		}
		p, key := s.partition(rec)
		if seq <= s.last[p] {
			s.skipped.Add(1)
			s.pendingBytes.Add(-int64(len(rec)))
			_ = s.in.ack(seq) // in the window: nothing is in flight below it
			continue
		}
		size := len(key) + len(rec) + len(HeaderSource) + len(s.src) + len(HeaderSeq) + 20
		if s.o.Key != nil {
			size += len(HeaderPartitions) + len(s.partsHdr)
		}
		if size > s.maxRecord {
			return fmt.Errorf("%w: record %d of %s, for %s/%d, is %d bytes with its key and headers, and the topic %q takes at most %d (max.message.bytes, and the client's ProducerBatchMaxBytes and KafkaOptions.MaxInFlightBytes, less %d bytes of batch overhead): neither it nor anything after it was sent; raise those limits to ship it",
				ErrRecordTooLarge, seq, s.in.name(), s.o.Topic, p, size, s.o.Topic, s.maxRecord, _recordOverhead)
		}
		o := &s.out[seq&s.outMask]
		o.val = append(o.val[:0], rec...)
		// HeaderSeq last (see seqOf).
		o.hdr = [3]kgo.RecordHeader{{Key: HeaderSource, Value: s.src}, {Key: HeaderSeq, Value: strconv.AppendUint(o.seq[:0], seq, 10)}}
		hdr := o.hdr[:2]
		if s.o.Key != nil {
			o.hdr[1], o.hdr[2] = kgo.RecordHeader{Key: HeaderPartitions, Value: s.partsHdr}, o.hdr[1]
			hdr = o.hdr[:3]
		}
		o.r = kgo.Record{Topic: s.o.Topic, Partition: p, Key: key, Value: o.val, Headers: hdr}
		if s.o.Transactional && !s.txn.open {
			if err := s.cl.BeginTransaction(); err != nil {
				return fmt.Errorf("ship: begin a transaction as %q: %w", s.o.TransactionalID, err)
			}
			s.txn.open = true
			s.txn.due, s.txn.cancelDue = context.WithTimeout(ctx, s.o.CommitInterval)
			s.txnRefused.Store(false)
		}
		if s.txn.open {
			s.txn.seqs = append(s.txn.seqs, seq)
			s.txn.bytes += uint64(len(rec))
			s.txnRecs.Store(int64(len(s.txn.seqs)))
		}
		s.inFlight.Add(1)
		o.sent.Store(time.Now().UnixNano())
		s.cl.Produce(prodCtx, &o.r, s.promise)
		if s.txn.open && len(s.txn.seqs) >= s.o.MaxInFlightRecords {
			// A full transaction commits now: a stream's group delivers
			// no record past its window (MaxInFlightRecords) until those
			// before are acked, which they are once it commits.
			if stop, err := s.commitDue(prodCtx); stop {
				return err
			}
		}
	}
	return s.in.lost()
}

// errCommitDue is nextWithin's error when the open transaction is due to
// commit before the source had a record.
var errCommitDue = errors.New("ship: transaction due to commit")

// nextWithin is s.in.next, which waits for a record at most until the open
// transaction, if any, is due to commit; then it returns errCommitDue.
func (s *Shipper) nextWithin(ctx context.Context) (uint64, []byte, error) {
	if !s.txn.open {
		return s.in.next(ctx)
	}
	seq, rec, err := s.in.next(s.txn.due)
	if err != nil && s.txn.due.Err() != nil && ctx.Err() == nil {
		return 0, nil, errCommitDue
	}
	return seq, rec, err
}

// commitDue is commitTxn in the read loop; stop says the loop must end:
// Kafka refused a record, or did not confirm an abort (no transaction may
// begin before it does).
func (s *Shipper) commitDue(prodCtx context.Context) (stop bool, err error) {
	err = s.commitTxn(prodCtx)
	return err != nil || s.failure() != nil || s.txn.ending, err
}

// commitTxn waits until Kafka answered for every record of the open
// transaction, commits it, and then acks its records on the source. It
// aborts the transaction instead, acking nothing, when Kafka refused one
// of its records (Run reports that failure) or gave no answer for one
// (prodCtx was cancelled: Run gave up on it); it returns an error when
// Kafka did not commit it.
func (s *Shipper) commitTxn(prodCtx context.Context) error {
	if !s.txn.open {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.FlushTimeout)
	defer cancel()
	if err := s.cl.Flush(prodCtx); err != nil || s.txnRefused.Load() {
		// Kafka refused a record (Run reports it), or Run gave up on
		// them: a record not in the transaction would be taken for
		// shipped. Nothing is acked, so an abort Kafka does not confirm
		// is no error either: the next Run aborts it again first.
		_ = s.abortTxn(ctx)
		return nil
	}
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// Its outcome may be unknown: the records are not acked, and the
		// next run's read-back finds those Kafka committed.
		err = fmt.Errorf("ship: Kafka did not commit the transaction of records %d to %d of %s (transactional ID %q): they are sent again next time, unless it did: %w",
			s.txn.seqs[0], s.txn.seqs[len(s.txn.seqs)-1], s.in.name(), s.o.TransactionalID, err)
		return errors.Join(err, s.abortTxn(ctx))
	}
	for _, seq := range s.txn.seqs {
		if err := s.in.ack(seq); err != nil {
			s.setErr(fmt.Sprintf("ack seq %d on the cursor: %v", seq, err))
		} else if s.onAck != nil {
			s.onAck(seq)
		}
	}
	s.shipped.Add(uint64(len(s.txn.seqs)))
	s.bytes.Add(s.txn.bytes)
	s.pendingBytes.Add(-int64(s.txn.bytes))
	s.txns.Add(1)
	s.lastAck.Store(time.Now().UnixNano())
	s.closeTxn()
	return nil
}

// isDone reports whether ctx is done, without waiting.
func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// closeTxn forgets the open transaction, committed or aborted.
func (s *Shipper) closeTxn() {
	if s.txn.cancelDue != nil {
		s.txn.cancelDue()
	}
	s.txn.open, s.txn.due, s.txn.cancelDue = false, nil, nil
	s.txn.seqs, s.txn.bytes = s.txn.seqs[:0], 0
	s.txnRecs.Store(0)
}

// abortTxn aborts the open transaction (or, after a failed commit, makes
// sure it ended), acking none of its records: they are sent again.
func (s *Shipper) abortTxn(ctx context.Context) error {
	s.closeTxn()
	s.txn.ending = true
	err := s.cl.AbortBufferedRecords(ctx)
	if err == nil {
		err = s.cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if err == nil {
		// After an end Kafka did not confirm (a commit unanswered),
		// franz-go aborts by initializing the producer ID again, which
		// ends the transaction in Kafka, and returns nil even when it
		// could not: the ID is then only marked to be initialized
		// again. Loading it confirms the abort (a no-op otherwise). A
		// shipper fenced by a newer one has had its transaction ended
		// by that one.
		_, _, err = s.cl.ProducerID(ctx)
		if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
			err = nil
		}
	}
	if err != nil {
		err = fmt.Errorf("ship: abort the transaction (transactional ID %q): %w", s.o.TransactionalID, err)
		s.setErr(err.Error())
		return err
	}
	s.txn.ending = false
	return nil
}

// doneInFlight counts a record in flight done with, and wakes settle when
// none is left.
func (s *Shipper) doneInFlight() {
	if s.inFlight.Add(-1) == 0 {
		select {
		case s.drained <- struct{}{}:
		default:
		}
	}
}

// acked is a record's promise (s.promise): Kafka acknowledged it, or gave
// up on it.
func (s *Shipper) acked(r *kgo.Record, err error) {
	seq := seqOf(r)
	// Counted in flight until done with r and its slot (see settle).
	defer s.doneInFlight()
	if err != nil {
		s.txnRefused.Store(true)
		s.setErr(fmt.Sprintf("produce seq %d: %v", seq, err))
		if s.gaveUp.Load() && (errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)) {
			return // Run stopped waiting for it, or Close: not Kafka's refusal (see Run)
		}
		s.prodErrs.Add(1)
		s.failOnce.Do(func() {
			s.failErr = fmt.Errorf("ship: Kafka refused record %d of %s, sent to %s/%d: %w", seq, s.in.name(), r.Topic, r.Partition, err)
			if errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID) {
				s.failErr = fmt.Errorf("ship: Kafka refused record %d of %s: it no longer holds records this shipper wrote to %s/%d before it (an unclean leader election, a replica that lost its data): records below the cursor %q (at %d) may be missing from the topic: %w",
					seq, s.in.name(), s.o.Topic, r.Partition, s.o.Cursor, s.in.committed(), err)
			}
			if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
				s.failErr = fmt.Errorf("%w to write topic %q on %v (the user needs Write on the topic, and IdempotentWrite on the cluster for brokers before Kafka 2.8): %w",
					ErrNotAuthorized, s.o.Topic, s.o.Brokers, err)
			}
			close(s.failc)
			if s.stopRead != nil {
				s.stopRead()
			}
		})
		return
	}
	if s.o.Transactional {
		return // acked on the source once its transaction commits (commitTxn)
	}
	// Once acked on the cursor, r's slot may be reused: read it first.
	size := len(r.Value)
	s.pendingBytes.Add(-int64(size))
	if err := s.in.ack(seq); err != nil {
		s.setErr(fmt.Sprintf("ack seq %d on the cursor: %v", seq, err))
		return
	}
	s.shipped.Add(1)
	s.bytes.Add(uint64(size))
	s.lastAck.Store(time.Now().UnixNano())
	select {
	case s.ackc <- struct{}{}:
	default:
	}
	if s.onAck != nil {
		s.onAck(seq)
	}
}

// outRecord is a record in flight, the buffers it points into, and when
// it was sent (Unix ns; read by Stats).
type outRecord struct {
	sent atomic.Int64
	r    kgo.Record
	hdr  [3]kgo.RecordHeader
	seq  [20]byte
	val  []byte
}

// seqOf returns the sequence number in r's HeaderSeq, which ship wrote
// (the last header; decimal digits).
func seqOf(r *kgo.Record) uint64 {
	var n uint64
	for _, c := range r.Headers[len(r.Headers)-1].Value {
		n = n*10 + uint64(c-'0')
	}
	return n
}

// failure returns the first produce failure, nil if none.
func (s *Shipper) failure() error {
	select {
	case <-s.failc:
		return s.failErr
	default:
		return nil
	}
}
