package shmlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// FuzzShmModel decodes its input into a sequence of operations on one log,
// made through several Logs and Readers of this process standing in for
// several processes (each Open takes its own slot and flocks, as the
// package's own tests use it), and checks each result against a model of
// the documented promises: positions follow from the frame sizes and the
// roll to the next file; every committed record is read back exactly once,
// in order, with its bytes and position; a Reservation abandoned by a
// closed Log is padded over exactly once (by a Reader, Verify or the
// recovering Open) and never read; Verify, Recovery and Stats count what
// the model counts; and the errors are the documented ones.
func FuzzShmModel(f *testing.F) {
	// Each seed is a sequence of operations; see shmModel.step.
	// A two-Log session: appends of every size, a Reservation read
	// around, then committed.
	f.Add([]byte{0, 0, 0, 0, 5, 0, 0, 1, 3, 1, 5, 1, 0, 0, 1, 2, 2, 1, 0, 7, 7, 0, 0, 0, 8, 0, 7, 3, 1, 0, 8, 0, 7, 15, 0, 15, 1, 12})
	// A Reservation abandoned by a closed Log: Readers pad it over.
	f.Add([]byte{1, 5, 1, 0, 2, 1, 1, 10, 0, 0, 0, 0, 3, 4, 1, 7, 0, 1, 1, 8, 0, 3, 7, 1, 0, 0, 8, 1, 7, 15, 0, 14, 0, 12})
	// Records that fill a file exactly, leave 8 bytes, roll; too large;
	// Readers at the end, inside a frame, past the end, in no file.
	f.Add([]byte{0, 0, 0, 1, 20, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 4, 0, 0, 0, 0, 2, 0, 0, 5, 0, 2, 0, 6, 0, 7, 0, 4, 0, 0, 0, 0, 9, 8, 0, 7, 7, 1, 2, 1, 7, 1, 3, 0, 7, 1, 5, 1, 12})
	// Close everything with a dead frame in the active file: the next
	// Open recovers it.
	f.Add([]byte{2, 5, 1, 0, 0, 1, 0, 4, 2, 1, 0, 9, 0, 0, 0, 1, 13, 2, 0, 7, 0, 0, 0, 8, 0, 7, 15, 2, 12})
	// A dead frame in a file that is no longer active: Verify pads it.
	f.Add([]byte{0, 5, 1, 0, 2, 1, 0, 3, 0, 0, 2, 4, 1, 6, 0, 13, 0, 0, 15, 0, 12})
	// Wait with a cancelled context, before and after a record.
	f.Add([]byte{0, 0, 0, 0, 3, 7, 0, 0, 0, 10, 0, 8, 0, 0, 10, 0, 0, 0, 0, 1, 10, 0, 8, 0, 0, 11, 0, 6, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		m := newShmModel(t, in)
		defer m.closeAll()
		for range 150 {
			if len(m.in) == 0 {
				break
			}
			m.step()
		}
		m.finish()
	})
}

type frameState int

const (
	_fPending   frameState = iota + 1 // reserved by an open Log, not committed
	_fCommitted                       // a record
	_fDead                            // its Log closed before Commit; not yet padded over
	_fPadded                          // padded over: never read
)

// fuzzFrame is a frame of the model log, in log order.
type fuzzFrame struct {
	pos   uint64
	data  []byte
	state frameState
}

type fuzzResv struct {
	r     shmlog.Reservation
	frame int
}

type fuzzHandle struct {
	l       *shmlog.Log
	pending []fuzzResv
}

type fuzzReader struct {
	r      *shmlog.Reader
	at     int    // index in frames of the next frame to read
	padded uint64 // frames the model knows this Reader padded over
	// impatient: opened with LiveTimeout, so it pads over Reservations
	// of open Logs too.
	impatient bool
}

type shmModel struct {
	t        *testing.T
	in       []byte
	path     string
	capacity uint64 // C, the data bytes of each file
	frames   []*fuzzFrame
	cur      uint64 // the active file
	tail     uint64 // bytes claimed in the active file
	handles  [4]*fuzzHandle
	readers  [3]*fuzzReader
	gone     []shmlog.Reservation // Reservations of closed Logs
	// padded counts the frames Readers and Verify padded over: the shared
	// count Stats reports (a recovering Open's are not in it).
	padded uint64
	nrec   uint64
}

var _modelFileSizes = [...]int64{8192, 12288, 16384, 8192 + 512}

func newShmModel(t *testing.T, in []byte) *shmModel {
	m := &shmModel{t: t, in: in, path: filepath.Join(t.TempDir(), "log")}
	size := _modelFileSizes[int(m.next())%len(_modelFileSizes)]
	m.capacity = uint64(size) - shmlog.HeaderSize
	m.open(0, size)
	return m
}

