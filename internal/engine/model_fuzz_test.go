package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
)

// FuzzEngineModel decodes its input into a sequence of operations on one
// Engine, run in one goroutine, and checks every result against a model of
// what the package promises: claims (Claim, TryClaim, FastClaim, ClaimBy,
// of any size up to MaxClaim and beyond, across blocks and the ring's
// wrap), Put and Slice into several claims outstanding at once, their
// Commits in any order, Flush, Sync, WaitSynced, AwaitAtLeast(OrWake),
// RequestSync, the flusher's own timers (a clock.Fake advanced by hand,
// or the system clock), sink failures, and Close with and without claims
// outstanding, and every call after it.
//
// The model knows which calls would wait forever (a Claim that no
// draining can make room for, a Flush while a claim it needs is not
// committed) and makes them with a context already cancelled, TryClaim, a
// deadline, or not at all.
//
// The sink checks, as each write happens, that the bytes are the ones
// claimed at their positions, contiguous, each once, none of a claim not
// yet committed, within MaxWrite, and that the sink is called by one
// goroutine at a time, and gets no call once the engine failed; it
// records every sync and fails on request. After each operation the model
// checks the tail, Written, Synced and the released position (monotonic,
// bounded by the commits), the Stats, and that a sink failure is sticky.
// Its settle operation checks the flusher's timing on a clock.Fake:
// committed bytes written within FlushInterval, synced as the sync policy
// says, a TimedTick made (never before TickIn asked), and then idle.
//
// The first input byte picks the configuration: bits 0-1 the ring
// (_modelRings), bits 2-3 the sync mode, bits 4-5 the sink (plain,
// PipelinedSink, TimedSink, both), bit 6 the system clock instead of a
// clock.Fake, bit 7 a StartPos and FirstSeq near the packed word's wraps,
// chosen by the second byte.
func FuzzEngineModel(f *testing.F) {
	for _, s := range engineModelSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 400 {
			in = in[:400]
		}
		runEngineModel(t, in)
	})
}

// Operations of FuzzEngineModel, one input byte each (then their
// arguments).
const (
	eopClaim       = iota // size, k: Claim when it gets room by draining, else TryClaim
	eopTryClaim           // size, k
	eopFastClaim          // size
	eopClaimBy            // size, k, deadline
	eopPut                // claim, length, how: fill part of a claim
	eopCommit             // claim: fill the rest and commit it
	eopCommitAll          // order: commit every outstanding claim
	eopFlush              // ctx
	eopSync               // ctx
	eopWaitSynced         // pos, ctx
	eopAwait              // pos, variant, ctx
	eopRequestSync        // pos
	eopAdvance            // d: move the clock
	eopSettle             // let the flusher's own timers run until it has done all it can
	eopFailWrite          // n: the sink's n-th next write fails
	eopFailSync           // n: the sink's n-th next sync fails
	eopTick               // d, fail: the TimedSink wants TimedTick in d
	eopClose              // order: Close, with the outstanding claims committed while it waits
	eopCount
)

var _engineOpNames = [...]string{"claim", "tryclaim", "fastclaim", "claimby", "put", "commit", "commitall",
	"flush", "sync", "waitsynced", "await", "requestsync", "advance", "settle", "failwrite", "failsync", "tick", "close"}

// _modelRings are the ring geometries the first input byte picks.
var _modelRings = [...]struct{ size, block, maxWrite, flushBytes int }{
	{MinSize, 1 << 10, 3000, 2 << 10}, // MaxWrite spans blocks, not a multiple of one
	{MinSize, MinSize / 4, 100, 500},  // four blocks; MaxWrite below a block
	{MinSize, 64, 1000, 64},           // the smallest blocks
	{2 * MinSize, 4 << 10, 0, 0},      // default MaxWrite and FlushBytes
}

// _modelWait bounds each wait of the model for the flusher, and
// _modelGuard one operation: past it the watchdog panics with the
// operations run so far. Both are below the ten seconds after which a
// fuzzing worker gives up on an input without saying why.
const (
	_modelWait  = 5 * time.Second
	_modelGuard = 8 * time.Second
)

// engineModelSeeds cover every operation: claims of every kind outstanding
// together and committed out of order, the ring full and wrapping, waits
// that would block made with a cancelled context, sink failures of each
// kind, Close with claims outstanding, and calls after Close.
var engineModelSeeds = [][]byte{
	// Plain sink, fake clock: claims across blocks committed in reverse,
	// a Flush that must not wait (cancelled), then one that completes.
	{0x00, 0, eopClaim, 2, 40, 1, eopClaim, 7, 3, 5, eopTryClaim, 0, 9, 2, eopFlush, 2, eopCommit, 1,
		eopCommit, 0, eopFlush, 0, eopSync, 0, eopCommit, 0, eopSync, 0, eopClose, 0},
	// The ring full of claims not committed: TryClaim, FastClaim and
	// ClaimBy refuse, ClaimBy times out on its deadline; then room.
	{0x01, 0, eopClaim, 6, 0, 1, eopClaim, 1, 9, 1, eopTryClaim, 5, 0, 1, eopFastClaim, 6, 0,
		eopClaimBy, 6, 0, 1, 2, eopClaimBy, 2, 90, 1, 2, eopClaimBy, 1, 3, 1, 9, eopCommit, 1, eopClaim, 6, 0, 1, eopCommitAll, 0,
		eopClaim, 6, 0, 1, eopCommitAll, 0, eopSettle, eopClose, 0},
	// Small blocks, claims to the block's end and to the ring's wrap,
	// Put and Slice in pieces, commits in a shuffled order, settle.
	{0x02, 0, eopClaim, 3, 1, 1, eopClaim, 4, 0, 4, eopClaim, 7, 5, 5, eopPut, 1, 100, 2, eopPut, 2, 30, 5,
		eopPut, 1, 20, 1, eopCommitAll, 7, eopSettle, eopClaim, 4, 3, 1, eopClaim, 8, 200, 3, eopCommitAll, 1,
		eopSettle, eopWaitSynced, 4, 0, 0, eopClose, 0},
	// SyncInterval with a PipelinedSink: WaitSynced and AwaitAtLeast
	// below, at and past what can be written, RequestSync, advance.
	{0x14, 0, eopClaim, 2, 50, 1, eopClaim, 2, 60, 1, eopCommit, 1, eopWaitSynced, 2, 0, 0, eopWaitSynced, 5, 3, 2,
		eopAwait, 2, 0, 0, 0, eopAwait, 5, 0, 1, 0, eopAwait, 4, 0, 2, 2, eopRequestSync, 4, 0, eopAdvance, 40,
		eopCommit, 0, eopRequestSync, 4, 0, eopSettle, eopAwait, 4, 0, 0, 0, eopClose, 0},
	// SyncBatch with a TimedSink: a tick due later, settle, a tick that
	// fails the engine; every call after it returns the sticky error.
	{0x28, 0, eopTick, 20, 0, eopClaim, 1, 30, 1, eopCommit, 0, eopSettle, eopTick, 3, 1, eopClaim, 0, 5, 1,
		eopCommit, 0, eopSettle, eopClaim, 0, 5, 1, eopTryClaim, 0, 5, 1, eopFastClaim, 0, 4, eopFlush, 0,
		eopSync, 0, eopWaitSynced, 5, 0, 0, eopAwait, 5, 0, 0, 0, eopClose, 0, eopClaim, 0, 5, 1},
	// A write fails: sticky, Close with a claim outstanding waits for
	// its commit.
	{0x00, 0, eopClaim, 2, 20, 1, eopClaim, 2, 30, 1, eopFailWrite, 0, eopCommit, 0, eopFlush, 2, eopSettle,
		eopFlush, 0, eopClaim, 2, 5, 1, eopClose, 0, eopSync, 0, eopClaimBy, 0, 3, 1, 0},
	// A sync fails on a PipelinedSink: never retried.
	{0x18, 0, eopClaim, 1, 30, 1, eopCommit, 0, eopFailSync, 0, eopSync, 0, eopSync, 0, eopRequestSync, 4, 0,
		eopClaim, 0, 3, 1, eopClose, 0},
	// StartPos just below 2^32 and FirstSeq just below 2^31: near-maximal
	// claims carry the packed tail across both wraps; Close with three
	// claims outstanding, committed out of order while it waits.
	{0x80, 1 | 1<<2, eopClaim, 5, 3, 1, eopCommit, 0, eopClaim, 6, 0, 4, eopFlush, 2, eopCommit, 0,
		eopClaim, 5, 9, 7, eopCommit, 0, eopClaim, 1, 8, 1, eopClaim, 0, 9, 1, eopClaim, 2, 40, 5, eopClose, 5,
		eopTryClaim, 0, 3, 1, eopFlush, 0, eopWaitSynced, 4, 0, 0, eopWaitSynced, 5, 0, 0, eopAwait, 5, 0, 1, 0},
	// The system clock, SyncBatch by bytes, a TimedSink and a
	// PipelinedSink: the flusher's timers run on their own between ops.
	{0x7a, 0, eopClaim, 2, 90, 1, eopCommit, 0, eopAdvance, 3, eopClaim, 8, 100, 9, eopPut, 0, 9, 4, eopCommit, 0,
		eopTick, 1, 0, eopAdvance, 8, eopSettle, eopClaimBy, 6, 0, 1, 6, eopClaimBy, 6, 0, 1, 5, eopCommitAll, 0, eopClaimBy, 6, 0, 1, 6,
		eopFlush, 2, eopCommitAll, 0, eopSync, 0, eopClose, 0},
	// Claims out of range: ErrTooLarge, before and after Close.
	{0x03, 0, eopClaim, 9, 0, 1, eopClaim, 9, 1, 1, eopClaim, 0, 3, 6, eopTryClaim, 9, 2, 1, eopFastClaim, 9, 0,
		eopClaimBy, 9, 1, 1, 1, eopClaim, 6, 0, 4, eopCommit, 0, eopClose, 0, eopClaim, 9, 0, 1, eopClaim, 0, 3, 1},
}

