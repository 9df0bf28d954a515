package wal

import (
	"context"
	"errors"
	"fmt"
	"github.com/appendlog/appendlog/frame"
	"io/fs"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// FuzzReadModel decodes its input into a sequence of operations on one Log
// (appends, flushes, syncs, Readers from NewReader and OpenReader,
// TruncateFront, Cursors with acks in any order, commits, seeks and
// deletes, and Close and reopen), run in one goroutine, and checks every
// result against a model: the records appended, FirstSeq, each cursor's
// acks, committed position and checkpoint, and each Reader's position.
//
// The first byte picks the configuration: bit 0 sets
// Retention.IgnoreCursors, bit 1 puts the log in a directory of the OS
// (Readers then map segments) instead of a MemFS, bit 2 sets
// Retention.MaxBytes to three segments.
func FuzzReadModel(f *testing.F) {
	for _, seed := range modelSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 600 {
			in = in[:600]
		}
		runReadModel(t, in)
	})
}

// Operations of FuzzReadModel, one input byte each (then their arguments).
const (
	mopAppend = iota
	mopBatch
	mopFlush
	mopSync
	mopNewReader
	mopRead
	mopWait
	mopCloseReader
	mopTruncate
	mopCursor
	mopCursorNext
	mopAck
	mopCommit
	mopSeek
	mopCursorClose
	mopDeleteCursor
	mopReopen
	mopCount
)

// modelSeeds are hand-written operation sequences: rotation with near
// maximal records, readers at every kind of position, truncation under
// readers and cursors, out-of-order and out-of-range acks, seeks, and
// cursors resuming after a reopen.
var modelSeeds = [][]byte{
	// Append big records across several segments, read from the start
	// and the middle, truncate, read again.
	{0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 1, 3, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0,
		mopFlush, mopNewReader, 2, 0, mopRead, 0, 9, mopNewReader, 3, 5, mopTruncate, 5, 0, mopRead, 1, 9,
		mopNewReader, 0, 0, mopRead, 2, 9, mopNewReader, 5, 0, mopNewReader, 6, 0, mopReopen, 3},
	// A cursor: next, acks out of order, duplicate, future, never
	// delivered, commit, retention stopped at its checkpoint, reopen and
	// redelivery.
	{0, mopCursor, 0, 0, mopBatch, 2, 2, 0, 2, 0, 2, 0, mopBatch, 3, 1, 5, 2, 0, 2, 0, 0, 9, mopSync,
		mopCursorNext, 0, 3, mopAck, 0, 3, 1, mopAck, 0, 3, 0, mopAck, 0, 3, 0, mopAck, 0, 6, 0, mopAck, 0, 3, 40,
		mopCommit, 0, mopTruncate, 5, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0,
		mopTruncate, 5, 0, mopReopen, 1, mopCursor, 0, 0, mopCursorNext, 0, 5},
	// IgnoreCursors on the OS: a cursor left behind by TruncateFront,
	// its TruncatedError, Seek out of it and below FirstSeq; DeleteCursor
	// twice; readers below and at FirstSeq.
	{3, mopCursor, 1, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0,
		mopAppend, 2, 0, mopFlush, mopCursorNext, 1, 2, mopTruncate, 5, 0, mopCursorNext, 1, 1, mopSeek, 1, 2, 0,
		mopSeek, 1, 0, 0, mopCursorNext, 1, 3, mopCursorClose, 1, mopDeleteCursor, 1, mopDeleteCursor, 1,
		mopNewReader, 1, 0, mopNewReader, 2, 0, mopRead, 0, 3, mopWait, 0, mopReopen, 2},
	// Readers waiting with an expired context at the end, small records,
	// an oversized one, a ReadDurable reader.
	{0, mopAppend, 0, 7, mopNewReader, 13, 1, mopWait, 0, mopAppend, 3, 2, mopAppend, 0, 0, mopRead, 0, 5,
		mopAppend, 15, 0, mopFlush, mopWait, 0, mopRead, 0, 5, mopCloseReader, 0, mopSync, mopRead, 0, 2},
	// A cursor with an ack window of 4: acks at the window's edge and
	// past it, a gap in the acks filled later, a Seek forward past the
	// durable records.
	{0, mopCursor, 2, 1, mopAppend, 0, 1, mopAppend, 0, 2, mopAppend, 0, 3, mopAppend, 0, 4, mopAppend, 0, 5,
		mopAppend, 0, 6, mopAck, 2, 7, 5, mopAck, 2, 7, 5, mopAck, 2, 7, 4, mopAck, 2, 7, 2, mopAck, 2, 7, 1, mopAck, 2, 7, 6,
		mopAck, 2, 7, 3, mopAck, 2, 7, 6, mopCommit, 2, mopSeek, 2, 5, 0, mopAppend, 1, 0, mopCursorClose, 2,
		mopCursor, 2, 0, mopCursorNext, 2, 9},
	// A cursor of the closed log (OpenCursor): next, ack, commit, seek,
	// then the reopened log's cursor resumes at its checkpoint.
	{0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopCursor, 0, 0,
		mopCursorNext, 0, 2, mopAck, 0, 2, 0, mopReopen, 2, 0, 0, 5, 0, 3, 1, 3, 1, 2, 3, 2, 0, 0, 2,
		mopCursor, 0, 0, mopCursorNext, 0, 3},
	// Retention.MaxBytes deletes in the background while a reader and a
	// cursor read; the cursor's checkpoint holds it back, a Seek back
	// moves the checkpoint under it.
	{4, mopCursor, 0, 0, mopNewReader, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopFlush, mopRead, 0, 15,
		mopCursorNext, 0, 6, mopAck, 0, 3, 0, mopAck, 0, 3, 1, mopAck, 0, 3, 2, mopCommit, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0,
		mopRead, 0, 15, mopSeek, 0, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopCursorNext, 0, 7, mopRead, 0, 15, mopReopen, 1},
	// The same with IgnoreCursors: the cursor falls behind retention.
	{5, mopCursor, 0, 0, mopNewReader, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopAppend, 2, 0, mopFlush, mopCursorNext, 0, 7, mopRead, 0, 15,
		mopSeek, 0, 2, 0, mopCursorNext, 0, 7, mopReopen, 1},
}

