package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/appendlog/appendlog/frame"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// FuzzPowerCutModel decodes its input into a sequence of operations on a
// Log on a crashable vfs.MemFS, run in one goroutine: appends and batches
// of every size from empty to MaxRecordSize (several engine blocks, many
// disk sectors) in segments of the smallest size, so that they rotate
// often; Flush, Sync, WaitDurable, TruncateFront; Cursors opened, polled,
// acked, committed, sought, closed and deleted; advances of the fake
// clock, which let the flusher write, sync and write durable marks on its
// own; a clean Close and reopen; and power cuts (MemFS.Crash, with only
// synced bytes kept or with a random subset of the unsynced writes, torn
// at sector boundaries) while the flusher and the sealer may be half way
// through a write, a sync or a rotation.
//
// After every reopen it checks what the crashed directory holds against
// a model of what was appended and what was acknowledged, through
// Verify, OpenReader, Open and the reopened Log's Readers and Cursors:
//
//   - every record acknowledged durable before the cut (WaitDurable,
//     Sync, Commit or Close returned nil, or DurableSeq covered it) is
//     there with its bytes;
//   - the records form one run [FirstSeq, NextSeq), each exactly the one
//     appended with its sequence number since the last reopen (a record
//     is tagged with the reopen it was appended after, so a record of an
//     earlier life of the log, cut by a recovery, is foreign), none past
//     the last one appended;
//   - FirstSeq is the model's: a TruncateFront that returned is never
//     undone, and nothing at or above its cut is lost;
//   - Verify and OpenReader see what Open recovered (the same bounds and
//     torn tail, the same records), Open makes everything it kept
//     durable, and appends go on after it;
//   - each cursor's file holds exactly its last checkpoint written before
//     the cut (every checkpoint is durable when its call returns, and a
//     power cut never tears one), never past the log's end, and a deleted
//     cursor stays deleted.
//
// The first byte picks the configuration: bit 0 sets
// Retention.IgnoreCursors, bit 1 writes the durable mark with every sync
// (not only every _markEvery), bit 2 doubles BufferSize, bit 3 sets a
// small BatchBytes so that SyncBatch syncs on its own; bits 4 to 6 pick
// the first Open's options as a reopen's byte does (see pcOpts).
func FuzzPowerCutModel(f *testing.F) {
	for _, seed := range powerCutSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 400 {
			in = in[:400]
		}
		runPowerCutModel(t, in)
	})
}

// Operations of FuzzPowerCutModel, one input byte each (then their
// arguments).
const (
	pcAppend = iota
	pcBatch
	pcFlush
	pcSync
	pcWaitDurable
	pcTruncate
	pcCursor
	pcPoll
	pcAck
	pcCommit
	pcSeek
	pcCursorClose
	pcDeleteCursor
	pcRead
	pcAdvance
	pcReopen
	pcCrash
	pcCutRotation
	pcCount
)

var _pcOpNames = [...]string{"append", "batch", "flush", "sync", "waitdurable", "truncate", "cursor", "poll",
	"ack", "commit", "seek", "cursorclose", "deletecursor", "read", "advance", "reopen", "crash", "cutrotation"}

// Bits of the byte that picks a reopen's options (see pcOpts) and of a
// crash's kind byte.
const (
	pcSyncModes    = 3 // the byte modulo 4 picks the mode; 3 is SyncBatch too
	pcVerifyOnOpen = 4
	pcCrashNil     = 1 // Crash(nil): only synced bytes survive
	pcCrashTwice   = 2 // crash the crashed FS again before the reopen
)

// Steps of a rotation (and around it) a pcCutRotation cuts the power
// before, as pcCutMatch matches them.
const (
	pcCutTruncate   = iota // the flusher truncates the sealed segment after its footer
	pcCutSpareWrite        // the flusher writes the new segment's header (or records) into the spare file
	pcCutSync              // any fdatasync: the sealer's of the sealed segment, or a sync of records
	pcCutSpareSync         // the sealer syncs the new segment's header
	pcCutRename            // the sealer renames the spare file to the new segment's name
	pcCutSyncDir           // the sealer fsyncs the directory after the rename
	pcCutPrealloc          // the next spare file is preallocated
	pcCutIndex             // the sealer writes the sealed segment's index file
	pcCutSteps
)

// pcCutMatch reports whether the file-system operation op on name is the
// step target.
func pcCutMatch(target int, op vfs.Op, name string) bool {
	base := filepath.Base(name)
	switch target {
	case pcCutTruncate:
		return op == vfs.OpTruncate
	case pcCutSpareWrite:
		return op == vfs.OpWrite && base == spareName
	case pcCutSync:
		return op == vfs.OpSync
	case pcCutSpareSync:
		return op == vfs.OpSync && base == spareName
	case pcCutRename:
		return op == vfs.OpRename && base == spareName
	case pcCutSyncDir:
		return op == vfs.OpSyncDir
	case pcCutPrealloc:
		return op == vfs.OpPreallocate
	case pcCutIndex:
		return op == vfs.OpOpen && strings.HasSuffix(base, idxSuffix)
	}
	return false
}

