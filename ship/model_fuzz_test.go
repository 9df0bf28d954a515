package ship

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/appendlog/appendlog/wal"
)

// FuzzShipModel decodes its input into a sequence of steps on one or two
// wal logs shipped to one kfake topic (appends, full runs, runs stopped
// after m acknowledgements by a cancelled ctx or by Close, lost cursor
// checkpoints, TruncateFront of shipped records, and faults injected in
// the next run's produce requests), run one at a time, and after each
// step reads what the topic gained and checks it against a model: the
// records the run had to send (those of its partitions after the last
// record of its own there, from its cursor on), in order, with their
// bytes, nothing else; a full run all of them, a stopped one a prefix; its
// Stats; its error. At the end every source runs once more and the topic
// must hold each record of each source exactly once, in order per
// partition (unless a run re-sent records behind another source's last
// record, which the package documentation allows: at least once).
//
// The first byte picks the configuration: bit 0 a keyed shipper on a
// topic of three partitions, bit 1 a second log shipping to the topic,
// bit 2 shippers of the log's files (NewKafkaFromDir) instead of the Log,
// bit 3 Transactional shippers. The model reads the topic as a
// read_committed consumer.
func FuzzShipModel(f *testing.F) {
	for _, seed := range shipSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 48 {
			in = in[:48]
		}
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		runShipModel(t, in)
	})
}

// Steps of FuzzShipModel, one input byte each (then their arguments).
const (
	sopAppend   = iota // source, count, sizes
	sopRun             // source
	sopStop            // source, m, how
	sopRewind          // source, where
	sopTruncate        // source
	sopFault           // kind
	sopGiveUp          // source
	sopCount
)

// Faults of the next run's produce requests.
const (
	faultNone   = iota
	faultDelay  // each produce request answered 5 ms late
	faultRetry  // the first two answered NOT_ENOUGH_REPLICAS (retriable)
	faultDrop   // the first two close the connection, unanswered
	faultRefuse // every one refused with TOPIC_AUTHORIZATION_FAILED
	faultCount
)

var shipSeeds = [][]byte{
	// One source: append, ship, append, stop after some, ship the rest.
	{0, sopAppend, 0, 5, 0, sopRun, 0, sopAppend, 0, 7, 1, sopStop, 0, 3, 0, sopRun, 0},
	// A lost checkpoint: the rerun skips what Kafka holds.
	{0, sopAppend, 0, 7, 0, sopRun, 0, sopRewind, 0, 1, sopAppend, 0, 3, 2, sopRun, 0},
	// Keyed, three partitions, stopped by Close, rewound, faults.
	{1, sopAppend, 0, 7, 3, sopStop, 0, 4, 1, sopRewind, 0, 0, sopFault, faultRetry, sopRun, 0,
		sopAppend, 0, 6, 0, sopFault, faultDrop, sopRun, 0, sopRewind, 0, 2, sopRun, 0},
	// Large records roll segments; truncate what was shipped.
	{0, sopAppend, 0, 7, 4, sopAppend, 0, 7, 4, sopAppend, 0, 7, 4, sopRun, 0, sopTruncate, 0,
		sopAppend, 0, 2, 4, sopRewind, 0, 0, sopRun, 0},
	// A refused run, then one that ships everything.
	{0, sopAppend, 0, 4, 0, sopFault, faultRefuse, sopRun, 0, sopAppend, 0, 2, 0, sopRun, 0},
	// Two sources on one partition: a lost checkpoint behind its own
	// record is exact; behind the other's record, at least once.
	{2, sopAppend, 0, 4, 0, sopAppend, 1, 3, 1, sopRun, 0, sopRun, 1, sopAppend, 1, 2, 0, sopRewind, 1, 1,
		sopRun, 1, sopRewind, 0, 0, sopRun, 0},
	// The same from the files.
	{6, sopAppend, 0, 5, 2, sopAppend, 1, 5, 4, sopStop, 0, 3, 1, sopRewind, 0, 2, sopFault, faultDrop, sopRun, 0,
		sopTruncate, 0, sopRun, 1, sopAppend, 1, 3, 1, sopFault, faultRefuse, sopStop, 1, 9, 0},
	// A Run gives up on the records in flight; the same Shipper runs
	// again.
	{0, sopAppend, 0, 7, 1, sopAppend, 0, 7, 1, sopGiveUp, 0, sopAppend, 0, 3, 0, sopRun, 0},
	// Two sources, keyed, stops at once (m = 0), delays.
	{3, sopAppend, 0, 5, 2, sopAppend, 1, 5, 2, sopStop, 0, 0, 0, sopFault, faultDelay, sopStop, 1, 2, 1,
		sopRun, 0, sopRun, 1},
	// Transactional: stopped, rewound, faults, a refused run.
	{8, sopAppend, 0, 7, 1, sopStop, 0, 4, 1, sopRewind, 0, 0, sopFault, faultDrop, sopRun, 0,
		sopAppend, 0, 4, 0, sopFault, faultRefuse, sopRun, 0, sopRun, 0},
	// Transactional, keyed, from the files: a Run gives up, retries.
	{13, sopAppend, 0, 7, 2, sopGiveUp, 0, sopAppend, 0, 5, 3, sopFault, faultRetry, sopStop, 0, 3, 0,
		sopTruncate, 0, sopRun, 0},
	// Transactional, two sources on one partition.
	{10, sopAppend, 0, 4, 0, sopAppend, 1, 3, 1, sopRun, 0, sopRun, 1, sopRewind, 1, 1, sopRun, 1,
		sopAppend, 0, 6, 4, sopFault, faultDelay, sopStop, 0, 2, 0, sopRun, 0},
}