// engModel is the model of one Engine and the claims the test holds.
type engModel struct {
	t     *testing.T
	in    []byte
	trace []string
	cfg   Config
	clk   *clock.Fake // nil: the system clock
	pw    parkWatch   // whether the flusher sits in park's select (Config.onPark)
	e     *Engine
	sink  *modelSink
	timed bool // the sink is a TimedSink
	start uint64
	bs    uint64
	size  uint64

	// mu guards what the sink reads on the flusher's goroutine: want,
	// ends, open, tail, and the sink's own state. The model writes them
	// only under mu; it reads them without (it is their only writer).
	mu     sync.Mutex
	want   []byte          // want[p-start] is the byte claimed at log position p
	ends   map[uint64]bool // the end of every claim
	open   []*engClaim     // claims not yet committed, in claim order
	tail   uint64          // the next position to claim
	seq    uint64          // the next sequence number
	nextID int

	closed  bool    // Close was called and set the closed bit
	failErr error   // the engine's sticky error, once seen
	armed   []error // every error the sink was told to return

	lastS, lastW, lastR uint64 // Synced, Written and released as last seen
	wLo, sLo            uint64 // a Flush or Sync that returned nil promises these
	syncReq             uint64 // the highest position a sync was asked for
	flushReq            uint64 // the highest position a flush was asked for

	blockedLo, blockedHi uint64        // Stats.BlockedWaits lies between
	blocked              time.Duration // Stats.Blocked on a clock.Fake, while blockedExact
	blockedExact         bool

	wd    *time.Timer
	where atomic.Pointer[string]
}

// engClaim is a claim the model holds: [0, lo) and [hi, n) are filled.
type engClaim struct {
	c      Claim
	id     int
	k      int
	lo, hi int
}

func (c *engClaim) end() uint64 { return c.c.Pos + uint64(c.c.Len()) }

// contentByte is the byte claim id holds at log position p: it differs
// from lap to lap of the ring, so a stale byte shows.
func contentByte(p uint64, id int) byte {
	return byte(p) ^ byte(p>>8)*3 ^ byte(id*101+7)
}

func runEngineModel(t *testing.T, in []byte) {
	m := &engModel{t: t, ends: map[uint64]bool{}, blockedExact: true}
	cfgByte := m.byteFrom(&in)
	startByte := m.byteFrom(&in)
	m.in = in
	ring := _modelRings[cfgByte&3]
	m.cfg = Config{Size: ring.size, BlockSize: ring.block, MaxWrite: ring.maxWrite, FlushBytes: ring.flushBytes}
	m.cfg.onPark = m.pw.hook
	sysClock := cfgByte&0x40 != 0
	unit := time.Millisecond // fake durations; the system clock's are shorter
	if sysClock {
		unit = 100 * time.Microsecond
	} else {
		m.clk = newFake()
		m.cfg.Clock = m.clk
	}
	m.cfg.FlushInterval = 10 * unit
	switch cfgByte >> 2 & 3 {
	case 0:
		m.cfg.Sync = SyncNever
	case 1:
		m.cfg.Sync, m.cfg.SyncEvery = SyncInterval, 40*unit
	case 2:
		m.cfg.Sync, m.cfg.BatchBytes, m.cfg.BatchAge = SyncBatch, 4<<10, 3*unit
	case 3:
		m.cfg.Sync, m.cfg.BatchBytes, m.cfg.BatchAge = SyncBatch, 1<<20, 30*unit
	}
	if cfgByte&0x80 != 0 {
		switch startByte & 3 {
		case 0:
			m.cfg.StartPos = 5000 // mid-block for most rings
		case 1:
			m.cfg.StartPos = 1<<32 - uint64(ring.size) - 777
		case 2:
			m.cfg.StartPos = 1<<33 - 100
		case 3:
			m.cfg.StartPos = 3<<32 + 12345
		}
		switch startByte >> 2 & 3 {
		case 1:
			m.cfg.FirstSeq = 1<<31 - 3
		case 2:
			m.cfg.FirstSeq = 1<<40 + 5
		case 3:
			m.cfg.FirstSeq = math.MaxUint32
		}
	}
	m.start, m.tail, m.seq = m.cfg.StartPos, m.cfg.StartPos, m.cfg.FirstSeq
	m.lastS, m.lastW, m.wLo, m.sLo = m.start, m.start, m.start, m.start
	m.sink = &modelSink{m: m, next: m.start, syncedEnd: m.start, pipelined: cfgByte>>4&1 != 0}
	m.sink.end.Store(m.start)
	m.timed = cfgByte>>5&1 != 0
	var sink Sink
	switch cfgByte >> 4 & 3 {
	case 0:
		sink = m.sink
	case 1:
		sink = modelPipeSink{m.sink}
	case 2:
		sink = modelTimedSink{m.sink}
	case 3:
		sink = modelPipeTimedSink{m.sink}
	}
	if err := m.cfg.fill(); err != nil { // New fills it too; the sink reads it
		t.Fatal(err)
	}
	m.bs, m.size = uint64(m.cfg.BlockSize), uint64(m.cfg.Size)
	e, err := New(m.cfg, sink)
	if err != nil {
		t.Fatalf("New(%+v): %v", m.cfg, err)
	}
	m.e = e
	m.sink.e.Store(e)
	m.lastR = e.released.Load()
	where := "start"
	m.where.Store(&where)
	m.wd = time.AfterFunc(_modelGuard, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("FuzzEngineModel: an operation took over %v: %s\n%s", _modelGuard, *m.where.Load(), buf))
	})
	defer m.cleanup()
	m.trace = append(m.trace, fmt.Sprintf("config %#x/%#x: %+v", cfgByte, startByte, m.cfg))
	for ops := 0; len(m.in) > 0 && ops < 150; ops++ {
		m.step()
		m.check()
	}
	m.finish()
	if testing.Verbose() {
		t.Logf("ran:\n\t%s", strings.Join(m.trace, "\n\t"))
	}
}