// powerCutSeeds are hand-written operation sequences, each cut at least
// once: big records cut in the middle of a rotation (with the sealer and
// the next sync in flight), a cut with nothing synced, cursors committed
// and sought across cuts, TruncateFront across rotations and cuts, every
// sync mode with the fake clock advanced, a clean Close then a cut, and
// cuts of a crashed log's own recovery.
var powerCutSeeds = [][]byte{
	// Fill the first segment with records near MaxRecordSize, sync, then
	// append across the rotation and cut while it is under way; reopen
	// with VerifyOnOpen and read.
	{0, pcAppend, 4, 0, pcAppend, 3, 5, pcAppend, 4, 0, pcSync, pcAppend, 4, 0, pcAppend, 3, 9, pcAppend, 6, 2, pcFlush,
		pcAppend, 2, 77, pcCrash, 4, 0, 1, 2, pcAppend, 0, 9, pcRead, 2, 0, 9, pcSync, pcCrash, 0, 1, 7, 7},
	// The same cut with only synced bytes kept, in SyncBatch with small
	// batches that sync on their own, and the durable mark at every sync.
	{10, pcBatch, 3, 4, 0, 4, 0, 0, 40, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 6, 1,
		pcCrash, 3, 1, 0, 0, pcBatch, 1, 5, 3, 0, 9, pcWaitDurable, 4, 0, pcCrash, 2, 0, 3, 4},
	// Nothing synced: small, empty and sector-sized records, then a cut
	// with random survivors (a torn tail in the first segment).
	{0x10, pcAppend, 0, 0, pcAppend, 0, 200, pcAppend, 5, 1, pcAppend, 5, 3, pcAppend, 6, 0, pcFlush, pcAppend, 2, 33,
		pcAppend, 0, 1, pcFlush, pcCrash, 1, 0, 9, 9, pcAppend, 0, 5, pcFlush, pcCrash, 2, 0, 1, 1},
	// A cursor: acks, commit, more appends, a cut; the reopened log's
	// cursor resumes at its checkpoint; seek back and forward, delete
	// another cursor, cut again.
	{0, pcCursor, 0, 0, pcCursor, 1, 1, pcBatch, 4, 0, 30, 0, 40, 2, 3, 0, 0, pcSync, pcAck, 0, 2, 0, pcAck, 0, 3, 1,
		pcAck, 0, 3, 0, pcPoll, 0, 5, pcCommit, 0, pcAck, 1, 3, 2, pcAppend, 4, 0, pcAppend, 4, 0, pcFlush,
		pcCrash, 3, 0, 5, 6, pcCursor, 0, 0, pcPoll, 0, 3, pcSeek, 0, 2, 0, pcCursor, 1, 0, pcCursorClose, 1,
		pcDeleteCursor, 1, pcSeek, 0, 5, 0, pcAppend, 2, 100, pcCrash, 0, 0, 2, 3, pcCursor, 1, 0, pcCursor, 0, 1},
	// TruncateFront across several segments with a cursor holding it
	// back, then without, a cut right after it, truncation again after
	// the reopen.
	{0, pcCursor, 2, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0,
		pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcSync, pcTruncate, 4, 0, pcCursorClose, 2, pcDeleteCursor, 2,
		pcTruncate, 4, 2, pcAppend, 3, 1, pcCrash, 1, 0, 4, 4, pcTruncate, 5, 0, pcAppend, 4, 0, pcAppend, 4, 0,
		pcAppend, 4, 0, pcAppend, 4, 0, pcTruncate, 4, 0, pcCrash, 0, 0, 0, 1},
	// IgnoreCursors: a cursor left below FirstSeq by TruncateFront, its
	// Poll's *TruncatedError and Seek out of it, across a cut.
	{1, pcCursor, 0, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcSync,
		pcTruncate, 5, 0, pcPoll, 0, 3, pcSeek, 0, 2, 0, pcPoll, 0, 2, pcCommit, 0, pcCrash, 0, 1, 0, 0, pcCursor, 0, 0, pcPoll, 0, 4},
	// SyncInterval and the fake clock: appends become durable on their
	// own as time passes (DurableSeq), then a cut.
	{0x10 | 2, pcAppend, 2, 50, pcAdvance, 50, pcAppend, 4, 0, pcAppend, 4, 0, pcAdvance, 120, pcAppend, 4, 0,
		pcAppend, 4, 0, pcAppend, 4, 0, pcAdvance, 200, pcAdvance, 15, pcCrash, 5, 0, 8, 1, pcAdvance, 99, pcAppend, 0, 1,
		pcAdvance, 250, pcCrash, 2, 0, 2, 2},
	// A clean Close and reopen with a cut of the closed log, TruncateFront
	// after a reopen, WaitDurable in the past and in the future, a batch
	// too large for half the buffer, an oversized record.
	{4, pcBatch, 2, 4, 0, 4, 0, pcBatch, 4, 4, 0, 4, 0, 4, 0, 4, 0, pcWaitDurable, 5, 0, pcAppend, 7, 0,
		pcAppend, 3, 0, pcWaitDurable, 4, 0, pcWaitDurable, 6, 1, pcReopen, 2, 2, 0, 3, pcAppend, 4, 0, pcAppend, 4, 0,
		pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcReopen, 7, 0, 0, 0, pcTruncate, 4, 1, pcAppend, 1, 3,
		pcCrash, 1, 0, 3, 3},
	// A cut of a log whose recovery was itself cut: crash twice in a
	// row, with appends synced in between, in SyncNever.
	{0x20 | 8, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcFlush,
		pcCrash, 1, 2, 4, 4, pcAppend, 6, 1, pcSync, pcAppend, 6, 2, pcAppend, 4, 0, pcCrash, 5, 2, 6, 6,
		pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcAppend, 4, 0, pcFlush, pcCrash, 1, 0, 7, 7},
	// A cut before each step of a rotation, the flusher's and then the
	// sealer's: the truncate after the footer, the new segment's header,
	// the sync of the sealed segment, of the new header, the rename, the
	// directory fsync, the next spare's preallocation, the index file.
	{0, pcAppend, 4, 0, pcAppend, 4, 0, pcSync, pcCutRotation, pcCutTruncate, 0, 0, 1, 2, pcAppend, 0, 9,
		pcCutRotation, pcCutSpareWrite, 1, 1, pcCutRotation, pcCutSync, 2, 0, 3, 4, pcCutRotation, pcCutSpareSync, 4, 1},
	{2, pcCursor, 0, 0, pcAppend, 4, 0, pcAck, 0, 2, 0, pcCommit, 0, pcCutRotation, pcCutRename, 0, 0, 5, 6,
		pcCutRotation, pcCutSyncDir, 1, 1, pcCursor, 0, 0, pcAck, 0, 3, 2, pcCommit, 0, pcCutRotation, pcCutPrealloc, 2, 0, 7, 8,
		pcTruncate, 4, 0, pcCutRotation, pcCutIndex, 5, 1, pcCutRotation, pcCutRename, 6, 2, 1, 1, 1, 2, 2},
}