func (m *shmModel) next() byte {
	if len(m.in) == 0 {
		return 0
	}
	b := m.in[0]
	m.in = m.in[1:]
	return b
}

func (m *shmModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf(format, args...)
}

func frameBytes(n int) uint64 { return uint64(16+n+7) &^ 7 }

// payloadFor makes record id's payload: generated, not taken from the
// input, so that no payload forges a frame header (see NewReader below).
func payloadFor(id uint64, n int) []byte {
	p := make([]byte, n)
	x := id*0x9e3779b97f4a7c15 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}

// size picks a payload length: tiny, medium, the largest, one that fills
// the rest of the active file exactly (or leaves under 16 bytes), or one
// too large.
func (m *shmModel) size() int {
	rest := m.capacity - m.tail
	if m.tail > m.capacity {
		rest = 0
	}
	switch m.next() % 7 {
	case 0:
		return int(m.next() % 24)
	case 1:
		return int(m.next())*8 + int(m.next()%8)
	case 2:
		return int(m.capacity) - 16
	case 3:
		if rest >= 16 {
			return int(rest) - 16
		}
	case 4:
		if rest >= 24 {
			return int(rest) - 24 - int(m.next()%8)
		}
	case 5:
		return int(m.capacity) - 15 + int(m.next()%4) // ErrTooLarge
	case 6:
		return -1 - int(m.next()%2) // ErrTooLarge
	}
	return int(m.next() % 40)
}

// claim is where the model puts an n-byte frame: after the tail, or at the
// start of the next file if it does not fit.
func (m *shmModel) claim(n int) uint64 {
	s := frameBytes(n)
	if m.tail+s > m.capacity {
		m.cur++
		m.tail = 0
	}
	pos := m.cur<<32 | m.tail
	m.tail += s
	return pos
}

// claimed checks the outcome of an Append or Reserve of n bytes: an error
// wrapping ErrTooLarge if n does not fit in a file (ok false), else it
// returns the model's position for the record.
func (m *shmModel) claimed(h int, call string, n int, err error) (want uint64, ok bool) {
	if n < 0 || uint64(n)+16 > m.capacity {
		if !errors.Is(err, shmlog.ErrTooLarge) {
			m.fatalf("handle %d: %s of %d bytes: %v, want ErrTooLarge", h, call, n, err)
		}
		return 0, false
	}
	return m.claim(n), true
}

func (m *shmModel) handle() (int, *fuzzHandle) {
	h := int(m.next()) % len(m.handles)
	return h, m.handles[h]
}

func (m *shmModel) anyOpen() bool {
	for _, h := range m.handles {
		if h != nil {
			return true
		}
	}
	for _, r := range m.readers {
		if r != nil {
			return true
		}
	}
	return false
}