func (m *engModel) byteFrom(in *[]byte) byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

func (m *engModel) byte() byte { return m.byteFrom(&m.in) }

// fatalf fails the test with the operations run so far.
func (m *engModel) fatalf(format string, args ...any) {
	m.t.Helper()
	tr := m.trace
	if len(tr) > 60 {
		tr = append([]string{tr[0], "..."}, tr[len(tr)-59:]...)
	}
	m.t.Fatalf("%s\nafter:\n\t%s", fmt.Sprintf(format, args...), strings.Join(tr, "\n\t"))
}

// cleanup commits what is outstanding and closes the engine, so that
// goleak finds nothing when a check failed half way.
func (m *engModel) cleanup() {
	m.wd.Stop()
	for _, c := range m.open {
		m.e.Commit(c.c)
	}
	m.open = nil
	if !m.t.Failed() {
		m.e.Close()
		return
	}
	// An engine that failed a check may not close: report the check, not
	// a hang.
	done := make(chan struct{})
	go func() {
		m.e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		m.t.Log("Close of the engine that failed the check did not return")
	}
}

// prefix returns the committed prefix: the position of the first claim
// not yet committed, or the tail.
func (m *engModel) prefix() uint64 {
	if len(m.open) == 0 {
		return m.tail
	}
	return m.open[0].c.Pos // open is in claim order
}

// room returns how far released can go: the block of the first claim not
// committed is not written whole, so not released.
func (m *engModel) room() uint64 { return m.prefix() &^ (m.bs - 1) }

// reach returns a position the flusher is sure to write up to once asked
// (or once its timer fires): the tail when every claim is committed, else
// the start of the block of the first claim that is not (the bytes before
// it in that block wait for the block to be complete).
func (m *engModel) reach() uint64 {
	if len(m.open) == 0 {
		return m.tail
	}
	return max(m.room(), m.start, m.lastW)
}

// fitsEventually reports whether a claim of n bytes gets room once the
// flusher has written all it can.
func (m *engModel) fitsEventually(n int) bool {
	return m.tail+uint64(n) <= m.room()+m.size
}

// live reports whether the engine neither failed nor closed, as far as
// the model knows.
func (m *engModel) live() bool { return m.failErr == nil && !m.closed }

// isArmed reports whether err is one the sink was told to return.
func (m *engModel) isArmed(err error) bool {
	return err != nil && slices.Contains(m.armed, err)
}

// sawFail takes note that a call returned the sink's error err.
func (m *engModel) sawFail(call string, err error) {
	m.t.Helper()
	if got := m.e.Err(); got != err {
		m.fatalf("%s returned the sink's error %q, but Err is %v", call, err, got)
	}
	m.failErr = err
}

// expect checks err from call against the errors it may return: the
// sticky error once the engine failed (whatever else was wanted), a sink
// error while one is armed, else one of wants (nil for success).
func (m *engModel) expect(call string, err error, wants ...error) {
	m.t.Helper()
	if m.failErr != nil {
		if err != m.failErr {
			m.fatalf("%s after the engine failed with %q: %v, want the sticky error", call, m.failErr, err)
		}
		return
	}
	if m.isArmed(err) {
		m.sawFail(call, err)
		return
	}
	for _, w := range wants {
		if errors.Is(err, w) {
			return
		}
	}
	m.fatalf("%s: %v, want one of %v", call, err, wants)
}

func (m *engModel) step() {
	op := m.byte() % eopCount
	where := fmt.Sprintf("%s (tail %d seq %d open %d written %d synced %d)", _engineOpNames[op],
		m.tail-m.start, m.seq, len(m.open), m.lastW-m.start, m.lastS-m.start)
	m.trace = append(m.trace, where)
	m.where.Store(&where)
	m.wd.Reset(_modelGuard)
	switch op {
	case eopClaim, eopTryClaim, eopFastClaim, eopClaimBy:
		m.claimOp(int(op))
	case eopPut:
		if c := m.pick(); c != nil {
			n := 1 + int(m.byte())*c.c.Len()/256
			m.fill(c, n, m.byte())
		}
	case eopCommit:
		if len(m.open) > 0 {
			m.commit(int(m.byte()) % len(m.open))
		}
	case eopCommitAll:
		m.commitAll(m.byte())
	case eopFlush:
		m.flush()
	case eopSync:
		m.syncOp()
	case eopWaitSynced:
		m.waitSynced()
	case eopAwait:
		m.await()
	case eopRequestSync:
		m.requestSync()
	case eopAdvance:
		d := time.Duration(m.byte())
		if m.clk != nil {
			m.advance(d * 200 * time.Microsecond)
		} else {
			time.Sleep(d % 8 * 50 * time.Microsecond)
		}
	case eopSettle:
		m.settle()
	case eopFailWrite, eopFailSync:
		n := 1 + int(m.byte()%3)
		err := fmt.Errorf("model: %s %d", _engineOpNames[op], len(m.armed))
		m.mu.Lock()
		if op == eopFailWrite {
			m.sink.failWriteIn, m.sink.writeErr = n, err
		} else {
			m.sink.failSyncIn, m.sink.syncErr = n, err
		}
		m.mu.Unlock()
		m.armed = append(m.armed, err)
	case eopTick:
		d, fail := time.Duration(m.byte()), m.byte()&1 != 0
		if !m.timed {
			return
		}
		err := fmt.Errorf("model: tick %d", len(m.armed))
		m.mu.Lock()
		if m.clk != nil {
			d *= d * 50 * time.Microsecond
		} else {
			d *= 10 * time.Microsecond
		}
		m.sink.due = m.e.Now().Add(d)
		m.sink.dueSeen = false
		if fail {
			m.sink.failTick, m.sink.tickErr = true, err
		}
		m.mu.Unlock()
		if fail {
			m.armed = append(m.armed, err)
		}
	case eopClose:
		m.close(m.byte())
	}
}

// claimSize decodes a claim size: small, medium, to the block's end, to the
// ring's wrap, near MaxClaim, exactly it, across blocks, large, or (kind
// 9) out of range.
func (m *engModel) claimSize() int {
	kind, arg := m.byte(), int(m.byte())
	maxc, bs := m.e.MaxClaim(), int(m.bs)
	var n int
	switch kind % 12 {
	case 0, 1:
		n = 1 + arg%64
	case 2:
		n = 1 + arg*16
	case 3:
		n = bs - int(m.tail%m.bs) + arg%8 - 4
	case 4:
		n = int(m.size-m.tail%m.size) + arg%8 - 4
	case 5:
		n = maxc - arg%16
	case 6:
		n = maxc
	case 7:
		n = bs*(1+arg%4) + arg%3 - 1
	case 8:
		n = 1 + arg*arg
	case 9:
		switch arg % 4 {
		case 0:
			return maxc + 1
		case 1:
			return 0
		case 2:
			return -1
		}
		return maxc + 1 + arg
	default:
		n = 1 + arg*4
	}
	return min(max(n, 1), maxc)
}