// shipSource is one log shipped, and the model's view of it.
type shipSource struct {
	name  string // its Source
	l     *wal.Log
	sizes map[uint64]int // record sizes by seq
	// dupOK is set once a run re-sent records Kafka held (behind another
	// source's last record): documented as at least once.
	dupOK bool
}

// topicRec is a record of the topic as the model reads it back.
type topicRec struct {
	src string
	seq uint64
	val []byte
}

// shipModel is the state of one execution.
type shipModel struct {
	t     *testing.T
	c     *kfake.Cluster
	keyed bool
	// fromDir: shippers read the log's files (NewKafkaFromDir) while it
	// is open, not the Log (NewKafka).
	fromDir bool
	txn     bool // Transactional shippers
	nparts  int32
	srcs    []*shipSource
	fault   atomic.Int32 // the fault of the run in progress
	budget  atomic.Int32 // requests left to fault (faultRetry, faultDrop)
	hold    atomic.Bool  // produce requests wait while set (at most 5 s)
	next    int32        // the fault of the next run
	rd      *kgo.Client  // reads the topic
	adm     *kadm.Client
	topic   map[int32][]topicRec // what the topic holds, read so far
	// read is the offset after the last one read, per partition: past
	// the topic's records, transaction markers and aborted records.
	read map[int32]int64
}