func (m *shmModel) step() {
	op := m.next() % 16
	switch op {
	case 0, 1: // Append
		h, fh := m.handle()
		n := m.size()
		if fh == nil {
			return
		}
		n = max(n, 0) // Append has no way to ask for a negative length
		p := payloadFor(m.nrec, n)
		m.nrec++
		pos, err := fh.l.Append(p)
		want, ok := m.claimed(h, "Append", n, err)
		if !ok {
			return
		}
		if err != nil || pos != want {
			m.fatalf("handle %d: Append of %d bytes: %#x, %v; want %#x", h, n, pos, err, want)
		}
		m.frames = append(m.frames, &fuzzFrame{pos: pos, data: p, state: _fCommitted})
	case 2: // Reserve
		h, fh := m.handle()
		n := m.size()
		if fh == nil {
			return
		}
		r, err := fh.l.Reserve(n)
		want, ok := m.claimed(h, "Reserve", n, err)
		if !ok {
			return
		}
		if err != nil || r.Pos() != want || len(r.Bytes()) != n {
			m.fatalf("handle %d: Reserve(%d): %#x (%d bytes), %v; want %#x", h, n, r.Pos(), len(r.Bytes()), err, want)
		}
		p := payloadFor(m.nrec, n)
		m.nrec++
		copy(r.Bytes(), p)
		m.frames = append(m.frames, &fuzzFrame{pos: want, data: p, state: _fPending})
		fh.pending = append(fh.pending, fuzzResv{r, len(m.frames) - 1})
	case 3: // Commit
		h, fh := m.handle()
		j := int(m.next())
		if fh == nil || len(fh.pending) == 0 {
			return
		}
		j %= len(fh.pending)
		res := fh.pending[j]
		fh.pending = append(fh.pending[:j], fh.pending[j+1:]...)
		err := res.r.Commit()
		if m.frames[res.frame].state == _fPadded {
			// An impatient Reader padded it over.
			if !errors.Is(err, shmlog.ErrPadded) {
				m.fatalf("handle %d: Commit at %#x after a Reader padded it over: %v, want ErrPadded", h, res.r.Pos(), err)
			}
		} else if err != nil {
			m.fatalf("handle %d: Commit at %#x: %v", h, res.r.Pos(), err)
		} else {
			m.frames[res.frame].state = _fCommitted
		}
		if err := res.r.Commit(); err == nil {
			m.fatalf("handle %d: second Commit at %#x succeeded", h, res.r.Pos())
		}
	case 4: // Close one Log, abandoning its Reservations
		h, fh := m.handle()
		if fh == nil {
			return
		}
		m.closeHandle(h)
		if err := fh.l.Close(); !errors.Is(err, shmlog.ErrClosed) {
			m.fatalf("handle %d: second Close: %v, want ErrClosed", h, err)
		}
		if _, err := fh.l.Append([]byte("x")); !errors.Is(err, shmlog.ErrClosed) {
			m.fatalf("handle %d: Append after Close: %v, want ErrClosed", h, err)
		}
		if err := fh.l.Sync(context.Background()); !errors.Is(err, shmlog.ErrClosed) {
			m.fatalf("handle %d: Sync after Close: %v, want ErrClosed", h, err)
		}
	case 5: // Open
		h, fh := m.handle()
		size := _modelFileSizes[int(m.next())%len(_modelFileSizes)]
		if fh == nil {
			m.open(h, size)
		}
	case 6: // Sync
		h, fh := m.handle()
		if fh == nil {
			return
		}
		if err := fh.l.Sync(context.Background()); err != nil {
			m.fatalf("handle %d: Sync: %v", h, err)
		}
	case 7: // Open a Reader
		m.openReader()
	case 8, 9: // Read k records
		i := int(m.next()) % len(m.readers)
		k := int(m.next()%8) + 1
		if rd := m.readers[i]; rd != nil {
			m.read(i, rd, k)
		}
	case 10: // Wait with a cancelled context
		i := int(m.next()) % len(m.readers)
		if rd := m.readers[i]; rd != nil {
			m.waitCancelled(i, rd)
		}
	case 11: // Close a Reader
		i := int(m.next()) % len(m.readers)
		if rd := m.readers[i]; rd != nil {
			if err := rd.r.Close(); err != nil {
				m.fatalf("reader %d: Close: %v", i, err)
			}
			m.readers[i] = nil
			if _, _, err := rd.r.Next(); !errors.Is(err, shmlog.ErrClosed) {
				m.fatalf("reader %d: Next after Close: %v, want ErrClosed", i, err)
			}
		}
	case 12: // Verify
		m.verify()
	case 13: // Close everything, then reopen one Log
		m.closeAll()
		m.open(int(m.next())%len(m.handles), _modelFileSizes[int(m.next())%len(_modelFileSizes)])
	case 14: // Commit a Reservation of a closed Log
		j := int(m.next())
		if len(m.gone) == 0 {
			return
		}
		r := m.gone[j%len(m.gone)]
		if b := r.Bytes(); b != nil {
			m.fatalf("Bytes of a Reservation of a closed Log: %d bytes, want nil", len(b))
		}
		if err := r.Commit(); !errors.Is(err, shmlog.ErrClosed) {
			m.fatalf("Commit at %#x after its Log's Close: %v, want ErrClosed", r.Pos(), err)
		}
	case 15: // Stats
		h, fh := m.handle()
		if fh == nil {
			return
		}
		s := fh.l.Stats()
		if s.ActiveFile != m.cur || s.ActiveBytes != min(m.tail, m.capacity) || s.Capacity != m.capacity || s.Padded != m.padded {
			m.fatalf("handle %d: Stats %+v; want file %d of %d bytes, capacity %d, padded %d", h, s, m.cur, min(m.tail, m.capacity), m.capacity, m.padded)
		}
	}
}