// records decodes a record count for a claim of n bytes: 0, 1, n, some,
// or (rarely) out of range.
func (m *engModel) records(n int) int {
	b := m.byte()
	switch b % 8 {
	case 0:
		return 0
	case 4:
		return max(n, 0)
	case 5:
		return 1 + int(b>>3)%max(n, 1)
	case 6:
		if b>>3&1 == 0 {
			return n + 1
		}
		return -1
	case 7:
		return min(max(n, 0), int(b>>3))
	}
	return 1
}

// pick decodes one of the outstanding claims, or nil.
func (m *engModel) pick() *engClaim {
	b := m.byte()
	if len(m.open) == 0 {
		return nil
	}
	return m.open[int(b)%len(m.open)]
}

// claimOp makes one claim of the kind op with decoded arguments.
func (m *engModel) claimOp(op int) {
	n := m.claimSize()
	k := 1
	if op != eopFastClaim {
		k = m.records(n)
	}
	valid := n >= 1 && n <= m.e.MaxClaim() && k >= 0 && k <= n
	if len(m.open) >= 16 && valid && m.live() {
		return // enough outstanding
	}
	eventually := valid && m.fitsEventually(n)
	blockOK := !m.live() || !valid || eventually
	call := fmt.Sprintf("%s(%d, %d)", _engineOpNames[op], n, k)
	var (
		c          Claim
		ok         bool
		err        error
		sure, may  bool // the claim must succeed; it may
		r0         = m.e.released.Load()
		waitedOnce bool // the call waited for space and timed out
	)
	switch op {
	case eopClaim:
		if blockOK {
			c, err = m.e.Claim(n, k)
			ok, sure, may = err == nil, true, true
			if valid && m.live() && m.tail+uint64(n) > r0+m.size {
				m.blockedHi++ // it may have waited
			}
			break
		}
		call = fmt.Sprintf("tryclaim(%d, %d) for a Claim that would wait forever", n, k)
		c, ok, err = m.e.TryClaim(n, k)
	case eopTryClaim:
		c, ok, err = m.e.TryClaim(n, k)
	case eopFastClaim:
		c, ok = m.e.FastClaim(n)
		if !ok && c != (Claim{}) {
			m.fatalf("%s refused with a claim %+v", call, c)
		}
	case eopClaimBy:
		d := m.byte()
		switch {
		case d%3 == 0 && blockOK:
			c, ok, err = m.e.ClaimBy(n, k, time.Time{})
			sure, may = true, true
			if valid && m.live() && m.tail+uint64(n) > r0+m.size {
				m.blockedHi++
			}
		case d%3 == 2:
			wait := time.Duration(1+d>>2)*100*time.Microsecond + 7 // odd: no flusher timer shares it
			if blockOK {
				c, ok, err = m.e.ClaimBy(n, k, m.e.Now().Add(wait))
				// On the system clock the deadline may pass while the
				// flusher drains.
				sure, may = m.clk != nil, m.clk != nil
				if valid && m.live() && m.tail+uint64(n) > r0+m.size {
					m.blockedHi++
				}
				break
			}
			c, ok, err = m.claimByTimeout(n, k, wait)
			waitedOnce = true
		default:
			c, ok, err = m.e.ClaimBy(n, k, m.e.Now().Add(-time.Duration(d)))
		}
	}
	r1 := m.e.released.Load()
	if !sure {
		sure = m.tail+uint64(n) <= r0+m.size
		may = m.tail+uint64(n) <= r1+m.size
	}
	if op == eopFastClaim {
		switch {
		case ok && (!valid || !m.live()):
			m.fatalf("%s succeeded (valid %v, failed %v, closed %v)", call, valid, m.failErr, m.closed)
		case !ok && sure && valid && m.live() && m.e.Err() == nil:
			m.fatalf("%s refused with room: tail %d, released %d, size %d", call, m.tail-m.start, r0-m.start, m.size)
		case !ok && m.failErr == nil && m.isArmed(m.e.Err()):
			m.sawFail(call, m.e.Err())
		}
	} else {
		if ok && err != nil {
			m.fatalf("%s: ok with %v", call, err)
		}
		if waitedOnce && !ok {
			m.blockedHi++
			if err == nil {
				m.blockedLo++
			} else {
				m.blockedExact = false
			}
		}
		switch {
		case !valid:
			if ok || !errors.Is(err, ErrTooLarge) && (m.live() || err != m.failErr && !errors.Is(err, ErrClosed)) {
				m.fatalf("%s out of range: %v, %v; want ErrTooLarge", call, ok, err)
			}
			return
		case err != nil || !m.live():
			if m.closed && m.failErr == nil {
				m.expect(call, err, ErrClosed)
			} else {
				m.expect(call, err)
			}
			return
		case !ok && sure:
			m.fatalf("%s refused with room: tail %d, released %d, size %d", call, m.tail-m.start, r0-m.start, m.size)
		}
	}
	if !ok {
		return
	}
	if !may {
		m.fatalf("%s claimed %d bytes at %d with released %d: past the ring", call, n, m.tail-m.start, r1-m.start)
	}
	if c.Pos != m.tail || c.Seq != m.seq || c.Len() != n {
		m.fatalf("%s = pos %d seq %d len %d, want pos %d seq %d len %d", call, c.Pos, c.Seq, c.Len(), m.tail, m.seq, n)
	}
	m.mu.Lock()
	id := m.nextID
	m.nextID++
	for p := c.Pos; p < c.Pos+uint64(n); p++ {
		m.want = append(m.want, contentByte(p, id))
	}
	m.ends[c.Pos+uint64(n)] = true
	m.open = append(m.open, &engClaim{c: c, id: id, k: k, hi: n})
	m.tail += uint64(n)
	m.seq += uint64(k)
	m.mu.Unlock()
}

// claimByTimeout makes a ClaimBy that cannot get room wait for its
// deadline: on a clock.Fake a goroutine makes the call while this one
// advances the clock to the deadline once the claim's timer is armed.
func (m *engModel) claimByTimeout(n, k int, wait time.Duration) (Claim, bool, error) {
	deadline := m.e.Now().Add(wait)
	if m.clk == nil {
		start := time.Now()
		before := m.e.Stats().Blocked
		c, ok, err := m.e.ClaimBy(n, k, deadline)
		if got := m.e.Stats().Blocked - before; got > time.Since(start) {
			m.fatalf("ClaimBy counted %v blocked in a call of %v", got, time.Since(start))
		}
		m.blockedExact = false
		return c, ok, err
	}
	type result struct {
		c   Claim
		ok  bool
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, ok, err := m.e.ClaimBy(n, k, deadline)
		res <- result{c, ok, err}
	}()
	for {
		changed := m.clk.Changed()
		if slices.Contains(m.clk.Deadlines(), deadline) {
			break
		}
		select {
		case r := <-res:
			if r.ok || r.err == nil {
				m.fatalf("ClaimBy(%d, %d) with no room returned %v, %v without waiting for its deadline", n, k, r.ok, r.err)
			}
			return r.c, r.ok, r.err // the engine failed
		case <-changed:
		}
	}
	m.awaitParked() // a clock moved during a write would teach the flusher slow writes
	m.clk.Advance(deadline.Sub(m.clk.Now()))
	r := <-res
	if r.err == nil {
		m.blocked += wait
	}
	return r.c, r.ok, r.err
}