func runShipModel(t *testing.T, in []byte) {
	cfg := byte(0)
	if len(in) > 0 {
		cfg, in = in[0], in[1:]
	}
	m := &shipModel{t: t, keyed: cfg&1 != 0, fromDir: cfg&4 != 0, txn: cfg&8 != 0, nparts: 1,
		topic: make(map[int32][]topicRec), read: make(map[int32]int64)}
	if m.keyed {
		m.nparts = 3
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(m.nparts, "t"), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.1:0")
	}))
	noErr(t, err)
	defer c.Close()
	m.c = c
	c.ControlKey(int16(kmsg.Produce), m.control)
	nsrc := 1
	if cfg&2 != 0 {
		nsrc = 2
	}
	for i := range nsrc {
		l, err := wal.Open(t.TempDir(), &wal.Options{SegmentSize: 64 << 10, BufferSize: 1 << 20})
		noErr(t, err)
		defer l.Close()
		m.srcs = append(m.srcs, &shipSource{name: fmt.Sprintf("src-%c", 'A'+i), l: l, sizes: make(map[uint64]int)})
	}
	m.rd, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumePartitions(m.allParts()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	noErr(t, err)
	defer m.rd.Close()
	m.adm = kadm.NewClient(m.rd)

	arg := func() byte {
		if len(in) == 0 {
			return 0
		}
		b := in[0]
		in = in[1:]
		return b
	}
	source := func() *shipSource { return m.srcs[int(arg())%len(m.srcs)] }
	for steps := 0; len(in) > 0 && steps < 12; steps++ {
		switch arg() % sopCount {
		case sopAppend:
			s := source()
			m.append(s, 1+int(arg()%8), arg())
		case sopRun:
			m.run(source(), -1, 0)
		case sopStop:
			s := source()
			m.run(s, int(arg()%10), arg())
		case sopRewind:
			s := source()
			m.rewind(s, arg())
		case sopTruncate:
			m.truncate(source())
		case sopFault:
			m.next = int32(arg() % faultCount)
		case sopGiveUp:
			m.giveUp(source())
		}
	}
	// Every source ships what it has, without faults: the topic holds each
	// record once.
	m.next = faultNone
	for _, s := range m.srcs {
		m.run(s, -1, 0)
	}
	m.final()
}

// control injects the fault of the run in progress into produce requests.
func (m *shipModel) control(r kmsg.Request) (kmsg.Response, error, bool) {
	m.c.KeepControl()
	for deadline := time.Now().Add(5 * time.Second); m.hold.Load() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	switch m.fault.Load() {
	case faultDelay:
		time.Sleep(5 * time.Millisecond)
	case faultRetry:
		if m.budget.Add(-1) >= 0 {
			return produceError(r, kerr.NotEnoughReplicas), nil, true
		}
	case faultDrop:
		if m.budget.Add(-1) >= 0 {
			return nil, errors.New("connection dropped"), true
		}
	case faultRefuse:
		return produceError(r, kerr.TopicAuthorizationFailed), nil, true
	}
	return nil, nil, false
}

// produceError answers produce request r with e for every partition.
func produceError(r kmsg.Request, e *kerr.Error) kmsg.Response {
	req := r.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = e.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// shipPayload is record seq of source src, size bytes: its first byte
// (the key of a keyed shipper) varies with seq.
func shipPayload(src string, seq uint64, size int) []byte {
	if size == 0 {
		return nil
	}
	p := make([]byte, 0, size)
	p = append(p, byte('a'+seq%5))
	for len(p) < size {
		p = fmt.Appendf(p, "%s/%d|", src, seq)
	}
	return p[:size]
}

// recordSize is the size of the i-th record of an append step.
func recordSize(sel byte, i int) int {
	r := int(sel>>3) + i*7
	switch sel % 5 {
	case 0:
		return r % 4 // empty records too
	case 1, 2:
		return 1 + r%40
	case 3:
		return 200 + r
	default:
		return 12000 + r
	}
}

// partOf is the partition the model expects rec in.
func (m *shipModel) partOf(rec []byte) int32 {
	if !m.keyed || len(rec) == 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write(rec[:1])
	return int32(h.Sum32() % uint32(m.nparts))
}

func (m *shipModel) append(s *shipSource, k int, sel byte) {
	for i := range k {
		seq := s.l.NextSeq()
		size := recordSize(sel, i)
		got, err := s.l.Append(shipPayload(s.name, seq, size))
		noErr(m.t, err)
		if got != seq {
			m.t.Fatalf("%s: appended seq %d, want %d", s.name, got, seq)
		}
		s.sizes[seq] = size
	}
	if m.fromDir {
		// A shipper of the files ships what is durable.
		noErr(m.t, s.l.Sync(context.Background()))
	} else {
		noErr(m.t, s.l.Flush(context.Background()))
	}
}

func (m *shipModel) opts(s *shipSource) *KafkaOptions {
	o := &KafkaOptions{
		Brokers: m.c.ListenAddrs(), Topic: "t", Source: s.name,
		Linger: time.Millisecond, MaxInFlightRecords: 8, Transactional: m.txn,
		ConnectTimeout: 5 * time.Second, FlushTimeout: 5 * time.Second,
		// A dropped connection refreshes the metadata before the retry,
		// no sooner than MetadataMinAge (franz-go's default 5 s).
		ClientOptions: []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)},
	}
	if m.keyed {
		o.Key = func(rec []byte) []byte {
			if len(rec) == 0 {
				return nil
			}
			return rec[:1]
		}
	}
	return o
}