// pcRec is a record the model holds: its size, and the life of the log
// (the number of Opens before its Append) it was appended in.
type pcRec struct {
	n    int
	life int
}

// pcCursorModel is a cursor's model.
type pcCursorModel struct {
	c      *Cursor // nil when not open
	exists bool    // its file exists
	ckpt   uint64  // its file's position: the last checkpoint written
	floor  uint64  // committed position in memory, while open
	acked  map[uint64]bool
	window uint64
	next   uint64 // what Poll delivers next
	stuck  bool   // Poll returned a *TruncatedError
}

// pcModel is the model of the log and the handles the test holds on it.
type pcModel struct {
	t     *testing.T
	in    []byte
	mem   *vfs.MemFS
	clk   *clock.Fake
	opts  Options
	l     *Log
	recs  []pcRec // recs[seq] for seq < next(); recs[0] unused
	first uint64
	// durable bounds the records acknowledged durable: every record below
	// it must survive a power cut.
	durable uint64
	life    int
	curs    map[string]*pcCursorModel
	trace   []string
	// cut is the step a pcCutRotation armed (pcCutMatch's target plus
	// one, 0 when none), cutMem the file system it kills, and cutFired
	// is closed once it did. The log's goroutines reach them through
	// inject.
	cut      atomic.Int32
	cutMem   atomic.Pointer[vfs.MemFS]
	cutFired chan struct{}
	// cuts, rotating, torn and removed count power cuts, those while a
	// rotation's new segment had no durable name yet, torn tails cut
	// and unfinished segments removed, for the verbose log.
	cuts, rotating, torn, removed int
}

const (
	_pcDir    = "/pc/log"
	_pcMaxRec = 16 << 10
)

var _pcCursorNames = []string{"a", "b", "c"}

func (m *pcModel) next() uint64 { return uint64(len(m.recs)) }

func (m *pcModel) byte() byte { return nextByte(&m.in) }

// fatalf fails the test with the operations run so far.
func (m *pcModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\nafter: %v", fmt.Sprintf(format, args...), m.trace)
}

// pcPayload returns the payload of n bytes of record seq appended in the
// given life of the log: pseudo-random bytes, beginning (when there is
// room) with seq, life and n, so that a record in the wrong place names
// where it came from.
func pcPayload(seq uint64, life, n int) []byte {
	p := make([]byte, n)
	x := seq*0x9e3779b97f4a7c15 ^ uint64(life)<<40 ^ uint64(n)<<20 | 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	if n >= 16 {
		binary.LittleEndian.PutUint64(p, seq)
		binary.LittleEndian.PutUint32(p[8:], uint32(life))
		binary.LittleEndian.PutUint32(p[12:], uint32(n))
	}
	return p
}

// describe says what a payload that is not the expected one looks like.
func describe(p []byte) string {
	if len(p) < 16 {
		return fmt.Sprintf("%d bytes %x", len(p), p)
	}
	return fmt.Sprintf("%d bytes, tagged seq %d life %d size %d", len(p),
		binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint32(p[8:]), binary.LittleEndian.Uint32(p[12:]))
}

// size decodes a payload size: empty or small, a multiple of 64, near or
// exactly MaxRecordSize, around a disk sector or an engine block
// boundary, or (rarely) one byte or more too large.
func (m *pcModel) size() int {
	kind, arg := m.byte(), int(m.byte())
	switch kind % 8 {
	case 0, 1:
		return arg
	case 2:
		return arg * 64
	case 3:
		return _pcMaxRec - arg
	case 4:
		return _pcMaxRec
	case 5:
		return (arg%33)*512 - 16 + arg%3 - 1 // a frame ending at, just before or just after a sector boundary
	case 6:
		return (1+arg%4)*4096 - 16 + arg%3 - 1 // a frame ending near an engine block's end
	}
	if arg&15 == 0 {
		return _pcMaxRec + 1 + arg
	}
	return arg * 16
}

// seq decodes a sequence number relative to the log (seqIn).
func (m *pcModel) seq() uint64 { return seqIn(&m.in, m.first, m.next()) }