// modelLog is the model of one log and the handles the test holds on it.
type modelLog struct {
	t      *testing.T
	dir    string
	opts   Options
	l      *Log
	sizes  []int  // sizes[seq] is record seq's payload size; sizes[0] unused
	first  uint64 // FirstSeq
	shown  uint64 // every record below it was handed to the OS (Flush)
	reads  []*modelReader
	curs   map[string]*modelCursor
	in     []byte
	closed bool // the Log is closed (between Close and the reopen)
	// ret is set when Retention.MaxBytes deletes segments in the
	// background: FirstSeq moves up on its own, and is checked to stay at
	// or below the cursors' checkpoints.
	ret   bool
	trace []string
}

func (m *modelLog) next() uint64 { return uint64(len(m.sizes)) }

// modelReader is a Reader and the sequence number it must return next.
type modelReader struct {
	r       *Reader
	pos     uint64
	durable bool
	err     error // what stopped it for good
}

// modelCursor is a cursor's model: its file and, while open, its state.
type modelCursor struct {
	c      *Cursor // nil when not open
	old    *Cursor // the last handle closed, for ErrClosed checks
	exists bool    // its file exists
	ckpt   uint64  // the position in its file
	floor  uint64  // committed position
	acked  map[uint64]bool
	next   uint64 // what Next delivers next
	window uint64
	trunc  bool // Next returned a *TruncatedError: it must again
	// offline is set for a cursor from OpenCursor, on the closed log.
	offline bool
}

const (
	_modelMaxRec = 16 << 10
	_modelDir    = "/log"
)

var _modelCursorNames = []string{"a", "b", "c"}

// payloadOf returns the payload of record seq, of n bytes.
func payloadOf(seq uint64, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(seq*7 + uint64(i)*13 + uint64(n))
	}
	return p
}

func (m *modelLog) byte() byte { return nextByte(&m.in) }

