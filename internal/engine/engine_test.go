package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/sys"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// _guard bounds every wait of these tests: a hang fails the test after it,
// it never stands in for synchronisation.
const _guard = 10 * time.Second

// waitUntil waits until cond holds, checking it again whenever the engine
// broadcasts progress (writes, syncs, releases, the flusher going idle,
// failure, close). It does not count as a waiter, so it does not wake the
// flusher.
func waitUntil(t testing.TB, e *Engine, what string, cond func() bool) {
	t.Helper()
	guard := time.NewTimer(_guard)
	defer guard.Stop()
	for {
		ch := e.Progress()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-guard.C:
			t.Fatalf("not after %v: %s", _guard, what)
		}
	}
}

// advanceUntil moves clk to the deadline of the earliest armed timer, over
// and over, until cond holds. Between steps it waits for the engine to
// make progress or arm a timer.
func advanceUntil(t testing.TB, e *Engine, clk *clock.Fake, what string, cond func() bool) {
	t.Helper()
	guard := time.NewTimer(_guard)
	defer guard.Stop()
	for {
		progress, timers := e.Progress(), clk.Changed()
		if cond() {
			return
		}
		if at, ok := clk.Next(); ok {
			clk.Advance(at.Sub(clk.Now()))
			continue
		}
		select {
		case <-progress:
		case <-timers:
		case <-guard.C:
			t.Fatalf("not after %v of real time (fake time %v): %s", _guard, clk.Now(), what)
		}
	}
}

// newFake returns a fake clock for an engine.
func newFake() *clock.Fake { return clock.NewFake(time.Unix(1e9, 0)) }

// commitN claims n bytes for one record, fills them and commits them.
func commitN(t testing.TB, e *Engine, n int) Claim {
	t.Helper()
	c, err := e.Claim(n, 1)
	if err != nil {
		t.Fatalf("Claim(%d): %v", n, err)
	}
	e.Put(c, 0, make([]byte, n))
	e.Commit(c)
	return c
}

// memSink collects everything written, checks positions are contiguous, and
// records when syncs happened.
type memSink struct {
	mu       sync.Mutex
	start    uint64
	next     uint64
	data     []byte
	syncs    int
	syncedAt []uint64 // len(data) at each sync
	delay    time.Duration
	writeErr error
	syncErr  error
	t        testing.TB
}

func (s *memSink) Write(pos uint64, a, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeErr != nil {
		return s.writeErr
	}
	if pos != s.next {
		s.t.Errorf("sink: write at %d, want %d", pos, s.next)
	}
	s.data = append(s.data, a...)
	s.data = append(s.data, b...)
	s.next = pos + uint64(len(a)+len(b))
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	return nil
}

func (s *memSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncs++
	if s.syncErr != nil {
		return s.syncErr
	}
	s.syncedAt = append(s.syncedAt, uint64(len(s.data)))
	return nil
}

func (s *memSink) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.data...)
}

// record layout for tests: [len u16][producer u16][counter u32][seq u64][filler...]
const recHdr = 16

func putRecord(e *Engine, id, n int, ctr uint32, buf []byte) (Claim, error) {
	c, err := e.Claim(len(buf), 1)
	if err != nil {
		return c, err
	}
	fillCommit(e, c, id, ctr, buf)
	return c, nil
}

// putRecordFast is putRecord with the claim of a producer's fast path:
// FastClaim first, Claim when it fails. fast says whether FastClaim
// succeeded.
func putRecordFast(e *Engine, id int, ctr uint32, buf []byte) (fast bool, err error) {
	c, fast := e.FastClaim(len(buf))
	if !fast {
		if c, err = e.Claim(len(buf), 1); err != nil {
			return false, err
		}
	}
	fillCommit(e, c, id, ctr, buf)
	return fast, nil
}

// fillCommit writes the test record of producer id's ctr-th write, buf,
// into the claim c (which holds exactly it) and commits it.
func fillCommit(e *Engine, c Claim, id int, ctr uint32, buf []byte) {
	binary.LittleEndian.PutUint16(buf[0:], uint16(len(buf)))
	binary.LittleEndian.PutUint16(buf[2:], uint16(id))
	binary.LittleEndian.PutUint32(buf[4:], ctr)
	binary.LittleEndian.PutUint64(buf[8:], c.Seq)
	for i := recHdr; i < len(buf); i++ {
		buf[i] = byte(ctr) + byte(i)
	}
	e.Put(c, 0, buf[:len(buf)/2])
	e.Put(c, len(buf)/2, buf[len(buf)/2:])
	e.Commit(c)
}

// checkStream parses the test records and checks exactly-once, per-producer
// order, consecutive sequence numbers in stream order, and payload integrity.
func checkStream(t *testing.T, data []byte, firstSeq uint64, want []uint32) {
	t.Helper()
	got := make([]uint32, len(want))
	seq := firstSeq
	for off := 0; off < len(data); {
		if len(data)-off < recHdr {
			t.Fatalf("torn record at %d", off)
		}
		n := int(binary.LittleEndian.Uint16(data[off:]))
		if n < recHdr || off+n > len(data) {
			t.Fatalf("bad length %d at %d", n, off)
		}
		id := int(binary.LittleEndian.Uint16(data[off+2:]))
		ctr := binary.LittleEndian.Uint32(data[off+4:])
		s := binary.LittleEndian.Uint64(data[off+8:])
		if s != seq {
			t.Fatalf("record at %d has seq %d, want %d (file order must be claim order)", off, s, seq)
		}
		seq++
		if id >= len(want) {
			t.Fatalf("foreign producer %d at %d", id, off)
		}
		if ctr != got[id] {
			t.Fatalf("producer %d: counter %d at offset %d, want %d", id, ctr, off, got[id])
		}
		got[id]++
		for i := recHdr; i < n; i++ {
			if data[off+i] != byte(ctr)+byte(i) {
				t.Fatalf("producer %d record %d: byte %d garbled", id, ctr, i)
			}
		}
		off += n
	}
	for id := range want {
		if got[id] != want[id] {
			t.Errorf("producer %d: %d records in output, want %d", id, got[id], want[id])
		}
	}
}