// fill puts n more bytes into claim c, from the front or the back, with
// one Put, two, or through Slice.
func (m *engModel) fill(c *engClaim, n int, how byte) {
	n = min(n, c.hi-c.lo)
	if n <= 0 {
		return
	}
	off := c.lo
	if how&1 != 0 {
		off = c.hi - n
		c.hi -= n
	} else {
		c.lo += n
	}
	from := c.c.Pos + uint64(off) - m.start
	src := m.want[from : from+uint64(n)]
	switch {
	case how&2 != 0:
		a, b := m.e.Slice(c.c, off, n)
		if len(a)+len(b) != n || len(b) > 0 && (len(a) == 0 || (c.c.Pos+uint64(off+len(a)))%m.size != 0) {
			m.fatalf("Slice(pos %d, %d, %d) = %d+%d bytes", c.c.Pos, off, n, len(a), len(b))
		}
		copy(a, src)
		copy(b, src[len(a):])
	case how&4 != 0 && n > 1:
		h := n / 2
		m.e.Put(c.c, off, src[:h])
		m.e.Put(c.c, off+h, src[h:])
	default:
		m.e.Put(c.c, off, src)
	}
}

// commit fills the rest of outstanding claim i and commits it.
func (m *engModel) commit(i int) {
	c := m.open[i]
	m.fill(c, c.hi-c.lo, 0)
	m.mu.Lock()
	m.open = slices.Delete(m.open, i, i+1)
	m.mu.Unlock()
	m.e.Commit(c.c)
	m.trace = append(m.trace, fmt.Sprintf("  committed [%d, %d) k %d", c.c.Pos-m.start, c.end()-m.start, c.k))
}

// commitAll commits every outstanding claim in an order order decodes.
func (m *engModel) commitAll(order byte) {
	for len(m.open) > 0 {
		m.commit(int(order) % len(m.open))
		order = order*7 + 3
	}
}

// ctx decodes the context of a call that waits: the background one when
// the model knows the wait ends (completes), else one already cancelled
// or with a short timeout. bg reports whether it is the background one.
func (m *engModel) ctx(completes bool) (ctx context.Context, cancel context.CancelFunc, bg bool) {
	b := m.byte()
	switch {
	case b%4 < 2 && completes:
		return context.Background(), func() {}, true
	case b%4 == 3:
		ctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+b>>2)*20*time.Microsecond)
		return ctx, cancel, false
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	return ctx, cancel, false
}

var errCtx = []error{context.Canceled, context.DeadlineExceeded}

func (m *engModel) flush() {
	ctx, cancel, bg := m.ctx(len(m.open) == 0 && m.live())
	tail := m.tail
	err := m.e.Flush(ctx)
	cancel()
	m.flushReq = max(m.flushReq, tail)
	switch {
	case m.closed && m.failErr == nil:
		m.expect("Flush after Close", err, ErrClosed)
	case bg:
		m.expect("Flush", err, nil)
	case len(m.open) == 0:
		m.expect("Flush (cancelled)", err, append(errCtx, nil)...)
	default:
		m.expect("Flush with claims not committed", err, errCtx...)
	}
	if err == nil {
		if w := m.e.Written(); w < tail {
			m.fatalf("Flush returned with Written %d below the tail %d", w-m.start, tail-m.start)
		}
		m.wLo = max(m.wLo, tail)
	}
}

func (m *engModel) syncOp() {
	ctx, cancel, bg := m.ctx(len(m.open) == 0 && m.live())
	tail := m.tail
	err := m.e.Sync(ctx)
	cancel()
	m.syncReq = max(m.syncReq, tail)
	switch {
	case m.closed && m.failErr == nil:
		m.expect("Sync after Close", err, ErrClosed)
	case bg:
		m.expect("Sync", err, nil)
	case len(m.open) == 0:
		m.expect("Sync (cancelled)", err, append(errCtx, nil)...)
	default:
		m.expect("Sync with claims not committed", err, errCtx...)
	}
	if err == nil {
		m.checkSynced("Sync", tail)
		m.sLo = max(m.sLo, tail)
	}
}

// checkSynced checks that a call that waited for the bytes below pos to be
// durable returned after a sync that covered them.
func (m *engModel) checkSynced(call string, pos uint64) {
	m.t.Helper()
	s := m.e.Synced()
	m.mu.Lock()
	covered := m.sink.syncedEnd
	m.mu.Unlock()
	if s < pos || covered < pos {
		m.fatalf("%s returned for %d with Synced %d, the sink's syncs covering %d", call, pos-m.start, s-m.start, covered-m.start)
	}
}

// pos decodes a position to wait for: below the start, the start, Synced,
// reach, the committed prefix, the tail, past it, a claim's end, or in
// between.
func (m *engModel) pos() uint64 {
	b, arg := m.byte(), uint64(m.byte())
	switch b % 10 {
	case 0:
		return m.start - min(m.start, arg)
	case 1:
		return m.start
	case 2:
		return m.e.Synced()
	case 3:
		return m.reach()
	case 4:
		return m.tail
	case 5:
		return m.tail + 1 + arg
	case 6:
		return m.prefix()
	case 7:
		if len(m.open) > 0 {
			return m.open[int(arg)%len(m.open)].end()
		}
	}
	return m.start + arg*(m.tail-m.start+1)/256
}

func (m *engModel) waitSynced() {
	pos := m.pos()
	s0 := m.e.Synced()
	ctx, cancel, bg := m.ctx(pos <= s0 || m.live() && pos <= m.reach())
	err := m.e.WaitSynced(ctx, pos)
	cancel()
	m.syncReq = max(m.syncReq, pos)
	call := fmt.Sprintf("WaitSynced(%d) with Synced %d, reach %d", pos-m.start, s0-m.start, m.reach()-m.start)
	switch {
	case err == nil:
		m.checkSynced(call, pos)
		return
	case pos <= s0:
		m.fatalf("%s: %v", call, err)
	case m.closed && m.failErr == nil:
		m.expect(call, err, ErrClosed)
	case bg:
		m.expect(call, err)
	default:
		m.expect(call, err, errCtx...)
	}
}

func (m *engModel) await() {
	want := m.pos()
	variant := m.byte() % 3
	v := &m.sink.end
	cur := v.Load()
	completes := want <= cur || m.live() && want <= m.reach()
	call := fmt.Sprintf("AwaitAtLeast(%d) with the sink at %d, reach %d", want-m.start, cur-m.start, m.reach()-m.start)
	var err error
	bg := false
	switch variant {
	case 0, 2:
		var ctx context.Context
		var cancel context.CancelFunc
		ctx, cancel, bg = m.ctx(completes)
		if variant == 0 {
			err = m.e.AwaitAtLeast(ctx, v, want)
		} else {
			call = "OrWake(nil) " + call
			err = m.e.AwaitAtLeastOrWake(ctx, v, want, nil)
		}
		cancel()
	case 1:
		call = "OrWake(closed) " + call
		wake := make(chan struct{})
		close(wake)
		err = m.e.AwaitAtLeastOrWake(context.Background(), v, want, wake)
	}
	switch {
	case err == nil:
		if v.Load() < want {
			m.fatalf("%s returned with the sink at %d", call, v.Load()-m.start)
		}
	case want <= cur:
		m.fatalf("%s: %v", call, err)
	case m.closed && m.failErr == nil:
		m.expect(call, err, ErrClosed)
	case variant == 1:
		m.expect(call, err, ErrWoken)
	case bg:
		m.expect(call, err)
	default:
		m.expect(call, err, errCtx...)
	}
}

// requestSync asks for a sync without waiting. When the bytes below pos
// can be written, the flusher syncs them on its own, without a timer.
func (m *engModel) requestSync() {
	pos := m.pos()
	m.e.RequestSync(pos)
	m.syncReq = max(m.syncReq, pos)
	if m.live() && pos <= m.reach() {
		m.waitProgress(fmt.Sprintf("RequestSync(%d) syncs with no one waiting", pos-m.start), func() bool {
			return m.e.Synced() >= pos || m.e.Err() != nil
		})
		if m.e.Err() == nil {
			m.checkSynced("RequestSync", pos)
		}
	}
}