// pcOpts sets the options a reopen's byte picks: the sync mode (bits 0
// and 1) and VerifyOnOpen (bit 2).
func (m *pcModel) pcOpts(how byte) {
	m.opts.Sync = [...]SyncMode{SyncNever, SyncInterval, SyncBatch, SyncBatch}[how&pcSyncModes]
	m.opts.VerifyOnOpen = how&pcVerifyOnOpen != 0
}

func runPowerCutModel(t *testing.T, in []byte) {
	m := &pcModel{t: t, mem: vfs.NewMem(), clk: clock.NewFake(time.Unix(1000, 0)), recs: []pcRec{{}}, first: 1, durable: 1,
		curs: map[string]*pcCursorModel{}}
	var cfg byte
	if len(in) > 0 {
		cfg, in = in[0], in[1:]
	}
	m.in = in
	m.opts = Options{
		SegmentSize:     64 << 10,
		BufferSize:      64 << 10,
		MaxRecordSize:   _pcMaxRec,
		CheckpointEvery: time.Hour, // checkpoints only when a call asks
		Retention:       Retention{IgnoreCursors: cfg&1 != 0},
		clock:           m.clk,
	}
	if cfg&2 != 0 {
		m.opts.markEvery = -1 // always due: every sync writes the mark
	}
	if cfg&4 != 0 {
		m.opts.BufferSize = 128 << 10
	}
	if cfg&8 != 0 {
		m.opts.BatchBytes = 8 << 10
	}
	m.pcOpts(cfg >> 4)
	for _, n := range _pcCursorNames {
		m.curs[n] = &pcCursorModel{}
	}
	defer m.closeAll()
	m.opts.fsys = vfs.WithFaults(m.mem, m.inject)
	l, err := Open(_pcDir, &m.opts)
	if err != nil {
		m.fatalf("open: %v", err)
	}
	m.l, m.life = l, 1
	for ops := 0; len(m.in) > 0 && ops < 100; ops++ {
		m.step()
		m.checkBounds()
	}
	// Whatever the input did last, appends go on, a clean Close keeps
	// everything, and so does a power cut after it.
	m.append(1)
	m.closeClean()
	m.mem = m.mem.Crash(nil)
	m.reopen(2) // SyncBatch
	if testing.Verbose() {
		t.Logf("%d cuts (%d during a rotation, %d torn tails cut, %d unfinished segments removed), %d records; ran %v",
			m.cuts, m.rotating, m.torn, m.removed, m.next()-m.first, m.trace)
	}
}

// closeAll releases everything, so that goleak finds nothing when a check
// failed half way.
func (m *pcModel) closeAll() {
	if m.l != nil {
		m.l.Close()
	}
	for _, c := range m.curs {
		if c.c != nil {
			c.c.Close()
		}
	}
}

// checkBounds checks the open log's bounds against the model.
func (m *pcModel) checkBounds() {
	m.t.Helper()
	if got := m.l.NextSeq(); got != m.next() {
		m.fatalf("NextSeq %d, model %d", got, m.next())
	}
	if got := m.l.FirstSeq(); got != m.first {
		m.fatalf("FirstSeq %d, model %d", got, m.first)
	}
	if d := m.l.DurableSeq() + 1; d < m.durable || d > m.next() {
		m.fatalf("DurableSeq %d, but records below %d were acknowledged durable and next is %d", d-1, m.durable, m.next())
	}
}

func (m *pcModel) step() {
	op := m.byte() % pcCount
	m.trace = append(m.trace, fmt.Sprintf("%s(first %d next %d durable %d)", _pcOpNames[op], m.first, m.next(), m.durable))
	ctx := context.Background()
	switch op {
	case pcAppend:
		m.append(1)
	case pcBatch:
		m.append(1 + int(m.byte()%5))
	case pcFlush:
		if err := m.l.Flush(ctx); err != nil {
			m.fatalf("flush: %v", err)
		}
	case pcSync:
		if err := m.l.Sync(ctx); err != nil {
			m.fatalf("sync: %v", err)
		}
		m.durable = m.next()
	case pcWaitDurable:
		seq := m.seq()
		err := m.l.WaitDurable(ctx, seq)
		switch {
		case seq >= m.next():
			if !errors.Is(err, ErrNotAppended) {
				m.fatalf("WaitDurable(%d), next %d: %v, want ErrNotAppended", seq, m.next(), err)
			}
		case err != nil:
			m.fatalf("WaitDurable(%d): %v", seq, err)
		default:
			m.durable = max(m.durable, seq+1)
		}
	case pcTruncate:
		m.truncate(m.seq())
	case pcCursor:
		m.openCursor(m.cursorName(), m.byte())
	case pcPoll:
		name := m.cursorName()
		m.poll(name, 1+int(m.byte()%8))
	case pcAck:
		name := m.cursorName()
		m.ack(name, m.seq())
	case pcCommit:
		m.commit(m.cursorName())
	case pcSeek:
		name := m.cursorName()
		m.seek(name, m.seq())
	case pcCursorClose:
		m.closeCursor(m.cursorName())
	case pcDeleteCursor:
		m.deleteCursor(m.cursorName())
	case pcRead:
		from := m.seq()
		m.read(from, 1+int(m.byte()%16))
	case pcAdvance:
		// Timers fire: the flusher writes, syncs (SyncInterval, BatchAge)
		// and writes marks on its own, concurrently with what follows.
		m.clk.Advance(time.Duration(1+int(m.byte())) * time.Millisecond)
	case pcReopen:
		how, kind := m.byte(), m.byte()
		m.closeClean()
		if kind&1 != 0 {
			// A power cut after a clean Close loses nothing.
			m.mem = m.mem.Crash(m.rng())
		}
		m.reopen(how)
	case pcCrash:
		how, kind := m.byte(), m.byte()
		m.crash(how, kind)
	case pcCutRotation:
		target, how, kind := m.byte(), m.byte(), m.byte()
		m.cutInRotation(int(target)%pcCutSteps, how, kind)
	}
}