// TestConcurrentExactlyOnceInOrder: with 1, 8 and 64 producers, across
// the 32-bit wrap of the packed position and the 31-bit wrap of its
// sequence number, every record is in the stream once, in claim order
// (consecutive sequence numbers), each producer's in the order it wrote
// them. Each case runs twice: claims made with Claim, and claims made as a
// producer's fast path makes them (FastClaim, then Claim when it fails),
// whose Pos and Seq must agree with Claim's.
func TestConcurrentExactlyOnceInOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		producers int
		cfg       Config
	}{
		{"1-small-ring", 1, Config{Size: MinSize, BlockSize: 1024}},
		{"8-small-ring", 8, Config{Size: MinSize, BlockSize: 4096}},
		{"64-small-ring", 64, Config{Size: MinSize, BlockSize: 1024}},
		{"8-default", 8, Config{}},
		{"8-wrap32", 8, Config{Size: MinSize, BlockSize: 1024, StartPos: 1<<32 - 20<<10, FirstSeq: 1<<31 - 100}},
		{"4-wrapseq", 4, Config{Size: MinSize, BlockSize: 1024, StartPos: 1<<33 - 8<<10, FirstSeq: 1<<32 - 50}},
		// A start inside a block (a file appended to at an unaligned length).
		{"8-unaligned-start", 8, Config{Size: MinSize, BlockSize: 4096, StartPos: 3*4096 + 1234}},
		{"2-unaligned-wrap", 2, Config{Size: MinSize, BlockSize: 1024, StartPos: 1<<32 - 1000}},
		{"1-wrap32", 1, Config{Size: MinSize, BlockSize: 1024, StartPos: 1<<32 - 20<<10, FirstSeq: 1<<31 - 100}},
	} {
		for _, fast := range []bool{false, true} {
			name := tc.name
			if fast {
				name += "/fast"
			}
			t.Run(name, func(t *testing.T) { testExactlyOnceInOrder(t, tc.producers, tc.cfg, fast) })
		}
	}
}