// nextByte takes the first byte of a fuzz input; past its end, 0.
func nextByte(in *[]byte) byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// size decodes a payload size: small, near MaxRecordSize, exactly it,
// medium, or (rarely) one too large.
func (m *modelLog) size() int {
	kind, arg := m.byte(), int(m.byte())
	switch kind % 16 {
	case 0, 4, 8:
		return arg
	case 1, 5, 9:
		return _modelMaxRec - arg
	case 2, 6, 10, 12:
		return _modelMaxRec
	case 15:
		return _modelMaxRec + 1 + arg
	}
	return arg * 64
}

// seq decodes a sequence number relative to the log (seqIn).
func (m *modelLog) seq() uint64 { return seqIn(&m.in, m.first, m.next()) }

// seqIn decodes a sequence number relative to a log holding records
// [first, next): 0, below first, at it, in the middle, just below next,
// at it, past it, or anywhere.
func seqIn(in *[]byte, first, next uint64) uint64 {
	kind, arg := nextByte(in), uint64(nextByte(in))
	switch kind % 8 {
	case 0:
		return 0
	case 1:
		return first - min(first, 1+arg%4)
	case 2:
		return first
	case 3:
		return first + arg%max(next-first, 1)
	case 4:
		return next - min(next, 1+arg%4)
	case 5:
		return next
	case 6:
		return next + 1 + arg%3
	}
	return arg
}

// fatalf fails the test with the operations run so far.
func (m *modelLog) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\nafter: %v", fmt.Sprintf(format, args...), m.trace)
}

var _modelOpNames = [...]string{"append", "batch", "flush", "sync", "newreader", "read", "wait", "closereader",
	"truncate", "cursor", "cursornext", "ack", "commit", "seek", "cursorclose", "deletecursor", "reopen"}

func (m *modelLog) open() {
	l, err := Open(m.dir, &m.opts)
	if err != nil {
		m.fatalf("open: %v", err)
	}
	m.l, m.closed = l, false
	m.shown = m.next()
	m.observeFirst(false)
	if got := l.NextSeq(); got != m.next() {
		m.fatalf("reopened NextSeq %d, model %d", got, m.next())
	}
}

func runReadModel(t *testing.T, in []byte) {
	m := &modelLog{t: t, dir: _modelDir, sizes: []int{0}, first: 1, curs: map[string]*modelCursor{}}
	cfg := m.byteFrom(&in)
	m.in = in
	m.opts = Options{
		SegmentSize:     64 << 10,
		BufferSize:      128 << 10,
		MaxRecordSize:   _modelMaxRec,
		CheckpointEvery: time.Hour,
		clock:           clock.NewFake(time.Unix(1000, 0)),
		Retention:       Retention{IgnoreCursors: cfg&1 != 0},
	}
	if cfg&4 != 0 {
		m.ret = true
		m.opts.Retention.MaxBytes = 3 * m.opts.SegmentSize
	}
	if cfg&2 != 0 {
		m.dir = t.TempDir()
		m.opts.Sync = SyncNever // Sync and Close still fdatasync
	} else {
		mem := vfs.NewMem()
		m.opts.fsys = mem
	}
	for _, n := range _modelCursorNames {
		m.curs[n] = &modelCursor{}
	}
	m.open()
	defer m.closeAll()
	for ops := 0; len(m.in) > 0 && ops < 120; ops++ {
		m.step()
		m.checkLog()
	}
	m.reopen(1)
	if testing.Verbose() {
		t.Logf("ran %v", m.trace)
	}
}

func (m *modelLog) byteFrom(in *[]byte) byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// closeAll releases everything, so that goleak finds nothing when a check
// failed half way.
func (m *modelLog) closeAll() {
	for _, r := range m.reads {
		r.r.Close()
	}
	m.reads = nil
	for _, c := range m.curs {
		if c.c != nil {
			c.c.Close()
		}
	}
	if m.l != nil {
		m.l.Close()
	}
}

func (m *modelLog) checkLog() {
	m.t.Helper()
	if got := m.l.NextSeq(); got != m.next() {
		m.fatalf("NextSeq %d, model %d", got, m.next())
	}
	m.observeFirst(false)
}