// inject is the log's file system's injector: it cuts the power before
// the step a pcCutRotation armed.
func (m *pcModel) inject(op vfs.Op, name string, _ int64, n int) (int, error) {
	t := m.cut.Load()
	if t != 0 && pcCutMatch(int(t)-1, op, name) && m.cut.CompareAndSwap(t, 0) {
		m.cutMem.Load().Crash(nil) // dead: this step and every later one fail
		close(m.cutFired)
	}
	return n, nil
}

// cutInRotation arms a power cut before the step target, fills the
// active segment past its end so that the flusher seals it and the
// sealer names the next, and once the power went (or, if the step did
// not come, now) reopens what the cut left. Appends and the Flush may
// fail once the power is gone.
func (m *pcModel) cutInRotation(target int, how, kind byte) {
	m.trace = append(m.trace, fmt.Sprintf("(cut before step %d)", target))
	m.cutFired = make(chan struct{})
	m.cutMem.Store(m.mem)
	m.cut.Store(int32(target) + 1)
	gone := func(what string, err error) {
		select {
		case <-m.cutFired:
		case <-time.After(5 * time.Second):
			m.fatalf("%s before the power cut: %v", what, err)
		}
	}
	for range 5 {
		p := pcPayload(m.next(), m.life, _pcMaxRec)
		seq, err := m.l.Append(p)
		if err != nil {
			gone("append", err)
			break
		}
		if seq != m.next() {
			m.fatalf("append: seq %d, want %d", seq, m.next())
		}
		m.recs = append(m.recs, pcRec{n: len(p), life: m.life})
	}
	if err := m.l.Flush(context.Background()); err != nil {
		gone("flush", err)
	}
	select {
	case <-m.cutFired:
	case <-time.After(2 * time.Second):
		if m.cut.CompareAndSwap(int32(target)+1, 0) {
			m.trace = append(m.trace, "(the step did not come: cut now)")
			m.mem.Crash(nil)
		}
	}
	m.crash(how, kind)
}

func (m *pcModel) cursorName() string {
	return _pcCursorNames[int(m.byte())%len(_pcCursorNames)]
}

// rng returns a generator seeded from the next two input bytes.
func (m *pcModel) rng() *rand.Rand {
	a, b := m.byte(), m.byte()
	return rand.New(rand.NewPCG(uint64(a)<<8|uint64(b), uint64(len(m.trace))))
}

func (m *pcModel) append(n int) {
	recs := make([][]byte, n)
	total, tooLarge := 0, false
	for i := range recs {
		sz := max(m.size(), 0)
		recs[i] = pcPayload(m.next()+uint64(i), m.life, sz)
		total += 16 + sz
		tooLarge = tooLarge || sz > _pcMaxRec
	}
	tooLarge = tooLarge || n > 1 && total > m.opts.BufferSize/2
	var seq uint64
	var err error
	if n == 1 {
		seq, err = m.l.Append(recs[0])
	} else {
		seq, err = m.l.AppendBatch(recs)
	}
	if tooLarge {
		if !errors.Is(err, ErrTooLarge) {
			m.fatalf("append of %d records (%d bytes): %v, want ErrTooLarge", n, total, err)
		}
		return
	}
	if err != nil || seq != m.next() {
		m.fatalf("append of %d records: seq %d, %v; want seq %d", n, seq, err, m.next())
	}
	for _, p := range recs {
		m.recs = append(m.recs, pcRec{n: len(p), life: m.life})
	}
}

// checkRecord checks that rec is the record the model holds as seq.
func (m *pcModel) checkRecord(who string, seq uint64, rec []byte) {
	m.t.Helper()
	if seq == 0 || seq >= m.next() {
		m.fatalf("%s returned record %d (%s), but the log's last record is %d", who, seq, describe(rec), m.next()-1)
	}
	r := m.recs[seq]
	if want := pcPayload(seq, r.life, r.n); string(want) != string(rec) {
		m.fatalf("%s: record %d is %s, not the one appended (%d bytes, life %d)", who, seq, describe(rec), r.n, r.life)
	}
}

// read flushes, then reads up to k records from from with a Reader of
// the open log.
func (m *pcModel) read(from uint64, k int) {
	if err := m.l.Flush(context.Background()); err != nil {
		m.fatalf("flush: %v", err)
	}
	r, err := m.l.NewReader(from, nil)
	var te *TruncatedError
	switch {
	case from != 0 && from < m.first:
		if !errors.As(err, &te) || te.Seq != from || te.First != m.first {
			m.fatalf("NewReader(%d) below FirstSeq %d: %v, want a *TruncatedError naming both", from, m.first, err)
		}
		return
	case from > m.next():
		if !errors.Is(err, ErrNotAppended) {
			m.fatalf("NewReader(%d) past NextSeq %d: %v, want ErrNotAppended", from, m.next(), err)
		}
		return
	case err != nil:
		m.fatalf("NewReader(%d): %v", from, err)
	}
	defer r.Close()
	want := max(from, m.first)
	for ; k > 0 && r.Next(); k-- {
		if r.Seq() != want {
			m.fatalf("NewReader(%d) returned record %d, want %d", from, r.Seq(), want)
		}
		m.checkRecord(fmt.Sprintf("NewReader(%d)", from), r.Seq(), r.Record())
		want++
	}
	if err := r.Err(); err != nil {
		m.fatalf("NewReader(%d) at %d: %v", from, want, err)
	}
	if k > 0 && want < m.next() {
		m.fatalf("NewReader(%d) stopped at %d after a Flush, next %d", from, want, m.next())
	}
}