// waitProgress waits, without moving the clock or waking the flusher,
// until cond holds.
func (m *engModel) waitProgress(what string, cond func() bool) {
	m.t.Helper()
	guard := time.NewTimer(_modelWait)
	defer guard.Stop()
	for {
		ch := m.e.Progress()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(time.Millisecond): // a TimedTick is not progress
		case <-guard.C:
			m.fatalf("not after %v: %s", _modelWait, what)
		}
	}
}

// until lets time pass until cond holds: on a clock.Fake it moves the
// clock to the earliest armed timer, over and over; on the system clock it
// waits.
func (m *engModel) until(what string, cond func() bool) {
	m.t.Helper()
	if m.clk == nil {
		m.waitProgress(what, cond)
		return
	}
	guard := time.NewTimer(_modelWait)
	defer guard.Stop()
	for steps := 0; ; steps++ {
		progress, timers := m.e.Progress(), m.clk.Changed()
		if cond() {
			return
		}
		m.awaitParked()
		if cond() {
			return
		}
		if at, ok := m.clk.Next(); ok {
			m.clk.Advance(m.clockStep(steps, at, at.Add(time.Millisecond)))
			continue
		}
		select {
		case <-progress:
		case <-timers:
		case <-time.After(time.Millisecond):
		case <-guard.C:
			m.fatalf("not after %v of real time (fake time %v): %s", _modelWait, m.clk.Now(), what)
		}
	}
}

// advance moves the clock.Fake forward by d, a timer at a time, giving
// the flusher a moment after each step to run and arm its next timer.
func (m *engModel) advance(d time.Duration) {
	to := m.clk.Now().Add(d)
	for steps := 0; ; steps++ {
		m.awaitParked()
		at, ok := m.clk.Next()
		if !ok || at.After(to) {
			m.clk.Advance(to.Sub(m.clk.Now()))
			return
		}
		m.clk.Advance(m.clockStep(steps, at, to))
	}
}

// clockStep returns how far to move the clock.Fake for the steps-th time
// towards the timer at at, not past limit: to the timer, or, after many
// steps (a flusher that arms a short timer pass after pass), a
// millisecond at a time. A pass made late is still made before limit.
func (m *engModel) clockStep(steps int, at, limit time.Time) time.Duration {
	d := at.Sub(m.clk.Now())
	if steps > 20 {
		d = max(d, min(time.Millisecond, limit.Sub(m.clk.Now())))
	}
	return d
}