// checkpoint returns the committed position of s's cursor, and false if
// it has none.
func (m *shipModel) checkpoint(s *shipSource) (uint64, bool) {
	infos, err := s.l.Cursors()
	noErr(m.t, err)
	for _, ci := range infos {
		if ci.Name == DefaultCursor {
			return ci.Committed, true
		}
	}
	return 0, false
}

// run runs a shipper of s: to the end (stopAt < 0), or with Follow,
// stopped once stopAt records were acknowledged or everything was
// shipped, by its ctx (how even) or by Close (how odd).
func (m *shipModel) run(s *shipSource, stopAt int, how byte) {
	t := m.t
	fault := m.next
	m.next = faultNone
	o := m.opts(s)
	o.Follow = stopAt >= 0
	sh := m.shipper(s, o)
	c0, end, first := sh.Stats().Committed, s.l.NextSeq(), s.l.FirstSeq()
	if c0 < first {
		t.Fatalf("%s: cursor at %d below the log's first record %d", s.name, c0, first)
	}
	send, nsend, nskip, sendBytes := m.toSend(s, c0, end)

	m.fault.Store(int32(fault))
	m.budget.Store(2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st Stats
	var runErr, closeErr error
	if stopAt < 0 {
		runErr = sh.Run(ctx)
		st = sh.Stats()
		closeErr = sh.Close()
	} else {
		var acked atomic.Int64
		sh.onAck = func(uint64) { acked.Add(1) }
		runCtx, stopRun := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- sh.Run(runCtx) }()
		var wg sync.WaitGroup
		closed := make(chan error, 1)
	wait:
		for {
			select {
			case runErr = <-done:
				break wait
			case <-ctx.Done():
				t.Fatalf("%s: a stopped run did not return: %+v", s.name, sh.Stats())
			default:
			}
			if acked.Load() >= int64(stopAt) || sh.Stats().Committed >= end {
				if how%2 == 0 {
					stopRun()
				} else {
					wg.Go(func() { closed <- sh.Close() })
				}
				select {
				case runErr = <-done:
				case <-ctx.Done():
					t.Fatalf("%s: a stopped run did not return: %+v", s.name, sh.Stats())
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
		stopRun()
		wg.Wait()
		st = sh.Stats()
		if how%2 == 1 && len(closed) == 1 {
			closeErr = <-closed
		} else {
			closeErr = sh.Close()
		}
	}
	m.fault.Store(faultNone)
	noErr(t, closeErr)
	what := fmt.Sprintf("%s: run (stop at %d, how %d, fault %d) from %d to %d, %d to send, %d to skip", s.name, stopAt, how, fault, c0, end, nsend, nskip)

	t.Logf("%s: %v; %+v", what, runErr, st)

	// Its error.
	switch {
	case stopAt >= 0 && how%2 == 1 && errors.Is(runErr, ErrClosed):
		// Close won the race with Run's start: documented, nothing sent.
		if st.Shipped != 0 {
			t.Fatalf("%s: %v after shipping: %+v", what, runErr, st)
		}
	case fault == faultRefuse && runErr != nil:
		if !errors.Is(runErr, ErrNotAuthorized) || !errors.Is(runErr, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s: refused: %v", what, runErr)
		}
	case fault == faultRefuse && nsend > 0 && stopAt < 0:
		t.Fatalf("%s: every record refused, and Run returned nil: %+v", what, st)
	case runErr != nil:
		t.Fatalf("%s: %v", what, runErr)
	}

	// What the topic gained.
	gained := m.sync()
	var ngained int
	for p, recs := range gained {
		want := send[p]
		if len(recs) > len(want) {
			t.Fatalf("%s: partition %d gained %d records, want at most %v: %v", what, p, len(recs), want, recs)
		}
		for i, r := range recs {
			if r.src != s.name || r.seq != want[i] {
				t.Fatalf("%s: partition %d gained %s/%d at %d, want %s/%d (all: %v)", what, p, r.src, r.seq, i, s.name, want[i], want)
			}
		}
		ngained += len(recs)
	}
	complete := stopAt < 0 && fault != faultRefuse
	if complete && ngained != nsend {
		t.Fatalf("%s: the topic gained %d records", what, ngained)
	}

	// Its Stats.
	if st.Shipped != uint64(ngained) || st.InFlight != 0 || st.Committed < c0 || st.Committed > end {
		t.Fatalf("%s: the topic gained %d records; %+v", what, ngained, st)
	}
	if complete {
		if st.Skipped != uint64(nskip) || st.Bytes != sendBytes || st.Committed != end || st.LagRecords != 0 || st.LagBytes != 0 || st.ProduceErrors != 0 {
			t.Fatalf("%s: %+v", what, st)
		}
		if fault == faultDrop && nsend > 0 && st.ConnectErrors == 0 {
			t.Fatalf("%s: connections dropped, none counted: %+v", what, st)
		}
	} else if st.Skipped > uint64(nskip) {
		t.Fatalf("%s: %+v", what, st)
	}
	if fault == faultRefuse && runErr != nil && !errors.Is(runErr, ErrClosed) && st.ProduceErrors == 0 {
		t.Fatalf("%s: refused, no produce error counted: %+v", what, st)
	}
	// The cursor's checkpoint is what Stats said, and passes no record
	// Kafka does not hold.
	if cp, ok := m.checkpoint(s); !ok || cp != st.Committed {
		t.Fatalf("%s: checkpoint %d (%v), Stats %+v", what, cp, ok, st)
	}
	m.checkHeld(s, st.Committed, what)
}

// shipper returns a new Shipper of s: of the Log, or of its files.
func (m *shipModel) shipper(s *shipSource, o *KafkaOptions) *Shipper {
	var sh *Shipper
	var err error
	if m.fromDir {
		sh, err = NewKafkaFromDir(s.l.Dir(), nil, o)
	} else {
		sh, err = NewKafka(s.l, o)
	}
	noErr(m.t, err)
	return sh
}

// toSend returns what a run of s from c0 to end has to send: per
// partition, the records from the cursor on after the last record of this
// source there; and how many records that is, how many it skips, and
// their bytes.
func (m *shipModel) toSend(s *shipSource, c0, end uint64) (send map[int32][]uint64, nsend, nskip int, sendBytes uint64) {
	parts := []int32{0}
	if m.keyed {
		parts = parts[:0]
		for p := range m.nparts {
			parts = append(parts, p)
		}
	}
	last := make(map[int32]uint64)
	for _, p := range parts {
		if recs := m.topic[p]; len(recs) > 0 && recs[len(recs)-1].src == s.name {
			last[p] = recs[len(recs)-1].seq
		}
	}
	held := m.held(s)
	send = make(map[int32][]uint64)
	for seq := c0; seq < end; seq++ {
		p := m.partOf(shipPayload(s.name, seq, s.sizes[seq]))
		if seq <= last[p] {
			nskip++
			continue
		}
		if held[seq] > 0 {
			s.dupOK = true // behind another source's record: at least once
		}
		send[p] = append(send[p], seq)
		nsend++
		sendBytes += uint64(s.sizes[seq])
	}
	return send, nsend, nskip, sendBytes
}

// giveUp runs a shipper of s with Follow while Kafka holds its produce
// requests, stops it once records are in flight, lets it give up waiting
// for them (FlushTimeout), then lets Kafka answer and runs the same
// Shipper again to the end ("Run may be called again once it returned"):
// the records in flight when the first Run returned are sent again by the
// second, or found in Kafka by its read-back; every one lands once.
func (m *shipModel) giveUp(s *shipSource) {
	t := m.t
	o := m.opts(s)
	o.Follow = true
	// The first Run waits this long for Kafka (which holds its produce
	// requests longer) before it gives up; it also bounds the second
	// Run's commits, which a loaded machine may take long over.
	o.FlushTimeout = time.Second
	sh := m.shipper(s, o)
	defer sh.Close()
	c0, end := sh.Stats().Committed, s.l.NextSeq()
	send, nsend, _, _ := m.toSend(s, c0, end)
	what := fmt.Sprintf("%s: a Run that gave up on the records in flight, then another, from %d to %d, %d to send", s.name, c0, end, nsend)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.hold.Store(true)
	defer m.hold.Store(false)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- sh.Run(runCtx) }()
	for st := sh.Stats(); st.InFlight == 0 && st.Committed < end; st = sh.Stats() {
		if ctx.Err() != nil {
			t.Fatalf("%s: nothing in flight: %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("%s: the first Run: %v", what, err)
	}
	t.Logf("%s: after the first Run: %+v", what, sh.Stats())
	m.hold.Store(false)
	// The second Run follows too: stopped once every record is in.
	runCtx2, stop2 := context.WithCancel(ctx)
	defer stop2()
	go func() { done <- sh.Run(runCtx2) }()
	for sh.Stats().Committed < end && ctx.Err() == nil && len(done) == 0 {
		time.Sleep(time.Millisecond)
	}
	stop2()
	err := <-done
	st := sh.Stats()
	t.Logf("%s: %v; %+v", what, err, st)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("%s: the second Run: %v (%v); %+v", what, err, ctx.Err(), st)
	}
	noErr(t, sh.Close())
	gained := m.sync()
	var ngained int
	for p, recs := range gained {
		if len(recs) != len(send[p]) {
			t.Fatalf("%s: partition %d gained %v, want %v", what, p, recs, send[p])
		}
		for i, r := range recs {
			if r.src != s.name || r.seq != send[p][i] {
				t.Fatalf("%s: partition %d gained %v, want %v", what, p, recs, send[p])
			}
		}
		ngained += len(recs)
	}
	if ngained != nsend || st.Shipped != uint64(nsend) || st.Committed != end || st.LagRecords != 0 || st.InFlight != 0 {
		t.Fatalf("%s: the topic gained %d records; %+v", what, ngained, st)
	}
	if cp, ok := m.checkpoint(s); !ok || cp != end {
		t.Fatalf("%s: checkpoint %d (%v)", what, cp, ok)
	}
}

// held counts the records of s the topic holds, by seq.
func (m *shipModel) held(s *shipSource) map[uint64]int {
	n := make(map[uint64]int)
	for _, recs := range m.topic {
		for _, r := range recs {
			if r.src == s.name {
				n[r.seq]++
			}
		}
	}
	return n
}

// checkHeld checks that the topic holds every record of s below below.
func (m *shipModel) checkHeld(s *shipSource, below uint64, what string) {
	held := m.held(s)
	for seq := uint64(1); seq < below; seq++ {
		if held[seq] == 0 {
			m.t.Fatalf("%s: record %d of %s is below the cursor (%d) and not in Kafka", what, seq, s.name, below)
		}
	}
}

// rewind moves s's cursor back, as a lost checkpoint would leave it.
func (m *shipModel) rewind(s *shipSource, where byte) {
	cp, ok := m.checkpoint(s)
	if !ok {
		return
	}
	first := s.l.FirstSeq()
	to := first + uint64(where)%(cp-first+1)
	cur, err := s.l.Cursor(DefaultCursor)
	noErr(m.t, err)
	noErr(m.t, cur.Seek(to))
	noErr(m.t, cur.Close())
}

// truncate deletes what s's retention may: records its cursor passed.
func (m *shipModel) truncate(s *shipSource) {
	cp, ok := m.checkpoint(s)
	if !ok {
		return
	}
	noErr(m.t, s.l.TruncateFront(cp))
	if f := s.l.FirstSeq(); f > cp {
		m.t.Fatalf("%s: TruncateFront(%d) deleted up to %d", s.name, cp, f)
	}
}

// sync reads what the topic gained since the last sync, checking each
// record's headers and bytes, and returns it by partition.
func (m *shipModel) sync() map[int32][]topicRec {
	t := m.t
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := m.adm.ListCommittedOffsets(ctx, "t")
	noErr(t, err)
	gained := make(map[int32][]topicRec)
	behind := func() bool {
		for p := range m.nparts {
			e, ok := ends.Lookup("t", p)
			if !ok || e.Err != nil {
				t.Fatalf("end offset of t/%d: %v", p, e.Err)
			}
			if m.read[p] < e.Offset {
				return true
			}
		}
		return false
	}
	for behind() {
		fs := m.rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read the topic: %v", ctx.Err())
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			// Only transactions leave offsets a read_committed consumer
			// does not read: aborted records.
			if r.Offset < m.read[r.Partition] || (!m.txn && r.Offset != m.read[r.Partition]) {
				t.Fatalf("record at %d/%d, want offset %d", r.Partition, r.Offset, m.read[r.Partition])
			}
			m.read[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				if !m.txn {
					t.Fatalf("a transaction marker at %d/%d, and no shipper is Transactional", r.Partition, r.Offset)
				}
				return
			}
			src, hseq := recordHeaders(r)
			seq, err := strconv.ParseUint(hseq, 10, 64)
			wantHeaders := 2
			if m.keyed {
				wantHeaders++ // HeaderPartitions
			}
			if n, ok := partitionsOf(r); err != nil || len(r.Headers) != wantHeaders || m.keyed && (!ok || n != int64(m.nparts)) {
				t.Fatalf("record at %d/%d: headers %v", r.Partition, r.Offset, r.Headers)
			}
			var s *shipSource
			for _, x := range m.srcs {
				if x.name == src {
					s = x
				}
			}
			size, ok := 0, false
			if s != nil {
				size, ok = s.sizes[seq]
			}
			if !ok {
				t.Fatalf("record at %d/%d: source %q seq %d was never appended", r.Partition, r.Offset, src, seq)
			}
			want := shipPayload(src, seq, size)
			if string(r.Value) != string(want) {
				t.Fatalf("record %s/%d at %d/%d: %d bytes %q, want %d bytes", src, seq, r.Partition, r.Offset, len(r.Value), r.Value, len(want))
			}
			if p := m.partOf(want); p != r.Partition {
				t.Fatalf("record %s/%d in partition %d, want %d", src, seq, r.Partition, p)
			}
			tr := topicRec{src: src, seq: seq, val: r.Value}
			m.topic[r.Partition] = append(m.topic[r.Partition], tr)
			gained[r.Partition] = append(gained[r.Partition], tr)
		})
	}
	return gained
}

// recordHeaders returns the values of r's HeaderSource and HeaderSeq.
func recordHeaders(r *kgo.Record) (src, seq string) {
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderSource:
			src = string(h.Value)
		case HeaderSeq:
			seq = string(h.Value)
		}
	}
	return src, seq
}

// final checks, once every source ran to the end, that the topic holds
// every record of each exactly once (at least once after a run behind
// another source's record), in order per partition.
func (m *shipModel) final() {
	for _, s := range m.srcs {
		held := m.held(s)
		for seq := range s.sizes {
			if n := held[seq]; n == 0 || (n > 1 && !s.dupOK) {
				m.t.Fatalf("record %d of %s is in Kafka %d times", seq, s.name, n)
			}
		}
		if s.dupOK {
			continue
		}
		for p, recs := range m.topic {
			var prev uint64
			for _, r := range recs {
				if r.src != s.name {
					continue
				}
				if r.seq <= prev {
					m.t.Fatalf("partition %d: %s record %d after %d", p, s.name, r.seq, prev)
				}
				prev = r.seq
			}
		}
	}
}

// allParts is every partition of the topic, from its start.
func (m *shipModel) allParts() map[string]map[int32]kgo.Offset {
	at := make(map[int32]kgo.Offset)
	for p := range m.nparts {
		at[p] = kgo.NewOffset().AtStart()
	}
	return map[string]map[int32]kgo.Offset{"t": at}
}