// observeFirst checks the log's FirstSeq against the model: unchanged, or
// with background retention moved up but not past the cursors'
// checkpoints (unless IgnoreCursors, or movedBack: a Seek moved a
// checkpoint back, and a deletion under way may still remove its
// records).
func (m *modelLog) observeFirst(movedBack bool) {
	m.t.Helper()
	got := m.l.FirstSeq()
	if got == m.first {
		return
	}
	if !m.ret || got < m.first {
		m.fatalf("FirstSeq %d, model %d", got, m.first)
	}
	if floor := m.cursorFloor(); got > floor && !movedBack {
		m.fatalf("retention moved FirstSeq from %d to %d, past the cursor checkpoint %d", m.first, got, floor)
	}
	m.first = got
}

// truncOK reports whether te is the *TruncatedError of a read of seq:
// seq below First, which is FirstSeq as it was between lo and now.
func (m *modelLog) truncOK(te *TruncatedError, seq, lo uint64) bool {
	return te.Seq == seq && seq < te.First && lo <= te.First && te.First <= m.l.FirstSeq()
}

func (m *modelLog) step() {
	op := m.byte() % mopCount
	m.trace = append(m.trace, fmt.Sprintf("%s(first %d next %d)", _modelOpNames[op], m.first, m.next()))
	switch op {
	case mopAppend:
		m.append(1)
	case mopBatch:
		m.append(1 + int(m.byte()%5))
	case mopFlush:
		if err := m.l.Flush(context.Background()); err != nil {
			m.fatalf("flush: %v", err)
		}
		m.shown = m.next()
	case mopSync:
		if err := m.l.Sync(context.Background()); err != nil {
			m.fatalf("sync: %v", err)
		}
		m.shown = m.next()
		if d := m.l.DurableSeq(); d+1 < m.next() {
			m.fatalf("after Sync DurableSeq is %d, next %d", d, m.next())
		}
	case mopNewReader:
		m.newReader()
	case mopRead:
		if r := m.reader(); r != nil {
			m.read(r, 1+int(m.byte()%16))
		}
	case mopWait:
		if r := m.reader(); r != nil {
			m.wait(r)
		}
	case mopCloseReader:
		if len(m.reads) > 0 {
			i := int(m.byte()) % len(m.reads)
			if err := m.reads[i].r.Close(); err != nil {
				m.fatalf("reader close: %v", err)
			}
			m.reads = slices.Delete(m.reads, i, i+1)
		}
	case mopTruncate:
		m.truncate(m.seq())
	case mopCursor:
		m.openCursor(m.cursorName(), m.byte())
	case mopCursorNext:
		name := m.cursorName()
		for range 1 + m.byte()%8 {
			if !m.cursorNext(name) {
				break
			}
		}
	case mopAck:
		name := m.cursorName()
		m.ack(name, m.seq())
	case mopCommit:
		m.commit(m.cursorName())
	case mopSeek:
		name := m.cursorName()
		m.seek(name, m.seq())
	case mopCursorClose:
		m.closeCursor(m.cursorName())
	case mopDeleteCursor:
		m.deleteCursor(m.cursorName())
	case mopReopen:
		m.reopen(m.byte())
		m.open()
	}
}

func (m *modelLog) cursorName() string {
	return _modelCursorNames[int(m.byte())%len(_modelCursorNames)]
}

func (m *modelLog) reader() *modelReader {
	if len(m.reads) == 0 {
		return nil
	}
	return m.reads[int(m.byte())%len(m.reads)]
}

func (m *modelLog) append(n int) {
	recs := make([][]byte, n)
	total, tooLarge := 0, false
	for i := range recs {
		sz := m.size()
		recs[i] = payloadOf(m.next()+uint64(i), sz)
		total += 16 + sz
		tooLarge = tooLarge || sz > _modelMaxRec
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
		m.sizes = append(m.sizes, len(p))
	}
}