// cursorFloor is the lowest checkpoint of the cursors' files, unless
// IgnoreCursors.
func (m *pcModel) cursorFloor() uint64 {
	floor := ^uint64(0)
	if m.opts.Retention.IgnoreCursors {
		return floor
	}
	for _, c := range m.curs {
		if c.exists {
			floor = min(floor, c.ckpt)
		}
	}
	return floor
}

func (m *pcModel) truncate(seq uint64) {
	if err := m.l.TruncateFront(seq); err != nil {
		m.fatalf("TruncateFront(%d): %v", seq, err)
	}
	got := m.l.FirstSeq()
	// Records from the first segment holding seq on stay, and so do those
	// from a cursor's checkpoint on.
	if keep := min(seq, m.next(), m.cursorFloor()); got < m.first || got > max(m.first, keep) {
		m.fatalf("TruncateFront(%d) (cursor floor %d): FirstSeq %d, was %d", seq, m.cursorFloor(), got, m.first)
	}
	m.first = got
}

func (m *pcModel) openCursor(name string, arg byte) {
	mc := m.curs[name]
	var opts *CursorOptions
	window := uint64(DefaultAckWindow)
	if arg&1 != 0 {
		window = 4
		opts = &CursorOptions{AckWindow: 4}
	}
	c, err := m.l.CursorWith(name, opts)
	if mc.c != nil {
		if !errors.Is(err, ErrCursorOpen) {
			m.fatalf("cursor %s opened twice: %v", name, err)
		}
		if c != nil {
			c.Close()
		}
		return
	}
	if err != nil {
		m.fatalf("cursor %s: %v", name, err)
	}
	if from, ok := c.Clamped(); ok {
		c.Close()
		m.fatalf("cursor %s clamped from %d (log [%d,%d)): its checkpoint is past the log's end", name, from, m.first, m.next())
	}
	if !mc.exists {
		mc.exists, mc.ckpt = true, m.first
	}
	mc.c, mc.floor, mc.next, mc.acked, mc.window, mc.stuck = c, mc.ckpt, mc.ckpt, map[uint64]bool{}, window, false
	if got := c.Committed(); got != mc.floor {
		m.fatalf("cursor %s opened at %d, model %d", name, got, mc.floor)
	}
	m.checkFile(name)
}

// checkFile checks the cursor's checkpoint file against the model.
func (m *pcModel) checkFile(name string) {
	m.t.Helper()
	mc := m.curs[name]
	got, err := readCursorFile(m.mem, _pcDir, name, frame.LogID{})
	switch {
	case !mc.exists:
		if !errors.Is(err, fs.ErrNotExist) {
			m.fatalf("cursor %s deleted: file at %d, %v", name, got, err)
		}
	case err != nil:
		m.fatalf("cursor %s: read checkpoint: %v", name, err)
	case got != mc.ckpt:
		m.fatalf("cursor %s: checkpoint %d, model %d", name, got, mc.ckpt)
	}
}

// poll delivers up to k records with Poll and checks them.
func (m *pcModel) poll(name string, k int) {
	mc := m.curs[name]
	if mc.c == nil || mc.stuck {
		return
	}
	for range k {
		seq, rec, ok, err := mc.c.Poll()
		if err != nil {
			var te *TruncatedError
			if !errors.As(err, &te) || mc.next >= m.first || te.Seq != mc.next || te.First != m.first {
				m.fatalf("cursor %s: Poll at %d (log [%d,%d)): %v", name, mc.next, m.first, m.next(), err)
			}
			mc.stuck = true
			return
		}
		if !ok {
			return
		}
		if seq != mc.next {
			m.fatalf("cursor %s: Poll returned %d, want %d", name, seq, mc.next)
		}
		m.checkRecord("cursor "+name, seq, rec)
		mc.next++
	}
}

func (m *pcModel) ack(name string, seq uint64) {
	mc := m.curs[name]
	if mc.c == nil {
		return
	}
	err := mc.c.Ack(seq)
	switch {
	case seq < mc.floor:
		if err != nil {
			m.fatalf("cursor %s: ack %d below committed %d: %v", name, seq, mc.floor, err)
		}
	case seq >= m.next() || seq-mc.floor >= mc.window:
		if !errors.Is(err, ErrAckRange) {
			m.fatalf("cursor %s: ack %d (committed %d, window %d, next %d): %v, want ErrAckRange", name, seq, mc.floor, mc.window, m.next(), err)
		}
	default:
		if err != nil {
			m.fatalf("cursor %s: ack %d (committed %d, next %d): %v", name, seq, mc.floor, m.next(), err)
		}
		mc.acked[seq] = true
		for mc.acked[mc.floor] {
			delete(mc.acked, mc.floor)
			mc.floor++
		}
	}
	if got := mc.c.Committed(); got != mc.floor {
		m.fatalf("cursor %s: committed %d after ack %d, model %d", name, got, seq, mc.floor)
	}
}