func (m *shmModel) open(h int, size int64) {
	alone := !m.anyOpen()
	l, err := shmlog.Open(m.path, &shmlog.Options{MaxFileSize: size, CommitTimeout: time.Nanosecond})
	if err != nil {
		m.fatalf("handle %d: Open: %v", h, err)
	}
	m.handles[h] = &fuzzHandle{l: l}
	want := 0
	if alone {
		// Recovery pads over the dead frames of the active file.
		for _, fr := range m.frames {
			if fr.state == _fDead && fr.pos>>32 == m.cur {
				fr.state = _fPadded
				want++
			}
		}
	}
	if rec := l.Recovery(); rec.Padded != want || rec.Damage != nil || rec.Cut != 0 {
		m.fatalf("handle %d: Open (alone %v): Recovery %+v; want %d padded, no damage, nothing cut", h, alone, rec, want)
	}
}

func (m *shmModel) closeHandle(h int) {
	fh := m.handles[h]
	if err := fh.l.Close(); err != nil {
		m.fatalf("handle %d: Close: %v", h, err)
	}
	for _, res := range fh.pending {
		if m.frames[res.frame].state == _fPending {
			m.frames[res.frame].state = _fDead
		}
		m.gone = append(m.gone, res.r)
	}
	m.handles[h] = nil
}

func (m *shmModel) closeAll() {
	for i, rd := range m.readers {
		if rd != nil {
			rd.r.Close()
			m.readers[i] = nil
		}
	}
	for h, fh := range m.handles {
		if fh != nil {
			m.closeHandle(h)
		}
	}
}

func (m *shmModel) openReader() {
	i := int(m.next()) % len(m.readers)
	mode := m.next() % 7
	j := int(m.next())
	if m.readers[i] != nil {
		return
	}
	var l *shmlog.Log
	for _, fh := range m.handles {
		if fh != nil {
			l = fh.l
			break
		}
	}
	if mode == 0 || mode == 6 || l == nil {
		o := &shmlog.Options{CommitTimeout: time.Nanosecond}
		if mode == 6 {
			o.LiveTimeout = time.Nanosecond
		}
		r, err := shmlog.OpenReader(m.path, o)
		if err != nil {
			m.fatalf("reader %d: OpenReader: %v", i, err)
		}
		m.readers[i] = &fuzzReader{r: r, impatient: mode == 6}
		return
	}
	var from uint64
	at := -1 // -1: NewReader must refuse from; -2: either is right
	switch mode {
	case 1: // a position Reserve or Append returned
		if len(m.frames) == 0 {
			return
		}
		at = j % len(m.frames)
		from = m.frames[at].pos
	case 2: // inside a frame
		if len(m.frames) == 0 {
			return
		}
		fr := m.frames[j%len(m.frames)]
		from = fr.pos + 8*uint64(1+j%2)
		if from&0xffffffff >= fr.pos&0xffffffff+frameBytes(len(fr.data)) {
			return
		}
		if m.capacity-from&0xffffffff < 16 {
			// NewReader accepts a position too near the end of a file
			// for a frame to start there (checkStart): the doc says it
			// refuses positions where no frame starts.
			at = -2
		}
	case 3: // past the end
		from = m.cur<<32 | (m.tail + 8*uint64(1+j%4))
		if m.tail+8*uint64(1+j%4) <= m.capacity && m.capacity-(m.tail+8*uint64(1+j%4)) < 16 {
			at = -2
		}
	case 4: // the end
		from = m.cur<<32 | m.tail
		if m.tail > m.capacity {
			return
		}
		at = len(m.frames)
	case 5: // a file that does not exist, or an unaligned position
		from = (m.cur+1)<<32 | uint64(j%2)*4
		if j%3 == 0 && len(m.frames) > 0 {
			from = m.frames[j%len(m.frames)].pos + 4
		}
	}
	r, err := l.NewReader(from)
	switch {
	case at == -1 && err == nil:
		r.Close()
		m.fatalf("reader %d: NewReader(%#x) accepted a position where no frame starts (end %#x)", i, from, m.cur<<32|m.tail)
	case at == -2 && err == nil:
		r.Close()
	case at >= 0 && err != nil:
		m.fatalf("reader %d: NewReader(%#x): %v", i, from, err)
	case at >= 0:
		m.readers[i] = &fuzzReader{r: r, at: at}
	}
}

// ahead returns, for rd, the index of the next record it can read (-1:
// none yet), the frames it pads over on the way (dead, or pending too if
// rd is impatient), and the index it stops at.
func (m *shmModel) ahead(rd *fuzzReader) (rec, dead, stop int) {
	for i := rd.at; i < len(m.frames); i++ {
		switch m.frames[i].state {
		case _fDead:
			dead++
		case _fCommitted:
			return i, dead, i
		case _fPending:
			if !rd.impatient {
				return -1, dead, i
			}
			dead++
		}
	}
	return -1, dead, len(m.frames)
}