func (m *modelLog) newReader() {
	// Bit 3 of the position's first byte asks for ReadDurable.
	durable := len(m.in) > 0 && m.in[0]&8 != 0
	from := m.seq()
	var opts *ReaderOptions
	if durable {
		opts = &ReaderOptions{Visibility: ReadDurable}
	}
	lo := m.first
	r, err := m.l.NewReader(from, opts)
	at := from
	if at == 0 {
		at = r0Pos(r, lo)
	}
	var te *TruncatedError
	switch {
	case at < m.l.FirstSeq():
		if at >= lo && err == nil {
			break // retention moved FirstSeq past from after NewReader
		}
		if errors.As(err, &te) && from == 0 && te.Seq >= lo {
			break // FirstSeq's segment was deleted as NewReader(0) went to it
		}
		if !errors.As(err, &te) || !m.truncOK(te, from, lo) {
			m.fatalf("NewReader(%d) below FirstSeq %d: %v, want a *TruncatedError naming both", from, m.l.FirstSeq(), err)
		}
	case at > m.next():
		if !errors.Is(err, ErrNotAppended) {
			m.fatalf("NewReader(%d) past NextSeq %d: %v, want ErrNotAppended", from, m.next(), err)
		}
	case err != nil:
		m.fatalf("NewReader(%d) (first %d, next %d): %v", from, m.first, m.next(), err)
	}
	if err == nil {
		if at < lo || at > m.next() {
			r.Close()
			m.fatalf("NewReader(%d) (first %d, next %d) succeeded", from, m.first, m.next())
		}
		m.reads = append(m.reads, &modelReader{r: r, pos: at, durable: durable})
	}
}

// r0Pos is where NewReader(0) put r: FirstSeq when it was called, which
// background retention may have moved since lo.
func r0Pos(r *Reader, lo uint64) uint64 {
	if r == nil {
		return lo
	}
	return r.from
}

// visible returns the sequence number below which every record must be
// visible to r.
func (m *modelLog) visible(r *modelReader) uint64 {
	if m.closed {
		return 0 // a Reader of a closed log may stop at a segment's end
	}
	if r.durable {
		return m.l.DurableSeq() + 1
	}
	return m.shown
}

// read reads up to k records with r and checks them.
func (m *modelLog) read(r *modelReader, k int) {
	m.t.Helper()
	lo := m.first
	for range k {
		must := m.visible(r)
		if r.r.Next() {
			m.checkRecord("reader", r.r.Seq(), r.r.Record(), r.pos)
			if r.err != nil {
				m.fatalf("reader returned record %d after it stopped with %v", r.r.Seq(), r.err)
			}
			r.pos++
			continue
		}
		err := r.r.Err()
		if r.err != nil {
			if err != r.err {
				m.fatalf("reader stopped with %v, then Err is %v", r.err, err)
			}
			return
		}
		if err == nil {
			if r.pos < must {
				m.fatalf("reader at %d stopped with no error, but records below %d are visible", r.pos, must)
			}
			return
		}
		var te *TruncatedError
		switch {
		case errors.As(err, &te):
			if !m.truncOK(te, r.pos, lo) {
				m.fatalf("reader at %d (first %d): %v", r.pos, m.l.FirstSeq(), err)
			}
		case m.closed && errors.Is(err, ErrClosed):
		default:
			m.fatalf("reader at %d (first %d, next %d): %v", r.pos, m.first, m.next(), err)
		}
		r.err = err
		return
	}
}

func (m *modelLog) checkRecord(who string, seq uint64, rec []byte, want uint64) {
	m.t.Helper()
	if seq != want {
		m.fatalf("%s returned record %d, want %d", who, seq, want)
	}
	if seq >= m.next() || seq == 0 {
		m.fatalf("%s returned record %d, next is %d", who, seq, m.next())
	}
	if p := payloadOf(seq, m.sizes[seq]); string(p) != string(rec) {
		m.fatalf("%s: record %d has %d bytes, not the %d appended (or different ones)", who, seq, len(rec), len(p))
	}
}

// wait calls Wait with a context already cancelled: it returns nil when
// a record is visible, the context's error otherwise.
func (m *modelLog) wait(r *modelReader) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	must := m.visible(r)
	err := r.r.Wait(ctx)
	switch {
	case r.err != nil:
		if err != r.err {
			m.fatalf("Wait of a reader stopped with %v: %v", r.err, err)
		}
	case err == nil:
		if r.pos >= m.next() {
			m.fatalf("Wait at %d returned nil, next is %d", r.pos, m.next())
		}
	case errors.Is(err, context.Canceled):
		if r.pos < must {
			m.fatalf("Wait at %d: %v, but records below %d are visible", r.pos, err, must)
		}
	default:
		m.fatalf("Wait at %d: %v", r.pos, err)
	}
}