// committed notes that a Commit or Close of the cursor returned nil: the
// records below its committed position are durable, and its file holds
// the position unless it held a later one.
func (m *pcModel) committed(name string) {
	mc := m.curs[name]
	m.durable = max(m.durable, mc.floor)
	mc.ckpt = max(mc.ckpt, mc.floor)
	m.checkFile(name)
}

func (m *pcModel) commit(name string) {
	mc := m.curs[name]
	if mc.c == nil {
		return
	}
	if err := mc.c.Commit(context.Background()); err != nil {
		m.fatalf("cursor %s: commit: %v", name, err)
	}
	m.committed(name)
}

func (m *pcModel) seek(name string, seq uint64) {
	mc := m.curs[name]
	if mc.c == nil {
		return
	}
	d0 := m.l.DurableSeq() + 1
	err := mc.c.Seek(seq)
	d1 := m.l.DurableSeq() + 1
	var te *TruncatedError
	switch {
	case seq < m.first:
		if !errors.As(err, &te) || te.Seq != seq || te.First != m.first {
			m.fatalf("cursor %s: seek %d below first %d: %v", name, seq, m.first, err)
		}
		return
	case seq > m.next():
		if !errors.Is(err, ErrNotAppended) {
			m.fatalf("cursor %s: seek %d past next %d: %v", name, seq, m.next(), err)
		}
		return
	case err != nil:
		m.fatalf("cursor %s: seek %d: %v", name, seq, err)
	}
	mc.floor, mc.next, mc.acked, mc.stuck = seq, seq, map[uint64]bool{}, false
	// The checkpoint is clamped to the records durable when Seek wrote it.
	got, err := readCursorFile(m.mem, _pcDir, name, frame.LogID{})
	if err != nil || got < min(seq, d0) || got > min(seq, d1) {
		m.fatalf("cursor %s: seek %d (durable below %d..%d): checkpoint %d, %v", name, seq, d0, d1, got, err)
	}
	mc.ckpt = got
	if c := mc.c.Committed(); c != seq {
		m.fatalf("cursor %s: seek %d: committed %d", name, seq, c)
	}
}

func (m *pcModel) closeCursor(name string) {
	mc := m.curs[name]
	if mc.c == nil {
		return
	}
	if err := mc.c.Close(); err != nil {
		m.fatalf("cursor %s: close: %v", name, err)
	}
	mc.c = nil
	m.committed(name)
}

func (m *pcModel) deleteCursor(name string) {
	mc := m.curs[name]
	err := m.l.DeleteCursor(name)
	switch {
	case mc.c != nil:
		if !errors.Is(err, ErrCursorOpen) {
			m.fatalf("DeleteCursor(%s) of an open cursor: %v", name, err)
		}
	case !mc.exists:
		if !errors.Is(err, fs.ErrNotExist) {
			m.fatalf("DeleteCursor(%s) of no cursor: %v", name, err)
		}
	case err != nil:
		m.fatalf("DeleteCursor(%s): %v", name, err)
	default:
		mc.exists = false
	}
	m.checkFile(name)
}

// closeClean closes the log: every record appended is durable, and every
// open cursor's last checkpoint is written.
func (m *pcModel) closeClean() {
	if err := m.l.Close(); err != nil {
		m.fatalf("close: %v", err)
	}
	m.l = nil
	m.durable = m.next()
	for _, name := range _pcCursorNames {
		mc := m.curs[name]
		if mc.c == nil {
			continue
		}
		if err := mc.c.Close(); err != nil {
			m.fatalf("cursor %s: close after Log.Close: %v", name, err)
		}
		mc.c = nil
		m.committed(name)
	}
}

// crash cuts the power under the open log, closes what the test holds of
// it (its goroutines find the file system dead), and reopens.
func (m *pcModel) crash(how, kind byte) {
	// What a completed sync made durable, DurableSeq says.
	m.durable = max(m.durable, m.l.DurableSeq()+1)
	if m.l.segs.unnamedTail() != nil {
		m.rotating++
	}
	var rng *rand.Rand
	if kind&pcCrashNil == 0 {
		rng = m.rng()
	}
	crashed := m.mem.Crash(rng) // the first Crash, or another outcome of a cut made already
	if kind&pcCrashTwice != 0 {
		// Another outcome of the same cut: the first one is dead too.
		crashed = m.mem.Crash(m.rng())
	}
	m.cuts++
	m.l.Close() // fails: the file system is gone
	m.l = nil
	for _, mc := range m.curs {
		if mc.c != nil {
			mc.c.Close()
			mc.c = nil
		}
	}
	m.mem = crashed
	m.reopen(how)
	if kind&pcCrashTwice != 0 && len(m.in) > 0 && m.in[0]&1 != 0 {
		// Cut the power again right after the recovery: what Open kept
		// it made durable.
		m.byte()
		m.durable = m.next()
		crashed := m.mem.Crash(m.rng())
		m.l.Close()
		m.l = nil
		m.mem = crashed
		m.cuts++
		m.reopen(how)
	}
}