// awaitParked waits, as best it can, until the flusher sleeps with
// nothing that would wake it before its timer: in park's select (onPark),
// no kick pending, no pipelined sync in flight, and its due time (see
// Late) that of its timer or never, not that of a pass under way. Moving
// the clock.Fake before it parks would skip past the timer it is about to
// arm. (Judged by the due time alone, a flusher just woken but not yet
// running its pass looked parked: the clock moved under the pass, whose
// timer then fired late or never, and each later step waited out the
// one-second bound below, until the fuzzing worker's 10 s limit on an input
// killed it.)
func (m *engModel) awaitParked() {
	m.t.Helper()
	parked := func() bool {
		select {
		case <-m.e.done:
			return true // the flusher has exited
		default:
		}
		if !m.pw.parked.Load() || len(m.e.kick) != 0 {
			return false
		}
		m.mu.Lock()
		inFlight := m.sink.inFlight
		m.mu.Unlock()
		return !inFlight && m.e.due.Load() > m.e.nanos(m.clk.Now())+int64(_lateSlack)
	}
	// due is a hint, not a promise (a pass under way stores it too), so a
	// flusher that does not look parked within a second is taken as
	// parked: the waits that follow have their own bounds.
	// Parked at two looks in a row.
	settled := func() bool {
		for range 2 {
			if !parked() {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Second)
	for n := 0; !settled(); n++ {
		if time.Now().After(deadline) {
			return
		}
		if n < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// settle lets the flusher's own timers run until it has done all it can:
// committed bytes are written within FlushInterval, synced as the sync
// policy and the requests say, a TimedTick asked for is made, and with
// nothing left to do the flusher goes idle.
func (m *engModel) settle() {
	if !m.live() {
		return
	}
	reach := m.reach()
	from := m.e.Now()
	m.within(fmt.Sprintf("the flusher writes the committed bytes below %d", reach-m.start), from.Add(m.cfg.FlushInterval), func() bool {
		return m.e.Written() >= reach || m.e.Err() != nil
	})
	var syncTo uint64
	if m.syncReq <= reach {
		syncTo = m.syncReq
	}
	period := m.cfg.FlushInterval
	switch m.cfg.Sync {
	case SyncInterval:
		syncTo, period = reach, period+m.cfg.SyncEvery
	case SyncBatch:
		syncTo, period = reach, period+m.cfg.BatchAge
	}
	m.within(fmt.Sprintf("the flusher syncs below %d", syncTo-m.start), from.Add(period), func() bool {
		return m.e.Synced() >= syncTo || m.e.Err() != nil
	})
	m.mu.Lock()
	seen, ticks := m.sink.dueSeen, m.sink.ticks
	m.mu.Unlock()
	if seen {
		// Not bounded in time as the writes are; the sink checks
		// TimedTick does not come before due.
		m.until("a TimedTick asked for", func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.sink.ticks > ticks || m.e.Err() != nil
		})
	}
	m.mu.Lock()
	noTick := m.sink.due.IsZero()
	m.mu.Unlock()
	if m.e.Err() == nil && len(m.open) == 0 && m.syncReq <= m.tail && m.flushReq <= m.tail && noTick {
		m.until("the flusher goes idle with no timer armed", func() bool {
			return m.e.Err() != nil || m.e.Idle() && (m.clk == nil || m.clk.Timers() == 0)
		})
	}
}

// within waits until cond holds, moving a clock.Fake to armed timers but
// never past by: the flusher must have done what cond says by then. It
// waits for the flusher in real time, never moving the clock past a timer
// the flusher may not have armed yet. On the system clock it is until.
func (m *engModel) within(what string, by time.Time, cond func() bool) {
	m.t.Helper()
	if m.clk == nil {
		m.waitProgress(what, cond)
		return
	}
	guard := time.NewTimer(_modelWait)
	defer guard.Stop()
	for steps := 0; ; steps++ {
		progress, timers := m.e.Progress(), m.clk.Changed()
		if cond() {
			return
		}
		// The flusher arms its timers relative to the time its pass
		// began: moving the clock during a pass would arm them late.
		m.awaitParked()
		if cond() {
			return
		}
		if at, ok := m.clk.Next(); ok && !at.After(by) {
			m.clk.Advance(m.clockStep(steps, at, by))
			continue
		}
		select {
		case <-progress:
		case <-timers:
		case <-time.After(time.Millisecond):
		case <-guard.C:
			at, ok := m.clk.Next()
			m.fatalf("not by %v of fake time (%v from now, %v real time later): %s; the earliest timer is at %v (armed %v)",
				by, by.Sub(m.clk.Now()), _modelWait, what, at, ok)
		}
	}
}

// close closes the engine. With claims outstanding, Close runs on another
// goroutine; once it waits for them, claims are refused and the
// outstanding ones are committed in an order order decodes.
func (m *engModel) close(order byte) {
	if len(m.open) == 0 || m.closed {
		m.closed = true
		m.afterClose(m.e.Close())
		return
	}
	waiting := make(chan struct{})
	var once sync.Once
	m.e.onCommitWait = func() { once.Do(func() { close(waiting) }) }
	done := make(chan error, 1)
	go func() { done <- m.e.Close() }()
	select {
	case err := <-done:
		m.fatalf("Close returned %v with %d claims not committed", err, len(m.open))
	case <-waiting:
	}
	m.closed = true
	c, ok, err := m.e.TryClaim(1, 1)
	if ok || c != (Claim{}) {
		m.fatalf("TryClaim while Close waits: %+v", c)
	}
	m.expect("TryClaim while Close waits", err, ErrClosed)
	if _, ok := m.e.FastClaim(1); ok {
		m.fatalf("FastClaim while Close waits succeeded")
	}
	m.commitAll(order)
	m.afterClose(<-done)
}

// afterClose checks Close's error and what the sink holds.
func (m *engModel) afterClose(err error) {
	m.t.Helper()
	m.syncFail()
	m.expect("Close", err, nil)
	if again := m.e.Close(); again != err {
		m.fatalf("second Close: %v, first %v", again, err)
	}
	st := m.e.Stats()
	m.mu.Lock()
	got, writes, syncs, covered := len(m.sink.got), m.sink.writes, m.sink.syncs, m.sink.syncedEnd
	m.mu.Unlock()
	if st.Flushes != uint64(writes) {
		m.fatalf("after Close Stats.Flushes %d, the sink took %d writes", st.Flushes, writes)
	}
	if m.failErr != nil {
		if st.Syncs > uint64(syncs) || uint64(syncs) > st.Syncs+1 {
			m.fatalf("after Close Stats.Syncs %d, the sink made %d syncs", st.Syncs, syncs)
		}
		return
	}
	if st.Syncs != uint64(syncs) {
		m.fatalf("after Close Stats.Syncs %d, the sink made %d syncs", st.Syncs, syncs)
	}
	if w, s := m.e.Written(), m.e.Synced(); w != m.tail || s != m.tail || covered != m.tail {
		m.fatalf("after Close: Written %d, Synced %d, the sink's syncs cover %d; tail %d", w-m.start, s-m.start, covered-m.start, m.tail-m.start)
	}
	if uint64(got) != m.tail-m.start {
		m.fatalf("after Close the sink has %d bytes, %d were claimed", got, m.tail-m.start)
	}
}

// finish commits what is outstanding, closes the engine if the input did
// not, and checks the end state and the calls after Close.
func (m *engModel) finish() {
	where := "finish"
	m.where.Store(&where)
	m.wd.Reset(_modelGuard)
	m.trace = append(m.trace, where)
	if !m.closed {
		m.commitAll(0)
		m.check()
		m.closed = true
		m.afterClose(m.e.Close())
	}
	m.check()
	if _, err := m.e.Claim(1, 1); err == nil {
		m.fatalf("Claim after Close succeeded")
	} else {
		m.expect("Claim after Close", err, ErrClosed)
	}
	m.expect("Flush after Close", m.e.Flush(context.Background()), ErrClosed)
	if err := m.e.WaitSynced(context.Background(), m.e.Synced()); err != nil {
		m.fatalf("WaitSynced(Synced) after Close: %v", err)
	}
	m.expect("WaitSynced past the tail after Close", m.e.WaitSynced(context.Background(), m.tail+1), ErrClosed)
	m.check()
}

// syncFail takes note of a sink failure: once the sink returned an error,
// the engine fails with it (the first it got); it never fails otherwise.
func (m *engModel) syncFail() {
	m.t.Helper()
	failed := m.e.Err() // before the sink's errors: it returns them before the engine fails
	m.mu.Lock()
	fails := slices.Clone(m.sink.failures)
	m.mu.Unlock()
	if len(fails) == 0 {
		if failed != nil {
			m.fatalf("the engine failed with %v, the sink returned no error", failed)
		}
		return
	}
	if m.failErr == nil {
		m.waitProgress("the sink's error fails the engine", func() bool { return m.e.Err() != nil })
		err := m.e.Err()
		if !slices.Contains(fails, err) {
			m.fatalf("the engine failed with %v, the sink returned %v", err, fails)
		}
		m.failErr = err
		m.blockedExact = false
		m.trace = append(m.trace, fmt.Sprintf("  failed: %v", err))
	}
	if err := m.e.Err(); err != m.failErr {
		m.fatalf("the sticky error changed from %v to %v", m.failErr, err)
	}
}

// check checks the engine's positions and counters against the model.
func (m *engModel) check() {
	m.t.Helper()
	m.syncFail()
	m.mu.Lock()
	v := slices.Clone(m.sink.violations)
	m.mu.Unlock()
	if len(v) > 0 {
		m.fatalf("the sink saw: %s", strings.Join(v, "; "))
	}
	if pos, seq := m.e.Tail(); pos != m.tail || seq != m.seq {
		m.fatalf("Tail() = %d, %d; model %d, %d", pos-m.start, seq, m.tail-m.start, m.seq)
	}
	// Read in this order: each later value may only be larger.
	s := m.e.Synced()
	r := m.e.released.Load()
	w := m.e.Written()
	st := m.e.Stats()
	m.mu.Lock()
	sinkEnd, covered, writes, syncs := m.sink.next, m.sink.syncedEnd, m.sink.writes, m.sink.syncs
	m.mu.Unlock()
	switch {
	case s < m.lastS || w < m.lastW || r < m.lastR:
		m.fatalf("went backwards: Synced %d->%d, Written %d->%d, released %d->%d",
			m.lastS-m.start, s-m.start, m.lastW-m.start, w-m.start, m.lastR-m.start, r-m.start)
	case w > m.prefix():
		m.fatalf("Written %d past the first claim not committed (%d; tail %d)", w-m.start, m.prefix()-m.start, m.tail-m.start)
	case s > w:
		m.fatalf("Synced %d past Written %d", s-m.start, w-m.start)
	case w > sinkEnd:
		m.fatalf("Written %d, the sink has bytes below %d", w-m.start, sinkEnd-m.start)
	case s > covered:
		m.fatalf("Synced %d, the sink's syncs cover %d", s-m.start, covered-m.start)
	case r > w || r > max(m.room(), m.start&^(m.bs-1)):
		m.fatalf("released %d with Written %d, the first claim not committed at %d", r-m.start, w-m.start, m.prefix()-m.start)
	case w < m.wLo || s < m.sLo:
		m.fatalf("Written %d, Synced %d below what Flush and Sync promised (%d, %d)", w-m.start, s-m.start, m.wLo-m.start, m.sLo-m.start)
	case st.Claimed != m.tail:
		m.fatalf("Stats.Claimed %d, tail %d", st.Claimed-m.start, m.tail-m.start)
	case st.Written < w || st.Written > m.tail || st.Synced < s || st.Synced > st.Written:
		m.fatalf("Stats %+v with Written %d, Synced %d, tail %d", st, w, s, m.tail)
	case st.Flushes > uint64(writes) || st.Syncs > uint64(syncs):
		m.fatalf("Stats.Flushes %d, Syncs %d; the sink took %d writes, %d syncs", st.Flushes, st.Syncs, writes, syncs)
	case st.BlockedWaits < m.blockedLo || st.BlockedWaits > m.blockedHi:
		m.fatalf("Stats.BlockedWaits %d, want %d to %d", st.BlockedWaits, m.blockedLo, m.blockedHi)
	case m.clk != nil && m.blockedExact && st.Blocked != m.blocked:
		m.fatalf("Stats.Blocked %v, want %v", st.Blocked, m.blocked)
	}
	m.lastS, m.lastW, m.lastR = s, w, r
}

// modelSink is the model's Sink: it checks each call against the model as
// it happens, records what was written and synced, and fails on request.
// Its state is guarded by the model's mu.
type modelSink struct {
	m         *engModel
	e         atomic.Pointer[Engine]
	pipelined bool
	busy      atomic.Bool   // a call on the flusher's goroutine is under way
	syncBusy  atomic.Bool   // a pipelined sync is under way
	end       atomic.Uint64 // the end of the last write: AwaitAtLeast's counter

	got        []byte // every byte written, from start
	next       uint64 // the position of the next write
	writes     int    // successful writes
	syncs      int    // successful syncs
	syncedEnd  uint64 // the bytes below it are durable
	inFlight   bool   // a PrepareSync's function has not returned
	failures   []error
	violations []string

	failWriteIn, failSyncIn int // the n-th next write or sync fails
	writeErr, syncErr       error
	writeFailed, syncFailed bool

	// TimedSink state.
	due        time.Time // when TimedTick is wanted; zero for never
	dueSeen    bool      // TickIn reported due
	lastTickIn time.Duration
	// tickDue is the due time TickIn last found passed (reported 0):
	// the one a TimedTick that follows serves, even if the model set a
	// new due time (eopTick) between the two calls of the flusher's pass.
	tickDue  time.Time
	ticks    int
	failTick bool
	tickErr  error
}

// modelPipeSink, modelTimedSink and modelPipeTimedSink add the optional
// interfaces to a modelSink.
type (
	modelPipeSink      struct{ *modelSink }
	modelTimedSink     struct{ *modelSink }
	modelPipeTimedSink struct{ *modelSink }
)

var (
	_ PipelinedSink = modelPipeSink{}
	_ TimedSink     = modelTimedSink{}
	_ PipelinedSink = modelPipeTimedSink{}
	_ TimedSink     = modelPipeTimedSink{}
)

func (s modelPipeSink) PrepareSync() func() error               { return s.prepareSync() }
func (s modelTimedSink) TickIn(now time.Time) time.Duration     { return s.tickIn(now) }
func (s modelTimedSink) TimedTick() error                       { return s.timedTick() }
func (s modelPipeTimedSink) PrepareSync() func() error          { return s.prepareSync() }
func (s modelPipeTimedSink) TickIn(now time.Time) time.Duration { return s.tickIn(now) }
func (s modelPipeTimedSink) TimedTick() error                   { return s.timedTick() }

// violate records a broken promise. REQUIRES: m.mu held.
func (s *modelSink) violate(format string, args ...any) {
	if len(s.violations) < 10 {
		s.violations = append(s.violations, fmt.Sprintf(format, args...))
	}
}

// enter marks a call on the flusher's goroutine under way; the returned
// function ends it.
func (s *modelSink) enter(call string) func() {
	if !s.busy.CompareAndSwap(false, true) {
		s.m.mu.Lock()
		s.violate("%s called while another call was under way", call)
		s.m.mu.Unlock()
		return func() {}
	}
	return func() { s.busy.Store(false) }
}

// failed reports whether the engine has failed.
func (s *modelSink) failed() bool {
	e := s.e.Load()
	return e != nil && e.Err() != nil
}

func (s *modelSink) Write(pos uint64, a, b []byte) error {
	defer s.enter("Write")()
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.writeFailed || s.failed() {
		s.violate("Write(%d) after a failure", pos-m.start)
	}
	n := uint64(len(a) + len(b))
	end := pos + n
	switch {
	case pos != s.next:
		s.violate("Write at %d, want %d", pos-m.start, s.next-m.start)
		return nil
	case n == 0 || n > uint64(m.cfg.MaxWrite):
		s.violate("Write of %d bytes, MaxWrite %d", n, m.cfg.MaxWrite)
	case len(b) > 0 && (len(a) == 0 || (pos+uint64(len(a)))%m.size != 0):
		s.violate("Write(%d) split %d+%d off the ring's end", pos-m.start, len(a), len(b))
	case end > m.tail:
		s.violate("Write [%d, %d) past the tail %d", pos-m.start, end-m.start, m.tail-m.start)
		return nil
	case end%m.bs != 0 && !m.ends[end] && m.cfg.MaxWrite >= m.cfg.BlockSize: // a MaxWrite below a block cuts anywhere
		s.violate("Write [%d, %d) ends inside a claim, off a block boundary", pos-m.start, end-m.start)
	}
	for _, c := range m.open {
		if c.c.Pos < end && pos < c.end() {
			s.violate("Write [%d, %d) of claim [%d, %d) not committed", pos-m.start, end-m.start, c.c.Pos-m.start, c.end()-m.start)
		}
	}
	want := m.want[pos-m.start : end-m.start]
	if string(a) != string(want[:len(a)]) || string(b) != string(want[len(a):]) {
		i := 0
		for i < len(a) && a[i] == want[i] {
			i++
		}
		if i == len(a) {
			for i < int(n) && b[i-len(a)] == want[i] {
				i++
			}
		}
		s.violate("Write [%d, %d): byte at %d is not the one claimed", pos-m.start, end-m.start, pos+uint64(i)-m.start)
	}
	if s.failWriteIn > 0 {
		if s.failWriteIn--; s.failWriteIn == 0 {
			s.writeFailed = true
			s.failures = append(s.failures, s.writeErr)
			return s.writeErr
		}
	}
	s.got = append(s.got, a...)
	s.got = append(s.got, b...)
	s.next = end
	s.writes++
	s.end.Store(end)
	return nil
}

func (s *modelSink) Sync() error {
	defer s.enter("Sync")()
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.pipelined {
		s.violate("Sync of a PipelinedSink called directly")
	}
	if s.syncFailed || s.writeFailed || s.failed() {
		s.violate("Sync after a failure")
	}
	if s.failSyncIn > 0 {
		if s.failSyncIn--; s.failSyncIn == 0 {
			s.syncFailed = true
			s.failures = append(s.failures, s.syncErr)
			return s.syncErr
		}
	}
	s.syncedEnd = s.next
	s.syncs++
	return nil
}

func (s *modelSink) prepareSync() func() error {
	defer s.enter("PrepareSync")()
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.syncFailed || s.writeFailed || s.failed() {
		s.violate("PrepareSync after a failure")
	}
	if s.inFlight {
		s.violate("PrepareSync with a sync in flight")
	}
	s.inFlight = true
	covers := s.next
	fail := false
	if s.failSyncIn > 0 {
		s.failSyncIn--
		fail = s.failSyncIn == 0
	}
	err := s.syncErr
	return func() error {
		if !s.syncBusy.CompareAndSwap(false, true) {
			m.mu.Lock()
			s.violate("two pipelined syncs at once")
			m.mu.Unlock()
		} else {
			defer s.syncBusy.Store(false)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		s.inFlight = false
		if fail {
			s.syncFailed = true
			s.failures = append(s.failures, err)
			return err
		}
		s.syncedEnd = max(s.syncedEnd, covers)
		s.syncs++
		return nil
	}
}

func (s *modelSink) tickIn(now time.Time) time.Duration {
	defer s.enter("TickIn")()
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.due.IsZero() {
		s.lastTickIn = -1
		return -1
	}
	s.dueSeen = true
	s.lastTickIn = max(s.due.Sub(now), 0)
	if s.lastTickIn == 0 {
		s.tickDue = s.due
	}
	return s.lastTickIn
}

func (s *modelSink) timedTick() error {
	defer s.enter("TimedTick")()
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.writeFailed || s.failed() {
		s.violate("TimedTick after a failure")
	}
	if s.due.IsZero() || s.lastTickIn != 0 {
		s.violate("TimedTick with TickIn at %v", s.lastTickIn)
	}
	if m.clk != nil && m.clk.Now().Before(s.tickDue) {
		s.violate("TimedTick at %v, due at %v", m.clk.Now(), s.tickDue)
	}
	s.ticks++
	s.due, s.dueSeen, s.lastTickIn = time.Time{}, false, -1
	if s.failTick {
		s.failTick = false
		s.failures = append(s.failures, s.tickErr)
		return s.tickErr
	}
	return nil
}