// segStarts lists the first sequence numbers of the log's segments, as
// its table has them: the files of a rotation are renamed later, by the
// sealer.
func (m *modelLog) segStarts() []uint64 {
	t := m.l.segs
	t.mu.Lock()
	defer t.mu.Unlock()
	var starts []uint64
	for _, s := range t.mu.segs {
		starts = append(starts, s.firstSeq)
	}
	return starts
}

// segFiles lists the first sequence numbers of the log's segment files.
func (m *modelLog) segFiles() []uint64 {
	segs, _, _, err := listSegments(m.opts.withDefaults().fsys, m.dir)
	if err != nil {
		m.fatalf("list segments: %v", err)
	}
	var starts []uint64
	for _, s := range segs {
		starts = append(starts, s.firstSeq)
	}
	return starts
}

// cursorFloor is the lowest checkpoint of the cursors' files.
func (m *modelLog) cursorFloor() uint64 {
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

func (m *modelLog) truncate(seq uint64) {
	if err := m.l.Flush(context.Background()); err != nil {
		m.fatalf("flush: %v", err)
	}
	m.shown = m.next()
	starts := m.segStarts()
	bound := min(seq, m.cursorFloor())
	want := m.first
	for i, s := range starts {
		// Segment i ends where segment i+1 starts; the last is active.
		if s >= m.first && (i == len(starts)-1 || starts[i+1] > bound) {
			want = max(s, m.first)
			break
		}
	}
	if err := m.l.TruncateFront(seq); err != nil {
		m.fatalf("TruncateFront(%d): %v", seq, err)
	}
	got := m.l.FirstSeq()
	if got != want && (!m.ret || got < want) {
		m.fatalf("TruncateFront(%d) (cursor floor %d, segments %v): FirstSeq %d, want %d", seq, m.cursorFloor(), starts, got, want)
	}
	if after := m.segStarts(); len(after) == 0 || after[0] != got && !m.ret {
		m.fatalf("TruncateFront(%d): FirstSeq %d, segments %v", seq, got, after)
	}
	if files := m.segFiles(); len(files) > 0 && files[0] < got {
		m.fatalf("TruncateFront(%d): FirstSeq %d, but segment files %v", seq, got, files)
	}
	m.first = got
	m.observeFirst(false)
}

func (m *modelLog) openCursor(name string, arg byte) {
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
		return
	}
	if err != nil {
		m.fatalf("cursor %s: %v", name, err)
	}
	if !mc.exists {
		// A new cursor starts at FirstSeq, which background retention
		// may have moved.
		mc.exists, mc.ckpt = true, c.Committed()
		if mc.ckpt < m.first || mc.ckpt > m.l.FirstSeq() {
			m.fatalf("new cursor %s at %d, FirstSeq %d..%d", name, mc.ckpt, m.first, m.l.FirstSeq())
		}
	}
	mc.c, mc.floor, mc.next, mc.acked, mc.window, mc.trunc = c, mc.ckpt, mc.ckpt, map[uint64]bool{}, window, false
	if got := c.Committed(); got != mc.floor {
		m.fatalf("cursor %s opened at %d, model %d", name, got, mc.floor)
	}
	m.checkFile(name)
}