// reopen checks the closed (and maybe crashed) log in m.mem with Verify
// and OpenReader, opens it with the options how picks, and checks what
// Open recovered against them and the model.
func (m *pcModel) reopen(how byte) {
	m.t.Helper()
	m.pcOpts(how)
	m.opts.fsys = vfs.WithFaults(m.mem, m.inject)
	m.trace = append(m.trace, fmt.Sprintf("open(%v verify %v)", m.opts.Sync, m.opts.VerifyOnOpen))
	rep, err := Verify(_pcDir, &m.opts)
	if err != nil {
		m.fatalf("Verify after the cut: %v", err)
	}
	seen := m.readClosed()

	l, err := Open(_pcDir, &m.opts)
	if err != nil {
		m.fatalf("Open after the cut: %v", err)
	}
	m.l = l
	m.life++
	rec := l.Recovery()
	if rec.TruncatedBytes > 0 {
		m.torn++
	}
	if rec.RemovedSegment != "" {
		m.removed++
	}
	if rec.FirstSeq != m.first || l.FirstSeq() != m.first {
		m.fatalf("after the cut the log starts at %d (FirstSeq %d), model %d: a TruncateFront undone, or records lost; recovery %+v",
			rec.FirstSeq, l.FirstSeq(), m.first, rec)
	}
	if rec.NextSeq < m.durable || rec.NextSeq > m.next() {
		m.fatalf("after the cut the log ends before %d; records below %d were acknowledged durable and %d were appended; recovery %+v",
			rec.NextSeq, m.durable, m.next(), rec)
	}
	if l.NextSeq() != rec.NextSeq || l.DurableSeq()+1 != rec.NextSeq {
		m.fatalf("after Open NextSeq %d and DurableSeq %d, but recovery says NextSeq %d", l.NextSeq(), l.DurableSeq(), rec.NextSeq)
	}
	if len(rec.Gaps) > 0 {
		m.fatalf("recovery found gaps %v in a log no Repair touched", rec.Gaps)
	}

	// Verify and OpenReader, before Open, saw what Open recovered.
	if rep.Segments > 0 && (rep.FirstSeq != rec.FirstSeq || rep.NextSeq != rec.NextSeq) {
		m.fatalf("Verify saw [%d,%d), Open recovered [%d,%d)", rep.FirstSeq, rep.NextSeq, rec.FirstSeq, rec.NextSeq)
	}
	if rep.Segments == 0 && rec.NextSeq != 1 {
		m.fatalf("Verify saw no segment, Open recovered [%d,%d)", rec.FirstSeq, rec.NextSeq)
	}
	if rep.Records != rec.NextSeq-rec.FirstSeq {
		m.fatalf("Verify counted %d records, Open recovered [%d,%d)", rep.Records, rec.FirstSeq, rec.NextSeq)
	}
	switch {
	case rep.Torn == nil && rec.TruncatedBytes > 0:
		m.fatalf("Open cut a torn tail of %d bytes at %d that Verify did not report", rec.TruncatedBytes, rec.TruncatedAt)
	case rep.Torn != nil && (rep.Torn.Offset != rec.TruncatedAt || rep.Torn.Bytes != rec.TruncatedBytes || rep.Torn.Segment != rec.TailSegment && rec.RemovedSegment == ""):
		m.fatalf("Verify reported torn tail %+v, Open cut %d bytes at %d of %s", *rep.Torn, rec.TruncatedBytes, rec.TruncatedAt, rec.TailSegment)
	}
	if uint64(len(seen)) != rec.NextSeq-rec.FirstSeq {
		m.fatalf("OpenReader read %d records, Open recovered [%d,%d)", len(seen), rec.FirstSeq, rec.NextSeq)
	}

	// What was appended after the records kept is gone for good.
	m.recs = m.recs[:rec.NextSeq]
	// Open made everything it kept durable.
	m.durable = m.next()

	// The open log's Readers read the same.
	m.read(0, int(m.next()))

	// The cursors: each file holds its last checkpoint, within the log.
	for _, name := range _pcCursorNames {
		m.checkFile(name)
		mc := m.curs[name]
		if mc.exists && mc.ckpt > m.next() {
			m.fatalf("cursor %s checkpointed at %d, past the log's end %d", name, mc.ckpt, m.next())
		}
	}
	infos, err := l.Cursors()
	if err != nil {
		m.fatalf("Cursors after the cut: %v", err)
	}
	for _, in := range infos {
		mc, ok := m.curs[in.Name]
		switch {
		case !ok || !mc.exists:
			m.fatalf("Cursors lists %q, which does not exist", in.Name)
		case in.Err != nil:
			m.fatalf("cursor %s after the cut: %v", in.Name, in.Err)
		case in.Committed != mc.ckpt:
			m.fatalf("cursor %s after the cut at %d, model %d", in.Name, in.Committed, mc.ckpt)
		}
	}
	m.checkBounds()
}

// readClosed reads the closed log with OpenReader and checks every record
// against the model; it returns how many it read, each with its sequence
// number.
func (m *pcModel) readClosed() []uint64 {
	m.t.Helper()
	r, err := OpenReader(_pcDir, 0, &m.opts)
	if err != nil {
		m.fatalf("OpenReader after the cut: %v", err)
	}
	defer r.Close()
	var seen []uint64
	want := m.first
	for r.Next() {
		if r.Seq() != want {
			m.fatalf("OpenReader after the cut returned record %d, want %d", r.Seq(), want)
		}
		m.checkRecord("OpenReader after the cut", r.Seq(), r.Record())
		seen = append(seen, r.Seq())
		want++
	}
	if err := r.Err(); err != nil {
		m.fatalf("OpenReader after the cut, at %d: %v", want, err)
	}
	return seen
}