// sawPadding accounts for the frames rd padded over since the last look:
// the first dead frames from rd.at.
func (m *shmModel) sawPadding(i int, rd *fuzzReader) {
	got := rd.r.Padded()
	if got < rd.padded {
		m.fatalf("reader %d: Padded went down from %d to %d", i, rd.padded, got)
	}
	k := got - rd.padded
	for j := rd.at; j < len(m.frames) && k > 0; j++ {
		fr := m.frames[j]
		if fr.state == _fCommitted || fr.state == _fPending && !rd.impatient {
			break
		}
		if fr.state == _fDead || fr.state == _fPending {
			fr.state = _fPadded
			k--
			rd.padded++
			m.padded++
		}
	}
	if k > 0 {
		m.fatalf("reader %d: Padded %d: %d more frames than were dead", i, got, k)
	}
}

func (m *shmModel) checkRec(i int, rd *fuzzReader, rec shmlog.Record, want int) {
	if want < 0 {
		m.fatalf("reader %d: read a record at %#x (%d bytes) where the model has none", i, rec.Pos, len(rec.Payload))
	}
	fr := m.frames[want]
	if rec.Pos != fr.pos || !bytes.Equal(rec.Payload, fr.data) {
		m.fatalf("reader %d: read %#x (%d bytes), want %#x (%d bytes, equal %v)", i, rec.Pos, len(rec.Payload), fr.pos, len(fr.data), bytes.Equal(rec.Payload, fr.data))
	}
}

func (m *shmModel) read(i int, rd *fuzzReader, k int) {
	for range k {
		want, dead, stop := m.ahead(rd)
		var rec shmlog.Record
		ok := false
		// A dead frame takes one Next to notice and one more to pad.
		for try := 0; try < 3*dead+3 && !ok; try++ {
			var err error
			rec, ok, err = rd.r.Next()
			if err != nil {
				m.fatalf("reader %d: Next: %v", i, err)
			}
		}
		m.sawPadding(i, rd)
		if !ok {
			if want >= 0 {
				m.fatalf("reader %d: no record, want %#x", i, m.frames[want].pos)
			}
			if _, d, _ := m.ahead(rd); d != 0 {
				m.fatalf("reader %d: %d of %d dead frames before %d not padded over", i, d, dead, stop)
			}
			return
		}
		m.checkRec(i, rd, rec, want)
		if _, d, _ := m.ahead(rd); d != 0 {
			m.fatalf("reader %d: read %#x past %d dead frames not counted in Padded", i, rec.Pos, d)
		}
		rd.at = want + 1
	}
}

func (m *shmModel) waitCancelled(i int, rd *fuzzReader) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := rd.r.Wait(ctx)
	want, dead, _ := m.ahead(rd)
	m.sawPadding(i, rd)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			m.fatalf("reader %d: Wait: %v, want context.Canceled", i, err)
		}
		if want >= 0 && dead == 0 {
			m.fatalf("reader %d: Wait: %v with record %#x ready", i, err, m.frames[want].pos)
		}
		return
	}
	rec, ok, err := rd.r.Next()
	if !ok || err != nil {
		m.fatalf("reader %d: Next after Wait: %v %v", i, ok, err)
	}
	m.checkRec(i, rd, rec, want)
	rd.at = want + 1
}

func (m *shmModel) verify() {
	var records, dead uint64
	for _, fr := range m.frames {
		switch fr.state {
		case _fPending:
			return // Verify would wait for it, then fail
		case _fCommitted:
			records++
		case _fDead:
			dead++
		}
	}
	next := 0
	st, err := shmlog.Verify(m.path, func(rec shmlog.Record) error {
		for next < len(m.frames) && m.frames[next].state != _fCommitted {
			next++
		}
		if next == len(m.frames) {
			return fmt.Errorf("record %#x past the model's last", rec.Pos)
		}
		fr := m.frames[next]
		next++
		if rec.Pos != fr.pos || !bytes.Equal(rec.Payload, fr.data) {
			return fmt.Errorf("record %#x (%d bytes), want %#x (%d bytes)", rec.Pos, len(rec.Payload), fr.pos, len(fr.data))
		}
		return nil
	})
	if err != nil {
		m.fatalf("Verify: %v", err)
	}
	if want := (shmlog.Stats{Records: records, Padded: dead, Files: m.cur + 1}); st != want {
		m.fatalf("Verify: %+v, want %+v", st, want)
	}
	for _, fr := range m.frames {
		if fr.state == _fDead {
			fr.state = _fPadded
		}
	}
	m.padded += dead
}

// finish closes everything and checks the whole log once more.
func (m *shmModel) finish() {
	m.closeAll()
	m.verify()
}