// checkFile checks the cursor's checkpoint file against the model.
func (m *modelLog) checkFile(name string) {
	m.t.Helper()
	mc := m.curs[name]
	got, err := readCursorFile(m.opts.withDefaults().fsys, m.dir, name, frame.LogID{})
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

// cursorNext delivers one record (or none) with Poll or with Next and an
// expired context, and reports whether to go on.
func (m *modelLog) cursorNext(name string) bool {
	mc := m.curs[name]
	if mc.c == nil {
		if mc.old != nil {
			if _, _, err := mc.old.Next(context.Background()); !errors.Is(err, ErrClosed) {
				m.fatalf("Next of closed cursor %s: %v", name, err)
			}
		}
		return false
	}
	must := m.shown
	lo := m.first
	var seq uint64
	var rec []byte
	var ok bool
	var err error
	if mc.next&1 == 0 {
		seq, rec, ok, err = mc.c.Poll()
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		seq, rec, err = mc.c.Next(ctx)
		ok = err == nil
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	if ok {
		if mc.trunc {
			m.fatalf("cursor %s returned record %d after a *TruncatedError", name, seq)
		}
		m.checkRecord("cursor "+name, seq, rec, mc.next)
		mc.next++
		return true
	}
	if err == nil {
		if mc.next < must || mc.trunc {
			m.fatalf("cursor %s at %d delivered nothing, but records below %d are visible (truncated %v)", name, mc.next, must, mc.trunc)
		}
		return false
	}
	var te *TruncatedError
	if !errors.As(err, &te) || !m.truncOK(te, mc.next, lo) {
		m.fatalf("cursor %s at %d (first %d, next %d): %v", name, mc.next, m.l.FirstSeq(), m.next(), err)
	}
	mc.trunc = true
	return false
}

func (m *modelLog) ack(name string, seq uint64) {
	mc := m.curs[name]
	if mc.c == nil {
		if mc.old != nil {
			if err := mc.old.Ack(seq); !errors.Is(err, ErrClosed) {
				m.fatalf("Ack of closed cursor %s: %v", name, err)
			}
		}
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

func (m *modelLog) commit(name string) {
	mc := m.curs[name]
	if mc.c == nil {
		return
	}
	if err := mc.c.Commit(context.Background()); err != nil {
		m.fatalf("cursor %s: commit: %v", name, err)
	}
	mc.ckpt = max(mc.ckpt, mc.floor)
	m.checkFile(name)
}

func (m *modelLog) seek(name string, seq uint64) {
	mc := m.curs[name]
	if mc.c == nil {
		if mc.old != nil {
			if err := mc.old.Seek(seq); !errors.Is(err, ErrClosed) {
				m.fatalf("Seek of closed cursor %s: %v", name, err)
			}
		}
		return
	}
	d0 := m.l.DurableSeq()
	lo := m.first
	err := mc.c.Seek(seq)
	d1 := m.l.DurableSeq()
	if mc.offline {
		// A cursor from OpenCursor syncs the records itself.
		d0, d1 = math.MaxUint64-1, math.MaxUint64-1
	}
	var te *TruncatedError
	switch {
	case seq < m.l.FirstSeq() && !(seq >= lo && err == nil):
		if !errors.As(err, &te) || !m.truncOK(te, seq, lo) {
			m.fatalf("cursor %s: seek %d below first %d: %v", name, seq, m.l.FirstSeq(), err)
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
	mc.floor, mc.next, mc.acked, mc.trunc = seq, seq, map[uint64]bool{}, false
	got, err := readCursorFile(m.opts.withDefaults().fsys, m.dir, name, frame.LogID{})
	if err != nil || got < min(seq, d0+1) || got > min(seq, d1+1) {
		m.fatalf("cursor %s: seek %d (durable %d..%d): checkpoint %d, %v", name, seq, d0, d1, got, err)
	}
	back := got < mc.ckpt
	mc.ckpt = got
	if m.ret && !m.closed {
		// TruncateFront waits for a deletion under way (retention's lock)
		// and, with seq 0, deletes nothing.
		if err := m.l.TruncateFront(0); err != nil {
			m.fatalf("TruncateFront(0): %v", err)
		}
		m.observeFirst(back)
	}
	if c := mc.c.Committed(); c != seq {
		m.fatalf("cursor %s: seek %d: committed %d", name, seq, c)
	}
}

func (m *modelLog) closeCursor(name string) {
	mc := m.curs[name]
	if mc.c == nil {
		if mc.old != nil {
			if err := mc.old.Close(); err != nil {
				m.fatalf("second Close of cursor %s: %v", name, err)
			}
		}
		return
	}
	if err := mc.c.Close(); err != nil {
		m.fatalf("cursor %s: close: %v", name, err)
	}
	mc.ckpt = max(mc.ckpt, mc.floor)
	mc.old, mc.c = mc.c, nil
	m.checkFile(name)
}

func (m *modelLog) deleteCursor(name string) {
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

// reopen closes the Log, checks what its Close did to the cursors, and
// reads the closed log with OpenReader from several positions. With bit 0
// of how, the Readers read once more after the Close; with bit 1, a
// cursor of the closed log is used (see offline).
func (m *modelLog) reopen(how byte) {
	readAfter := how&1 != 0
	if err := m.l.Close(); err != nil {
		m.fatalf("close: %v", err)
	}
	m.closed = true
	m.shown = m.next()
	m.observeFirst(false)
	for _, r := range m.reads {
		if readAfter {
			m.read(r, 4)
		}
		if err := r.r.Close(); err != nil {
			m.fatalf("reader close after log close: %v", err)
		}
	}
	m.reads = nil
	for _, name := range _modelCursorNames {
		mc := m.curs[name]
		if mc.c == nil {
			continue
		}
		// Log.Close wrote the last checkpoint; Close only releases.
		if err := mc.c.Ack(mc.floor); !errors.Is(err, ErrClosed) {
			m.fatalf("Ack of cursor %s after Log.Close: %v", name, err)
		}
		if err := mc.c.Close(); err != nil {
			m.fatalf("cursor %s: close after Log.Close: %v", name, err)
		}
		mc.ckpt = max(mc.ckpt, mc.floor)
		mc.old, mc.c = mc.c, nil
		m.checkFile(name)
	}
	if how&2 != 0 {
		m.offline()
	}
	for _, from := range []uint64{0, m.first - min(m.first, 1), m.first, (m.first + m.next()) / 2, m.next() - min(m.next(), 1), m.next(), m.next() + 1} {
		m.openReader(from)
	}
}

// offline opens a cursor of the closed log with OpenCursor and runs a
// few operations on it, as another process would.
func (m *modelLog) offline() {
	name := m.cursorName()
	mc := m.curs[name]
	var copts *CursorOptions
	window := uint64(DefaultAckWindow)
	if m.byte()&1 != 0 {
		window = 4
		copts = &CursorOptions{AckWindow: 4}
	}
	c, err := OpenCursor(m.dir, name, &m.opts, copts)
	if err != nil {
		m.fatalf("OpenCursor(%s): %v", name, err)
	}
	if !mc.exists {
		mc.exists, mc.ckpt = true, m.first
	}
	mc.c, mc.floor, mc.next, mc.acked, mc.window, mc.trunc, mc.offline = c, mc.ckpt, mc.ckpt, map[uint64]bool{}, window, false, true
	if got := c.Committed(); got != mc.floor {
		m.fatalf("OpenCursor(%s) at %d, model %d", name, got, mc.floor)
	}
	if got := c.End(); got != m.next() {
		m.fatalf("OpenCursor(%s): End %d, next %d", name, got, m.next())
	}
	m.checkFile(name)
	for range m.byte() % 8 {
		op := m.byte() % 4
		m.trace = append(m.trace, fmt.Sprintf("offline-%s(%s)", [...]string{"next", "ack", "commit", "seek"}[op], name))
		switch op {
		case 0:
			for range 1 + m.byte()%4 {
				if !m.cursorNext(name) {
					break
				}
			}
		case 1:
			m.ack(name, m.seq())
		case 2:
			m.commit(name)
		case 3:
			m.seek(name, m.seq())
		}
	}
	m.closeCursor(name)
	mc.offline = false
}

// openReader reads the closed log from from through with OpenReader: it
// starts at record from (0: the first the log holds); a from below the
// first is a *TruncatedError naming it.
func (m *modelLog) openReader(from uint64) {
	r, err := OpenReader(m.dir, from, &m.opts)
	if from != 0 && from < m.first {
		var te *TruncatedError
		if !errors.As(err, &te) || te.Seq != from || te.First != m.first {
			m.fatalf("OpenReader(%d) below the first record %d: %v, want a *TruncatedError naming both", from, m.first, err)
		}
		return
	}
	if err != nil {
		m.fatalf("OpenReader(%d): %v", from, err)
	}
	defer r.Close()
	want := max(from, m.first)
	for r.Next() {
		m.checkRecord(fmt.Sprintf("OpenReader(%d)", from), r.Seq(), r.Record(), want)
		want++
	}
	if err := r.Err(); err != nil {
		m.fatalf("OpenReader(%d): %v", from, err)
	}
	if want < m.next() {
		m.fatalf("OpenReader(%d) stopped at %d, next %d", from, want, m.next())
	}
}