// testExactlyOnceInOrder is one case of TestConcurrentExactlyOnceInOrder.
func testExactlyOnceInOrder(t *testing.T, producers int, cfg Config, fast bool) {
	sink := &memSink{t: t, start: cfg.StartPos, next: cfg.StartPos}
	e, err := New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	perProducer := 3000
	if testing.Short() {
		perProducer = 500
	}
	want := make([]uint32, producers)
	var fastClaims atomic.Uint64
	var wg sync.WaitGroup
	for id := range producers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 7))
			buf := make([]byte, 2048)
			for i := range perProducer {
				n := recHdr + rng.IntN(200)
				if i%97 == 0 {
					n = recHdr + rng.IntN(2000)
				}
				var err error
				if fast {
					var ok bool
					if ok, err = putRecordFast(e, id, uint32(i), buf[:n]); ok {
						fastClaims.Add(1)
					}
				} else {
					_, err = putRecord(e, id, n, uint32(i), buf[:n])
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
			want[id] = uint32(perProducer)
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	checkStream(t, sink.bytes(), cfg.FirstSeq, want)
	if fast && fastClaims.Load() == 0 {
		t.Error("no FastClaim succeeded")
	}
	st := e.Stats()
	if st.Written != st.Claimed || st.Synced != st.Claimed {
		t.Errorf("after Close: %+v", st)
	}
	if got := st.Written - cfg.StartPos; got != uint64(len(sink.bytes())) {
		t.Errorf("written %d, sink has %d", got, len(sink.bytes()))
	}
}

func TestTryClaimAccountsEveryDrop(t *testing.T) {
	sink := &memSink{t: t, delay: 200 * time.Microsecond}
	e, err := New(Config{Size: MinSize, BlockSize: 1024, FlushBytes: 4096}, sink)
	if err != nil {
		t.Fatal(err)
	}
	const producers, per = 8, 2000
	var accepted, dropped atomic.Int64
	var wg sync.WaitGroup
	for id := range producers {
		wg.Go(func() {
			buf := make([]byte, 100)
			for i := range per {
				c, ok, err := e.TryClaim(len(buf), 1)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					dropped.Add(1)
					continue
				}
				binary.LittleEndian.PutUint32(buf, uint32(id<<16|i))
				e.Put(c, 0, buf)
				e.Commit(c)
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	got := int64(len(sink.bytes()) / 100)
	if got != accepted.Load() {
		t.Fatalf("sink has %d records, %d accepted", got, accepted.Load())
	}
	if accepted.Load()+dropped.Load() != producers*per {
		t.Fatalf("accepted %d + dropped %d != %d", accepted.Load(), dropped.Load(), producers*per)
	}
	if dropped.Load() == 0 {
		t.Logf("no drops happened (sink was fast enough); accounting still exact")
	}
}

// TestClaimByTimesOut: a ClaimBy on a full ring waits for its deadline on
// the engine's clock, and not past it.
func TestClaimByTimesOut(t *testing.T) {
	block := make(chan struct{})
	sink := &blockingSink{block: block}
	clk := newFake()
	e, err := New(Config{Size: MinSize, BlockSize: 1024, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	// Fill the ring; the sink blocks on the first write.
	for {
		c, ok, err := e.TryClaim(1000, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		e.Put(c, 0, make([]byte, 1000))
		e.Commit(c)
	}
	deadline := e.Now().Add(20 * time.Millisecond)
	type result struct {
		ok  bool
		err error
	}
	res := make(chan result, 1)
	go func() {
		_, ok, err := e.ClaimBy(1000, 1, deadline)
		res <- result{ok, err}
	}()
	// The claim waits on a timer for its deadline; the flusher, stuck in
	// the sink, may have one too.
	guard := time.NewTimer(_guard)
	defer guard.Stop()
	for {
		changed := clk.Changed()
		if slices.Contains(clk.Deadlines(), deadline) {
			break
		}
		select {
		case r := <-res:
			t.Fatalf("ClaimBy returned (ok=%v err=%v) without waiting for its deadline", r.ok, r.err)
		case <-changed:
		case <-guard.C:
			t.Fatal("ClaimBy armed no timer for its deadline")
		}
	}
	clk.Advance(20*time.Millisecond - time.Nanosecond)
	if !slices.Contains(clk.Deadlines(), deadline) {
		t.Fatal("ClaimBy's timer fired before its deadline")
	}
	clk.Advance(time.Nanosecond)
	if r := <-res; r.ok || r.err != nil {
		t.Fatalf("ClaimBy on a full ring: ok=%v err=%v", r.ok, r.err)
	}
	// The wait that timed out is a wait for space: counted, with its
	// length (a BlockTimeout writer that always times out reported none).
	if s := e.Stats(); s.BlockedWaits != 1 || s.Blocked != 20*time.Millisecond {
		t.Fatalf("after a ClaimBy that waited 20ms and timed out: BlockedWaits=%d Blocked=%v, want 1, 20ms", s.BlockedWaits, s.Blocked)
	}
	close(block)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// blockingSink's writes wait until block is closed; the first closes
// entered, if set, before it waits.
type blockingSink struct {
	block   chan struct{}
	entered chan struct{}
	once    sync.Once
	n       atomic.Int64
}

func (s *blockingSink) Write(pos uint64, a, b []byte) error {
	if s.entered != nil {
		s.once.Do(func() { close(s.entered) })
	}
	<-s.block
	s.n.Add(int64(len(a) + len(b)))
	return nil
}
func (s *blockingSink) Sync() error { return nil }

func TestWaitSyncedNeedsASyncAfterTheWrite(t *testing.T) {
	sink := &memSink{t: t}
	e, err := New(Config{Size: MinSize, BlockSize: 1024}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range 100 {
		c, err := e.Claim(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		e.Put(c, 0, make([]byte, 64))
		e.Commit(c)
		if err := e.WaitSynced(context.Background(), c.Pos+64); err != nil {
			t.Fatal(err)
		}
		sink.mu.Lock()
		last := sink.syncedAt[len(sink.syncedAt)-1]
		sink.mu.Unlock()
		if last < uint64(i+1)*64 {
			t.Fatalf("record %d released by a sync that covered only %d bytes", i, last)
		}
	}
}

func TestGroupCommitBatchesWaiters(t *testing.T) {
	sink := &memSink{t: t, delay: 0}
	e, err := New(Config{Size: 1 << 20}, &slowSyncSink{memSink: sink, d: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const waiters, per = 32, 20
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			for range per {
				c, err := e.Claim(128, 1)
				if err != nil {
					t.Error(err)
					return
				}
				e.Put(c, 0, make([]byte, 128))
				e.Commit(c)
				if err := e.WaitSynced(context.Background(), c.Pos+128); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// 640 durable acks; with a 1 ms sync and no grouping this needs 640 syncs.
	if s := e.Stats().Syncs; s > waiters*per/4 {
		t.Fatalf("%d syncs for %d acks: group commit is not grouping", s, waiters*per)
	}
}

type slowSyncSink struct {
	*memSink
	d time.Duration
}

func (s *slowSyncSink) Sync() error { time.Sleep(s.d); return s.memSink.Sync() }

func TestSyncModes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"batch-age", Config{Size: MinSize, Sync: SyncBatch, BatchBytes: 1 << 20, BatchAge: 5 * time.Millisecond}},
		{"batch-bytes", Config{Size: MinSize, Sync: SyncBatch, BatchBytes: 1024, BatchAge: time.Hour}},
		{"interval", Config{Size: MinSize, Sync: SyncInterval, SyncEvery: 5 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &memSink{t: t}
			clk := newFake()
			tc.cfg.Clock = clk
			e, err := New(tc.cfg, sink)
			if err != nil {
				t.Fatal(err)
			}
			start := clk.Now()
			c := commitN(t, e, 2048)
			advanceUntil(t, e, clk, "synced by policy", func() bool { return e.Synced() >= c.Pos+2048 })
			// batch-bytes syncs without waiting; the timed policies
			// wait their period, not more.
			if took, most := clk.Now().Sub(start), max(tc.cfg.BatchAge, tc.cfg.SyncEvery); took > most {
				t.Errorf("synced after %v of clock time, want at most %v", took, most)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("never", func(t *testing.T) {
		sink := &memSink{t: t}
		clk := newFake()
		e, err := New(Config{Size: MinSize, FlushInterval: time.Millisecond, Clock: clk}, sink)
		if err != nil {
			t.Fatal(err)
		}
		// No Flush: the flusher's own timer writes the record, and a
		// flusher that synced on its timers would sync it.
		c := commitN(t, e, 100)
		advanceUntil(t, e, clk, "written by the flush timer", func() bool { return e.Written() >= c.Pos+100 })
		// Once idle with no timer armed, the flusher does nothing until
		// kicked: it cannot sync on its own.
		advanceUntil(t, e, clk, "the flusher goes idle", func() bool { return e.Idle() && clk.Timers() == 0 })
		if n := e.Stats().Syncs; n != 0 {
			t.Fatalf("SyncNever synced on its own (%d syncs)", n)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if n := e.Stats().Syncs; n != 1 {
			t.Fatalf("Close must sync once, got %d", n)
		}
	})
}

func TestSinkErrorsAreSticky(t *testing.T) {
	t.Run("sync", func(t *testing.T) {
		sink := &memSink{t: t, syncErr: errors.New("EIO")}
		e, err := New(Config{Size: MinSize}, sink)
		if err != nil {
			t.Fatal(err)
		}
		commitN(t, e, 10)
		if err := e.Sync(context.Background()); err == nil || err.Error() != "EIO" {
			t.Fatalf("Sync: %v", err)
		}
		for range 3 {
			if _, err := e.Claim(10, 1); err == nil {
				t.Fatal("claim after failed sync succeeded")
			}
			if err := e.Sync(context.Background()); err == nil {
				t.Fatal("Sync after failure succeeded")
			}
		}
		if err := e.Close(); err == nil {
			t.Fatal("Close hid the failure")
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if sink.syncs != 1 {
			t.Fatalf("failed fsync was retried: %d calls", sink.syncs)
		}
	})
	t.Run("write-unblocks-full-producers", func(t *testing.T) {
		sink := &memSink{t: t, writeErr: errors.New("ENOSPC")}
		e, err := New(Config{Size: MinSize, BlockSize: 1024}, sink)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					c, err := e.Claim(1000, 1)
					if err != nil {
						return
					}
					e.Put(c, 0, make([]byte, 1000))
					e.Commit(c)
				}
			})
		}
		wg.Wait() // producers must all return, not hang on a full ring
		if err := e.Close(); err == nil || err.Error() != "ENOSPC" {
			t.Fatalf("Close: %v", err)
		}
	})
}

func TestCloseRacingProducersLosesNothing(t *testing.T) {
	for trial := range 20 {
		sink := &memSink{t: t}
		e, err := New(Config{Size: MinSize, BlockSize: 1024}, sink)
		if err != nil {
			t.Fatal(err)
		}
		var ok atomic.Int64
		// Close after trial%5 * 500 records: from the first claims to
		// several laps of the ring.
		ready, target := make(chan struct{}), int64(trial%5)*500
		var once sync.Once
		var wg sync.WaitGroup
		for id := range 8 {
			wg.Go(func() {
				buf := make([]byte, 40)
				for i := 0; ; i++ {
					if ok.Load() >= target {
						once.Do(func() { close(ready) })
					}
					if _, err := putRecord(e, id, len(buf), uint32(i), buf); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Error(err)
						}
						return
					}
					ok.Add(1)
				}
			})
		}
		<-ready
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if got := int64(len(sink.bytes()) / 40); got != ok.Load() {
			t.Fatalf("trial %d: %d writes succeeded, %d reached the sink", trial, ok.Load(), got)
		}
		if err := e.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
		if err := e.Flush(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatal("Flush after Close:", err)
		}
		if err := e.Sync(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatal("Sync after Close:", err)
		}
	}
}

func TestBadConfigAndClaims(t *testing.T) {
	for _, c := range []Config{{Size: 1000}, {Size: MinSize / 2}, {Size: MinSize, BlockSize: 3000}, {Sync: SyncBatch}, {Sync: SyncInterval}, {Sync: 9}} {
		if _, err := New(c, &memSink{t: t}); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	e, err := New(Config{Size: MinSize}, &memSink{t: t})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, n := range []int{0, -1, e.MaxClaim() + 1} {
		if _, err := e.Claim(n, 1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Claim(%d): %v", n, err)
		}
	}
	c, err := e.Claim(e.MaxClaim(), 1)
	if err != nil {
		t.Fatalf("Claim(MaxClaim): %v", err)
	}
	e.Put(c, 0, make([]byte, c.Len()))
	e.Commit(c)
}

func TestCommitAllocatesNothing(t *testing.T) {
	e, err := New(Config{}, nullSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := make([]byte, 128)
	allocs := testing.AllocsPerRun(1000, func() {
		c, err := e.Claim(len(p), 1)
		if err != nil {
			panic(err)
		}
		e.Put(c, 0, p)
		e.Commit(c)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per claim/put/commit", allocs)
	}
}

type nullSink struct{}

func (nullSink) Write(uint64, []byte, []byte) error { return nil }
func (nullSink) Sync() error                        { return nil }

func BenchmarkClaimCommit(b *testing.B) {
	for _, g := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d/size=128", g), func(b *testing.B) {
			e, err := New(Config{}, nullSink{})
			if err != nil {
				b.Fatal(err)
			}
			p := make([]byte, 128)
			b.SetBytes(128)
			b.ReportAllocs()
			b.SetParallelism(max(1, g/2))
			b.ResetTimer()
			if g == 1 {
				for range b.N {
					c, err := e.Claim(len(p), 1)
					if err != nil {
						b.Fatal(err)
					}
					e.Put(c, 0, p)
					e.Commit(c)
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						c, err := e.Claim(len(p), 1)
						if err != nil {
							b.Error(err)
							return
						}
						e.Put(c, 0, p)
						e.Commit(c)
					}
				})
			}
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if st := e.Stats(); st.Written != uint64(b.N)*128 {
				b.Fatalf("wrote %d bytes, want %d", st.Written, b.N*128)
			}
		})
	}
}

// pipeSink is a PipelinedSink: PrepareSync captures how many bytes were
// written; the returned function is slow, and marks them synced.
type pipeSink struct {
	memSink
	inflight atomic.Int32
	overlap  atomic.Int32 // writes that ran while a sync was in flight
}

func (s *pipeSink) Write(pos uint64, a, b []byte) error {
	if s.inflight.Load() != 0 {
		s.overlap.Add(1)
	}
	return s.memSink.Write(pos, a, b)
}

func (s *pipeSink) PrepareSync() func() error {
	return s.pipelinedSync(&s.inflight, func() { time.Sleep(500 * time.Microsecond) })
}

// pipelinedSync returns a PipelinedSink's sync of the bytes written so far:
// it fails the test if another one is under way (counted in inflight),
// calls wait, then records the sync, or fails with syncErr.
func (s *memSink) pipelinedSync(inflight *atomic.Int32, wait func()) func() error {
	s.mu.Lock()
	n := uint64(len(s.data))
	s.mu.Unlock()
	return func() error {
		if inflight.Add(1) != 1 {
			s.t.Error("sink: two syncs in flight")
		}
		defer inflight.Add(-1)
		wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.syncs++
		if s.syncErr != nil {
			return s.syncErr
		}
		s.syncedAt = append(s.syncedAt, n)
		return nil
	}
}

func TestPipelinedSyncOverlapsWritesAndCoversOnlyWhatItSaw(t *testing.T) {
	sink := &pipeSink{memSink: memSink{t: t}}
	e, err := New(Config{Size: 1 << 20, Sync: SyncBatch, BatchBytes: 4096, BatchAge: time.Millisecond}, sink)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			buf := make([]byte, 100)
			for i := range 400 {
				c, err := putRecord(e, g, len(buf), uint32(i), buf)
				if err != nil {
					t.Error(err)
					return
				}
				if i%20 == 0 {
					if err := e.WaitSynced(context.Background(), c.Pos+100); err != nil {
						t.Error(err)
						return
					}
					sink.mu.Lock()
					covered := sink.syncedAt[len(sink.syncedAt)-1]
					sink.mu.Unlock()
					if covered < c.Pos+100 {
						t.Errorf("WaitSynced(%d) returned after a sync that covered %d bytes", c.Pos+100, covered)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	want := make([]uint32, 8)
	for i := range want {
		want[i] = 400
	}
	checkStream(t, sink.bytes(), 0, want)
	if last := sink.syncedAt[len(sink.syncedAt)-1]; last != uint64(len(sink.bytes())) {
		t.Fatalf("Close left %d of %d bytes unsynced", uint64(len(sink.bytes()))-last, len(sink.bytes()))
	}
	if sink.overlap.Load() == 0 {
		t.Fatalf("no write overlapped a sync: the sync is not pipelined")
	}
}

func TestPipelinedSyncErrorIsSticky(t *testing.T) {
	sink := &pipeSink{memSink: memSink{t: t, syncErr: errors.New("EIO")}}
	e, err := New(Config{Size: MinSize}, sink)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, e, 10)
	if err := e.Sync(context.Background()); err == nil || err.Error() != "EIO" {
		t.Fatalf("Sync: %v", err)
	}
	if _, err := e.Claim(10, 1); err == nil {
		t.Fatal("claim after failed pipelined sync succeeded")
	}
	if err := e.Close(); err == nil {
		t.Fatal("Close hid the failure")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.syncs != 1 {
		t.Fatalf("failed fsync was retried: %d calls", sink.syncs)
	}
}

// TestBufferAligned pins that the ring starts on a sys.BlockSize boundary,
// which the O_DIRECT sink relies on to write straight from the ring.
func TestBufferAligned(t *testing.T) {
	e, err := New(Config{Size: MinSize}, &memSink{t: t})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !sys.IsAligned(e.buf) {
		t.Fatal("ring buffer is not aligned to sys.BlockSize")
	}
}

// TestUnalignedStartFullRing fills a ring that starts mid-block: the bytes
// before StartPos in its first block count as used, so a claim of
// MaxClaim still fits once the ring drains and never overwrites unwritten
// bytes.
func TestUnalignedStartFullRing(t *testing.T) {
	sink := &memSink{t: t, start: 5000, next: 5000}
	e, err := New(Config{Size: MinSize, BlockSize: 4096, StartPos: 5000}, sink)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint32, 1)
	buf := make([]byte, e.MaxClaim())
	for i, n := range []int{e.MaxClaim() - 5000%4096, 100, e.MaxClaim(), 3000} {
		if _, err := putRecord(e, 0, n, uint32(i), buf[:n]); err != nil {
			t.Fatal(err)
		}
		want[0]++
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	checkStream(t, sink.bytes(), 0, want)
}

// TestCloseAfterFailureWaitsForClaims: a sink failure stops the flusher,
// but a producer that claimed before it may still be copying into the
// ring. Close must wait for its commit before it releases the ring (a
// mapping: touching it afterwards would fault).
func TestCloseAfterFailureWaitsForClaims(t *testing.T) {
	sink := &memSink{t: t, writeErr: errors.New("disk on fire")}
	// Large enough for huge pages. c fills the first block, so the flusher
	// can write it (and fail) while held, in the next block, is open.
	const bs = 64 << 10
	e, err := New(Config{Size: 4 << 20, BlockSize: bs}, sink)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Claim(bs, 1)
	if err != nil {
		t.Fatal(err)
	}
	held, err := e.Claim(100, 1) // claimed, not yet copied
	if err != nil {
		t.Fatal(err)
	}
	e.Put(c, 0, make([]byte, bs))
	e.Commit(c)
	e.RequestSync(bs) // the write of c fails
	waitUntil(t, e, "the sink's write error fails the engine", func() bool { return e.Err() != nil })
	waiting := make(chan struct{})
	e.onCommitWait = func() { close(waiting) } // only Close waits: the failed flusher exits
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a claim was not committed", err)
	case <-waiting:
	}
	e.Put(held, 0, make([]byte, 100)) // would fault after an early release
	e.Commit(held)
	if err := <-closed; err == nil || err.Error() != "disk on fire" {
		t.Fatalf("Close: %v, want the sink's error", err)
	}
}

// TestLate: an idle flusher is never late; one whose Sink.Write runs far
// past the fastest recent write is; once it returns and goes idle again,
// it is not.
//
// The first write is expected to take no time (no estimate yet), so the
// flusher is late once the clock passes its start by more than _lateSlack.
func TestLate(t *testing.T) {
	sink := &blockingSink{block: make(chan struct{}), entered: make(chan struct{})}
	clk := newFake()
	e, err := New(Config{Size: MinSize, BlockSize: 1024, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if e.Late() {
		t.Fatal("an idle flusher is late")
	}
	c := commitN(t, e, 64)
	e.RequestSync(c.Pos + 64) // write now
	<-sink.entered
	clk.Advance(_lateSlack)
	if e.Late() {
		t.Fatalf("late %v into its write, no more than the slack", _lateSlack)
	}
	clk.Advance(time.Nanosecond)
	if !e.Late() {
		t.Fatalf("a flusher %v into a write expected to take 0 is not late", _lateSlack+time.Nanosecond)
	}
	close(sink.block)
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.Late() {
		t.Fatal("still late after the sink returned")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// gateSink records the length of every write; the first write waits until
// gate is closed, after announcing itself on entered.
type gateSink struct {
	entered chan struct{}
	gate    chan struct{}
	mu      sync.Mutex
	lens    []int
}

func (s *gateSink) Write(pos uint64, a, b []byte) error {
	s.mu.Lock()
	first := len(s.lens) == 0
	s.lens = append(s.lens, len(a)+len(b))
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.gate
	}
	return nil
}

func (s *gateSink) Sync() error { return nil }

// TestFullWritesWhileProducersRefill: the flusher reads the frontier again
// before each write, so producers that refill the space a write released
// turn 1.5 MaxWrite of committed bytes into two full writes, not a full one
// and a half one, so half writes cannot lock into alternating with full
// ones.
func TestFullWritesWhileProducersRefill(t *testing.T) {
	const kb = 1 << 10
	sink := &gateSink{entered: make(chan struct{}), gate: make(chan struct{})}
	e, err := New(Config{Size: 64 * kb, BlockSize: 4 * kb, MaxWrite: 32 * kb, FlushBytes: 16 * kb, FlushInterval: time.Second}, sink)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(n int) {
		t.Helper()
		c, err := e.Claim(n, 1)
		if err != nil {
			t.Fatal(err)
		}
		e.Put(c, 0, make([]byte, n))
		e.Commit(c)
	}
	commit(48 * kb) // 1.5 MaxWrite: the flusher starts a 32 KiB write
	<-sink.entered
	commit(16 * kb) // fills the ring while that write runs
	close(sink.gate)
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if want := []int{32 * kb, 32 * kb}; !slices.Equal(sink.lens, want) {
		t.Fatalf("write lengths %v, want %v", sink.lens, want)
	}
}

// TestIdleWakeRacingProducers: producers that commit at once into an idle
// engine race to clear idle, and only the winner kicks the flusher. No
// round may lose the kick: without Flush or any waiter, everything claimed
// must still be written within a few flush intervals.
func TestIdleWakeRacingProducers(t *testing.T) {
	sink := &memSink{t: t}
	e, err := New(Config{Size: MinSize, BlockSize: 1024, FlushInterval: time.Millisecond}, sink)
	if err != nil {
		t.Fatal(err)
	}
	const producers, rounds = 4, 200
	want := make([]uint32, producers)
	for round := range rounds {
		waitUntil(t, e, fmt.Sprintf("round %d: the flusher goes idle", round), e.Idle)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for id := range producers {
			wg.Go(func() {
				buf := make([]byte, 64)
				<-start
				if _, err := putRecord(e, id, 64, want[id], buf); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		for id := range want {
			want[id]++
		}
		pos, _ := e.Tail()
		waitUntil(t, e, fmt.Sprintf("round %d: %d bytes written by the flusher kicked from idle", round, pos),
			func() bool { return e.Written() >= pos })
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	checkStream(t, sink.bytes(), 0, want)
}

// TestWriteEstimateProbes: the write-time estimate is the fastest write of
// the window, and every probeEvery-th write is expected at 3/4 of it, so a
// sink that got faster is seen even when producers only yield to the
// flusher once it is late (see minWindow).
func TestWriteEstimateProbes(t *testing.T) {
	var w minWindow
	if got := w.next(); got != 0 {
		t.Fatalf("estimate before any write: %d", got)
	}
	for range len(w.d) {
		w.add(1000)
	}
	probes := 0
	for i := range 4 * probeEvery {
		switch got := w.next(); got {
		case 750:
			probes++
			if w.n%probeEvery != probeEvery-1 {
				t.Fatalf("write %d probed out of turn", i)
			}
		case 1000:
		default:
			t.Fatalf("write %d expected in %d, want 1000 or a 750 probe", i, got)
		}
		w.add(1000 + int64(i)) // slower writes do not raise the minimum
	}
	if probes != 4 {
		t.Fatalf("%d probes in %d writes, want 4", probes, 4*probeEvery)
	}
	w.add(800) // the sink got faster
	if got := w.est(); got != 800 {
		t.Fatalf("estimate %d after an 800 write, want 800", got)
	}
}

// TestCloseWaitsForLateCommit: Close on a healthy engine with a claim not
// yet committed stops the flusher, which waits for that commit without
// polling: Close keeps waiters raised, so the commit kicks the flusher,
// which then writes and syncs it.
func TestCloseWaitsForLateCommit(t *testing.T) {
	sink := &memSink{t: t}
	e, err := New(Config{Size: MinSize, BlockSize: 1024, FlushInterval: time.Hour}, sink)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, e, 100)
	held, err := e.Claim(200, 1)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	var once sync.Once
	e.onCommitWait = func() { once.Do(func() { close(waiting) }) }
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a claim was not committed", err)
	case <-waiting:
	}
	e.Put(held, 0, make([]byte, 200))
	e.Commit(held)
	guard := time.NewTimer(_guard)
	defer guard.Stop()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-guard.C:
		t.Fatal("Close still waits: the last commit did not kick the flusher")
	}
	if got := len(sink.bytes()); got != 300 {
		t.Fatalf("sink has %d bytes, want 300", got)
	}
	if st := e.Stats(); st.Synced != 300 {
		t.Fatalf("synced %d of 300 bytes", st.Synced)
	}
}

// TestWakeAfter pins the flusher's next-wake step: how long it sleeps for
// each kind of pending work, or -1 (idle until kicked).
func TestWakeAfter(t *testing.T) {
	const ms = time.Millisecond
	now := time.Unix(1e9, 0)
	for _, tc := range []struct {
		name      string
		cfg       Config
		pos, w, s uint64
		demand    bool
		dataSince time.Duration // before now; 0: no unsynced data seen
		lastSync  time.Duration // before now
		want      time.Duration
	}{
		{name: "nothing-to-do", cfg: Config{Sync: SyncNever}, pos: 100, w: 100, s: 100, want: -1},
		{name: "written-unsynced-never", cfg: Config{Sync: SyncNever}, pos: 100, w: 100, s: 0, dataSince: ms, want: -1},
		{name: "pending-unpaced", cfg: Config{Sync: SyncNever}, pos: 100, w: 0, s: 0, want: DefaultFlushInterval},
		// A waiter's bytes are still being copied: their commit kicks
		// the flusher, which does not look sooner.
		{name: "pending-demand", cfg: Config{Sync: SyncNever}, pos: 100, w: 0, s: 0, demand: true, want: DefaultFlushInterval},
		{name: "batch-age-left", cfg: Config{Sync: SyncBatch, BatchAge: 5 * ms}, pos: 100, w: 100, s: 0, dataSince: 3 * ms, want: 2 * ms},
		{name: "batch-age-overdue", cfg: Config{Sync: SyncBatch, BatchAge: 5 * ms}, pos: 100, w: 100, s: 0, dataSince: 9 * ms, want: 0},
		{name: "batch-before-flush", cfg: Config{Sync: SyncBatch, BatchAge: 5 * ms}, pos: 200, w: 100, s: 0, dataSince: 4 * ms, want: ms},
		{name: "interval-left", cfg: Config{Sync: SyncInterval, SyncEvery: 5 * ms}, pos: 100, w: 0, s: 0, dataSince: ms, lastSync: 4 * ms, want: ms},
		{name: "interval-after-flush", cfg: Config{Sync: SyncInterval, SyncEvery: 50 * ms}, pos: 100, w: 0, s: 0, dataSince: ms, want: DefaultFlushInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.FlushInterval = DefaultFlushInterval
			tc.cfg.FlushBytes = 1 << 20
			f := &flusher{e: new(Engine), cfg: &tc.cfg, lastSync: now.Add(-tc.lastSync)}
			if tc.dataSince != 0 {
				f.dataSince = now.Add(-tc.dataSince)
			}
			if got := f.wakeAfter(plan{now: now, demand: tc.demand}, tc.pos, tc.w, tc.s); got != tc.want {
				t.Fatalf("wakeAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSyncDue pins when a pass syncs what it wrote.
func TestSyncDue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      Config
		w, s     uint64
		syncReq  uint64
		stopping bool
		p        plan
		want     bool
	}{
		{name: "nothing-written", cfg: Config{Sync: SyncBatch, BatchBytes: 1}, w: 10, s: 10, syncReq: 20, stopping: true, want: false},
		{name: "never", cfg: Config{Sync: SyncNever}, w: 10, want: false},
		{name: "requested", cfg: Config{Sync: SyncNever}, w: 10, syncReq: 5, want: true},
		{name: "request-covered", cfg: Config{Sync: SyncNever}, w: 10, s: 5, syncReq: 5, want: false},
		{name: "stopping", cfg: Config{Sync: SyncNever}, w: 10, stopping: true, want: true},
		{name: "interval-due", cfg: Config{Sync: SyncInterval}, w: 10, p: plan{dueInterval: true}, want: true},
		{name: "batch-bytes", cfg: Config{Sync: SyncBatch, BatchBytes: 10}, w: 10, want: true},
		{name: "batch-small", cfg: Config{Sync: SyncBatch, BatchBytes: 11}, w: 10, want: false},
		{name: "batch-age", cfg: Config{Sync: SyncBatch, BatchBytes: 11}, w: 10, p: plan{dueBatch: true}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{cfg: tc.cfg}
			e.syncReq.Store(tc.syncReq)
			f := &flusher{e: e, cfg: &e.cfg, stopping: tc.stopping}
			if got := f.syncDue(tc.p, tc.w, tc.s); got != tc.want {
				t.Fatalf("syncDue = %v, want %v", got, tc.want)
			}
		})
	}
}

// heldSyncSink is a PipelinedSink whose syncs wait until release is
// closed, after announcing themselves on started.
type heldSyncSink struct {
	memSink
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *heldSyncSink) PrepareSync() func() error {
	return func() error {
		s.once.Do(func() { close(s.started) })
		<-s.release
		return s.memSink.Sync()
	}
}

// TestInFlightSyncIsNoReasonToWake: while a pipelined sync is in flight,
// the next batch falling due does not make the flusher run pass after pass
// (it cannot start the next sync before this one ends; the end wakes it).
// It used to arm a microsecond timer over and over, spinning on a CPU for
// as long as the sync took, which starved the goroutines of other logs.
func TestInFlightSyncIsNoReasonToWake(t *testing.T) {
	clk := newFake()
	sink := &heldSyncSink{memSink: memSink{t: t}, started: make(chan struct{}), release: make(chan struct{})}
	e, err := New(Config{Size: MinSize, Sync: SyncBatch, BatchBytes: 1 << 20, BatchAge: 10 * time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(sink.release)
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	commitN(t, e, 100)
	due := clk.Now().Add(10 * time.Millisecond)
	advanceUntil(t, e, clk, "the batch due", func() bool { return !clk.Now().Before(due) })
	select {
	case <-sink.started:
	case <-time.After(_guard):
		t.Fatal("no sync started once the batch was due")
	}
	c := commitN(t, e, 100)
	advanceUntil(t, e, clk, "the second record written", func() bool { return e.Stats().Written >= c.Pos+100 })
	clk.Advance(50 * time.Millisecond) // the next batch is overdue, the sync still in flight
	wakes := 0
	for range 50 {
		// Let the flusher settle, then see whether it asks to run again
		// at once.
		time.Sleep(time.Millisecond)
		at, ok := clk.Next()
		if !ok || at.Sub(clk.Now()) > time.Millisecond {
			break
		}
		wakes++
		clk.Advance(at.Sub(clk.Now()))
	}
	if wakes > 2 {
		t.Fatalf("the flusher woke %d times in a row while a sync was in flight", wakes)
	}
}

var errTick = errors.New("tick failed")

// timedSink is a memSink that wants TimedTick at a time it is told
// (due, in fake-clock nanoseconds; 0 for never) and records the calls.
type timedSink struct {
	*memSink
	clk   *clock.Fake
	due   atomic.Int64
	calls atomic.Int64
	fail  atomic.Bool
}

func (s *timedSink) TickIn(now time.Time) time.Duration {
	d := s.due.Load()
	if d == 0 {
		return -1
	}
	return max(time.Duration(d-now.UnixNano()), 0)
}

func (s *timedSink) TimedTick() error {
	s.calls.Add(1)
	s.due.Store(0)
	if s.fail.Load() {
		return errTick
	}
	return nil
}

// TestTimedTick: the flusher of an idle engine arms its timer for the time
// a TimedSink asks for, calls TimedTick then and not before, and fails the
// engine on its error.
func TestTimedTick(t *testing.T) {
	clk := newFake()
	sink := &timedSink{memSink: &memSink{t: t}, clk: clk}
	e, err := New(Config{Size: MinSize, FlushInterval: time.Hour, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	sink.due.Store(clk.Now().Add(5 * time.Millisecond).UnixNano())
	commitN(t, e, 100) // a pass of the flusher reads TickIn
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := sink.calls.Load(); n != 0 {
		t.Fatalf("%d TimedTick calls before the time asked for", n)
	}
	advanceUntil(t, e, clk, "TimedTick at the time asked for", func() bool { return sink.calls.Load() == 1 })
	if got := clk.Now().Sub(time.Unix(1e9, 0)); got < 5*time.Millisecond {
		t.Fatalf("TimedTick after %v of fake time, want 5ms", got)
	}
	sink.fail.Store(true)
	sink.due.Store(clk.Now().UnixNano())
	commitN(t, e, 10)
	advanceUntil(t, e, clk, "the engine fails on a TimedTick error", func() bool { return e.Err() != nil })
	if !errors.Is(e.Err(), errTick) {
		t.Fatalf("after a failed TimedTick: %v", e.Err())
	}
	e.Close()
}

// TestTimedTickAtStart: a TimedSink that wants a call before anything is
// written (a log reopened with work due later) gets it: the flusher asks
// TickIn when it starts, not only at passes.
func TestTimedTickAtStart(t *testing.T) {
	clk := newFake()
	sink := &timedSink{memSink: &memSink{t: t}, clk: clk}
	sink.due.Store(clk.Now().Add(time.Minute).UnixNano())
	e, err := New(Config{Size: MinSize, FlushInterval: time.Hour, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	advanceUntil(t, e, clk, "TimedTick with nothing written", func() bool { return sink.calls.Load() == 1 })
}
