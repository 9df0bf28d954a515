package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// The operations of FuzzGroupModel, one input byte each (modulo
// _gmOps), most followed by an argument byte.
const (
	_gmPublish     = iota // publish 1..4 records
	_gmNext               // Next: a record if the model has one, else a short wait
	_gmNextDone           // Next with a cancelled context
	_gmAck                // Ack of a delivered, acked, undelivered or future record
	_gmNack               // Nack, likewise
	_gmNackMsg            // NackMsg of the current, a stale or a zero delivery
	_gmSleep              // let AckWait pass (groups with a short AckWait)
	_gmCheckpoint         // Checkpoint
	_gmClose              // Group.Close
	_gmReopen             // open the group again, with options from the argument
	_gmStoreReopen        // Store.Close and Open again
	_gmDelete             // DeleteGroup: of a closed, an open or no group
	_gmOps
)

// The AckWaits of FuzzGroupModel's groups, besides never: with the
// short one the timer expires deliveries between operations, unseen, and
// the model allows for it; the slow one is long enough that they expire
// only in a _gmSleep, which waits for the timer to act (a run too slow
// for that is skipped), and only with it may the timer make records dead.
const (
	_gmAckWait     = 4 * time.Millisecond
	_gmSlowAckWait = 50 * time.Millisecond
)

// mrec is the model's state of a record delivered in a group's current
// life (since it was last opened).
type mrec struct {
	n      int       // deliveries so far
	at     time.Time // when the last began (before Next was called)
	queued bool      // nacked (or, with a short AckWait, seen expired): in redo
	acked  bool      // acked, by Ack or by dying
}

// gmodel is what the documentation promises of one group.
type gmodel struct {
	name   string
	g      *Group // the last handle opened, closed or not
	open   bool
	exists bool   // created and not deleted
	pos    uint64 // the committed position written by the last close
	opts   GroupOptions

	// The current life.
	start uint64 // committed position at open
	next  uint64 // the fresh record delivered next
	recs  map[uint64]*mrec
	redo  []uint64 // sorted: records queued again, acked ones included until Next passes them
	msgs  []Msg    // every delivery of this life, Data dropped
	// Counters since open.
	delivered, redelivered, acked, nacked, dead uint64

	mu      sync.Mutex
	reports []deadReport // OnDead calls, protected by mu
	want    []deadReport // the OnDead calls the model expects
}

type deadReport struct {
	seq uint64
	n   int
}

func (m *gmodel) short() bool { return m.opts.AckWait == _gmAckWait }

func (m *gmodel) slow() bool { return m.opts.AckWait == _gmSlowAckWait }

// optByte encodes m's options as options decodes them.
func (m *gmodel) optByte() byte {
	b := byte(m.opts.MaxDeliver<<1 | m.opts.MaxAckPending<<3)
	if m.short() {
		b |= 1
	}
	if m.slow() {
		b |= 0x40
	}
	return b
}

// late reports whether a record of m, delivered and not acked, outlived
// its AckWait in a slow group: the timer may have acted unseen.
func (m *gmodel) late(now time.Time) bool {
	if !m.open || !m.slow() {
		return false
	}
	for _, rc := range m.recs {
		if !rc.acked && !rc.queued && now.Sub(rc.at) >= m.opts.AckWait {
			return true
		}
	}
	return false
}

func (m *gmodel) window() uint64 {
	if m.opts.MaxAckPending == 0 {
		return DefaultMaxAckPending
	}
	return uint64(m.opts.MaxAckPending)
}

// queue records that record seq, rc, was queued to go out again.
func (m *gmodel) queue(rc *mrec, seq uint64) {
	rc.queued = true
	i, _ := slices.BinarySearch(m.redo, seq)
	m.redo = slices.Insert(m.redo, i, seq)
}

// queuedRedo returns the records queued to go out again: m.redo without
// the acked ones.
func (m *gmodel) queuedRedo() int {
	n := 0
	for _, s := range m.redo {
		if !m.recs[s].acked {
			n++
		}
	}
	return n
}

// committed is the lowest record of this life not acked.
func (m *gmodel) committed() uint64 {
	for s := m.start; s < m.next; s++ {
		if r := m.recs[s]; r == nil || !r.acked {
			return s
		}
	}
	return m.next
}

// eligible reports whether record r, delivered and not acked, may have
// expired (its AckWait passed) unseen by the model.
func (m *gmodel) eligible(r *mrec, now time.Time) bool {
	return m.short() && !r.acked && !r.queued && now.Sub(r.at) >= m.opts.AckWait
}

// modelRun is one run of FuzzGroupModel.
type modelRun struct {
	t      *testing.T
	mem    *vfs.MemFS
	st     *Store
	s      *Stream
	cfg    Config
	end    uint64 // the sequence number the next Publish gets
	groups []*gmodel
	step   int
	log    []string
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	for _, m := range r.groups {
		if m.late(time.Now()) {
			r.t.Skipf("step %d: too slow for group %s's AckWait: %s", r.step, m.name, fmt.Sprintf(format, args...))
		}
	}
	r.t.Fatalf("step %d: %s\nops:\n%s", r.step, fmt.Sprintf(format, args...), strings.Join(r.log, "\n"))
}

func (r *modelRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf("%3d ", r.step)+fmt.Sprintf(format, args...))
}

func payload(seq uint64) string { return fmt.Sprintf("rec-%d", seq) }

// options decodes a group's options from b.
func (r *modelRun) options(m *gmodel, b byte) *GroupOptions {
	o := &GroupOptions{AckWait: math.MaxInt64, CheckpointEvery: time.Hour}
	switch {
	case b&1 != 0:
		// Deaths only where the model knows when they happen: not from
		// the timer of a short AckWait.
		o.AckWait = _gmAckWait
	case b&0x40 != 0:
		o.AckWait = _gmSlowAckWait
		o.MaxDeliver = int(b>>1) % 4
	default:
		o.MaxDeliver = int(b>>1) % 4
	}
	o.MaxAckPending = int(b>>3) % 5 // 0: the default
	o.OnDead = func(seq uint64, n int) {
		m.mu.Lock()
		m.reports = append(m.reports, deadReport{seq, n})
		m.mu.Unlock()
	}
	return o
}

// openGroup opens group m with options from b and starts its model's life.
func (r *modelRun) openGroup(m *gmodel, b byte) {
	o := r.options(m, b)
	g, err := r.s.Group(m.name, o)
	if err != nil {
		r.fatalf("open group %s: %v", m.name, err)
	}
	if !m.exists {
		m.pos = 1 // a new group: the stream's first record (nothing is ever deleted here)
	}
	m.g, m.open, m.exists, m.opts = g, true, true, *o
	m.start, m.next = m.pos, m.pos
	m.recs = map[uint64]*mrec{}
	m.redo, m.msgs = nil, nil
	m.delivered, m.redelivered, m.acked, m.nacked, m.dead = 0, 0, 0, 0, 0
	m.mu.Lock()
	m.reports = nil
	m.mu.Unlock()
	m.want = nil
	r.logf("open %s %+v", m.name, GroupOptions{AckWait: o.AckWait, MaxDeliver: o.MaxDeliver, MaxAckPending: o.MaxAckPending})
	r.check(m)
}

// closed records a group closed cleanly: its position is written.
func (m *gmodel) closed() {
	m.pos = m.committed()
	m.open = false
}

func (r *modelRun) openStore() {
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: r.mem})
	if err != nil {
		r.fatalf("open store: %v", err)
	}
	r.st = st
	s, err := st.Stream("s")
	if errors.Is(err, ErrNotFound) {
		s, err = st.Create("s", &r.cfg)
	}
	if err != nil {
		r.fatalf("stream: %v", err)
	}
	r.s = s
}

// isErr checks that err is want (nil for none).
func (r *modelRun) isErr(what string, err, want error) {
	r.t.Helper()
	if want == nil {
		if err != nil {
			r.fatalf("%s = %v, want nil", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		r.fatalf("%s = %v, want %v", what, err, want)
	}
}

// check compares group m with its model.
func (r *modelRun) check(m *gmodel) {
	r.t.Helper()
	m.mu.Lock()
	got := slices.Clone(m.reports)
	m.mu.Unlock()
	if !slices.Equal(got, m.want) {
		r.fatalf("group %s: OnDead calls %v, want %v", m.name, got, m.want)
	}
	if !m.open {
		return
	}
	st := m.g.Stats()
	var pending int
	for s := m.start; s < m.next; s++ {
		if rc := m.recs[s]; rc != nil && !rc.acked {
			pending++
		}
	}
	want := GroupStats{
		Committed: m.committed(), Next: m.next,
		Delivered: m.delivered, Redelivered: m.redelivered,
		Acked: m.acked, Nacked: m.nacked, Dead: m.dead,
		Pending: pending, Redeliveries: m.queuedRedo(),
	}
	gotc := GroupStats{
		Committed: st.Committed, Next: st.Next,
		Delivered: st.Delivered, Redelivered: st.Redelivered,
		Acked: st.Acked, Nacked: st.Nacked, Dead: st.Dead,
		Pending: st.Pending, Redeliveries: st.Redeliveries,
	}
	if m.short() {
		// Records expired by the timer, unseen yet, are queued too.
		if gotc.Redeliveries < want.Redeliveries {
			r.fatalf("group %s: Stats %+v, want at least %d redeliveries queued", m.name, gotc, want.Redeliveries)
		}
		gotc.Redeliveries = want.Redeliveries
	}
	if gotc != want {
		r.fatalf("group %s: Stats\n got %+v\nwant %+v", m.name, gotc, want)
	}
	if c := m.g.Committed(); c != want.Committed {
		r.fatalf("group %s: Committed %d, want %d", m.name, c, want.Committed)
	}
}

// next calls Next on group m and checks what it returns.
func (r *modelRun) next(m *gmodel) {
	r.t.Helper()
	if !m.open {
		_, err := m.g.Next(context.Background(), nil)
		r.logf("next %s (closed): %v", m.name, err)
		r.isErr("Next of a closed group", err, ErrClosed)
		return
	}
	// What the model delivers: the first queued record not acked, else the
	// next fresh one if the window has room.
	var want uint64
	i := 0
	for i < len(m.redo) && m.recs[m.redo[i]].acked {
		i++
	}
	fresh := false
	switch {
	case i < len(m.redo):
		want = m.redo[i]
	case m.next < r.end && m.next-m.committed() < m.window():
		want, fresh = m.next, true
	}
	wait := 10 * time.Second
	if want == 0 {
		wait = 2 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	at := time.Now()
	msg, err := m.g.Next(ctx, nil)
	// A record the timer expired, before or while Next waited, may come.
	now := time.Now()
	maybe := false
	for s := m.committed(); s < m.next; s++ {
		if rc := m.recs[s]; rc != nil && m.eligible(rc, now) && (want == 0 || s < want) {
			maybe = true
		}
	}
	r.logf("next %s: want %d (maybe expired %v): %d/%d %v", m.name, want, maybe, msg.Seq, msg.Delivery, err)
	if err != nil {
		if want == 0 && errors.Is(err, context.DeadlineExceeded) {
			m.redo = m.redo[i:] // Next passed the acked ones
			return
		}
		r.fatalf("group %s: Next = %v, want record %d", m.name, err, want)
	}
	if string(msg.Data) != payload(msg.Seq) {
		r.fatalf("group %s: Next = record %d %q, want %q", m.name, msg.Seq, msg.Data, payload(msg.Seq))
	}
	if msg.Seq != want {
		rc := m.recs[msg.Seq]
		if !maybe || rc == nil || !m.eligible(rc, now) || (want != 0 && msg.Seq > want) {
			r.fatalf("group %s: Next = record %d delivery %d, want %d", m.name, msg.Seq, msg.Delivery, want)
		}
		// Expired by the timer: it was queued.
		fresh = false
	}
	// The queued records before it were acked: Next passed them.
	for len(m.redo) > 0 && m.redo[0] < msg.Seq {
		m.redo = m.redo[1:]
	}
	if fresh {
		if msg.Delivery != 1 {
			r.fatalf("group %s: fresh record %d has Delivery %d, want 1", m.name, msg.Seq, msg.Delivery)
		}
		m.recs[msg.Seq] = &mrec{n: 1, at: at}
		m.next++
		m.delivered++
	} else {
		rc := m.recs[msg.Seq]
		if msg.Delivery != rc.n+1 {
			r.fatalf("group %s: redelivered record %d has Delivery %d, want %d", m.name, msg.Seq, msg.Delivery, rc.n+1)
		}
		if len(m.redo) > 0 && m.redo[0] == msg.Seq {
			m.redo = m.redo[1:]
		}
		rc.n++
		rc.at, rc.queued = at, false
		m.redelivered++
	}
	msg.Data = nil
	m.msgs = append(m.msgs, msg)
}

// pick returns a record for Ack or Nack, by b: a delivered one, an acked
// one, a fresh one, a future one, 0, or one below the position.
func (r *modelRun) pick(m *gmodel, b byte) uint64 {
	var out, acked []uint64
	for s, rc := range m.recs {
		if rc.acked {
			acked = append(acked, s)
		} else {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	slices.Sort(acked)
	k := int(b >> 3)
	switch b % 8 {
	case 0, 1, 2:
		if len(out) > 0 {
			return out[k%len(out)]
		}
	case 3:
		if len(acked) > 0 {
			return acked[k%len(acked)]
		}
	case 4:
		return m.next + uint64(k%3) // not delivered, published or not
	case 5:
		return r.end + uint64(k%3)
	case 6:
		return 0
	}
	return m.start - uint64(min(int(m.start)-1, k%3)) // at or below the position
}

func (r *modelRun) ack(m *gmodel, seq uint64) {
	r.t.Helper()
	err := m.g.Ack(seq)
	r.logf("ack %s %d: %v", m.name, seq, err)
	rc := m.recs[seq]
	switch {
	case seq < m.committed():
		r.isErr("Ack below the committed position", err, nil)
	case !m.open:
		r.isErr("Ack after Close", err, ErrClosed)
	case rc == nil:
		r.isErr("Ack of a record not delivered", err, ErrNotDelivered)
	case rc.acked:
		r.isErr("Ack of an acked record", err, nil)
	default:
		r.isErr("Ack of a delivered record", err, nil)
		rc.acked = true
		m.acked++
	}
}

// nack nacks seq, delivery d of it if d is not 0 (NackMsg).
func (r *modelRun) nack(m *gmodel, seq uint64, d int, msg bool) {
	r.t.Helper()
	var err error
	if msg {
		err = m.g.NackMsg(Msg{Seq: seq, Delivery: d})
	} else {
		err = m.g.Nack(seq)
	}
	r.logf("nack %s %d delivery %d (msg %v): %v", m.name, seq, d, msg, err)
	rc := m.recs[seq]
	what := "Nack"
	if msg {
		what = fmt.Sprintf("NackMsg of delivery %d", d)
	}
	switch {
	case msg && d < 1:
		r.isErr(what+" (deliveries count from 1)", err, ErrNotDelivered)
		return
	case !m.open:
		r.isErr(what+" after Close", err, ErrClosed)
		return
	case rc == nil || rc.acked:
		r.isErr(what+" of a record not delivered or acked", err, ErrNotDelivered)
		return
	case msg && d != rc.n:
		r.isErr(what+fmt.Sprintf(" of record %d, a stale delivery (current %d)", seq, rc.n), err, ErrNotDelivered)
		return
	}
	if !rc.queued && m.eligible(rc, time.Now()) {
		// The timer may have queued it, unseen.
		if msg && errors.Is(err, ErrNotDelivered) {
			m.queue(rc, seq)
			return
		}
		r.isErr(what+" of an expired record", err, nil)
		m.nacked++
		m.queue(rc, seq)
		return
	}
	if rc.queued {
		if msg {
			// Doc: a delivery another member nacked is no longer current:
			// the record, queued to go out again, is left as it is.
			r.isErr(what+fmt.Sprintf(" of record %d, nacked already and queued", seq), err, ErrNotDelivered)
			return
		}
		r.isErr(what+" of a queued record", err, nil)
		m.nacked++ // counts the call; the record stays queued
		return
	}
	r.isErr(what, err, nil)
	m.nacked++
	if m.opts.MaxDeliver > 0 && rc.n >= m.opts.MaxDeliver {
		rc.acked = true
		m.dead++
		m.want = append(m.want, deadReport{seq, rc.n})
		return
	}
	m.queue(rc, seq)
}

// settle lets every delivery of slow group m expire and waits for the
// timer to act on them all: each is queued to go out again, or, after
// MaxDeliver deliveries, dead and reported to OnDead.
func (r *modelRun) settle(m *gmodel) {
	r.t.Helper()
	var last time.Time
	var expire []uint64
	for s, rc := range m.recs {
		if !rc.acked && !rc.queued {
			expire = append(expire, s)
			if rc.at.After(last) {
				last = rc.at
			}
		}
	}
	slices.Sort(expire)
	if len(expire) == 0 {
		return
	}
	// A record goes out again within two timer periods after its AckWait.
	time.Sleep(time.Until(last.Add(m.opts.AckWait + 2*timerPeriod(&m.opts))))
	var died []deadReport
	redo := slices.Clone(m.redo)
	for _, s := range expire {
		if rc := m.recs[s]; m.opts.MaxDeliver > 0 && rc.n >= m.opts.MaxDeliver {
			died = append(died, deadReport{s, rc.n})
		} else {
			i, _ := slices.BinarySearch(redo, s)
			redo = slices.Insert(redo, i, s)
		}
	}
	want := append(slices.Clone(m.want), died...)
	// Timers run late on a loaded machine: allow a few seconds.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := m.g.Stats()
		m.mu.Lock()
		n := len(m.reports)
		m.mu.Unlock()
		if st.Redeliveries == m.queuedRedo()+len(expire)-len(died) && st.Dead == m.dead+uint64(len(died)) && n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("step %d: group %s: 5 s after AckWait: Stats %+v, OnDead calls %d; want %d queued (%v), %d dead (%v)\nops:\n%s",
				r.step, m.name, st, n, len(redo), redo, m.dead+uint64(len(died)), died, strings.Join(r.log, "\n"))
		}
		time.Sleep(time.Millisecond)
	}
	m.mu.Lock()
	// One pass reports its deaths in order; two passes may have split them.
	slices.SortFunc(m.reports[len(m.want):], func(a, b deadReport) int { return int(a.seq) - int(b.seq) })
	m.mu.Unlock()
	for _, d := range died {
		m.recs[d.seq].acked = true
		m.dead++
	}
	for _, s := range expire {
		if rc := m.recs[s]; !rc.acked {
			rc.queued = true
		}
	}
	m.redo, m.want = redo, want
	r.logf("settle %s: expired %v, dead %v", m.name, expire, died)
}

// FuzzGroupModel runs a sequence of operations, decoded from its input,
// on one stream and one or two of its groups, and checks each result and
// the groups' Stats against a model of what the documentation promises
// (see gmodel): queued records go out first, lowest first, then fresh
// ones in order within MaxAckPending of the committed position; an acked
// record never comes again in the group's life; Delivery counts 1, 2, 3…;
// a record nacked or expired after MaxDeliver deliveries is dead once,
// and reported; after Close or Store.Close the group reopens at its
// lowest unacked record; misuse gets the documented error (ErrClosed,
// ErrNotDelivered, ErrGroupOpen, ErrNoGroup); OnDead calls and Stats
// counters match. It runs on one goroutine; with a short AckWait the
// groups' timers expire deliveries meanwhile, which the model allows for.
func FuzzGroupModel(f *testing.F) {
	op := func(o, arg byte) []byte { return []byte{o, arg} }
	seq := func(cfg byte, ops ...[]byte) []byte { return slices.Concat(append([][]byte{{cfg}}, ops...)...) }
	f.Add(seq(0,
		op(_gmPublish, 3), op(_gmNext, 0), op(_gmNext, 0), op(_gmAck, 0), op(_gmNack, 0),
		op(_gmNext, 0), op(_gmNackMsg, 0), op(_gmNackMsg, 1), op(_gmNext, 0), op(_gmAck, 3),
		op(_gmAck, 4), op(_gmAck, 5), op(_gmClose, 0), op(_gmAck, 0), op(_gmAck, 3),
		op(_gmReopen, 0), op(_gmNext, 0), op(_gmNext, 0), op(_gmNext, 0)))
	// MaxDeliver 2: nacked twice, dead.
	f.Add(seq(0,
		op(_gmReopen, 4), op(_gmPublish, 1), op(_gmNext, 0), op(_gmNack, 0), op(_gmNext, 0),
		op(_gmNack, 0), op(_gmNext, 0), op(_gmNackMsg, 2), op(_gmCheckpoint, 0), op(_gmStoreReopen, 0),
		op(_gmNext, 0), op(_gmNext, 0)))
	// Short AckWait: deliveries expire and come again.
	f.Add(seq(0,
		op(_gmReopen, 1), op(_gmPublish, 2), op(_gmNext, 0), op(_gmNext, 0), op(_gmSleep, 0),
		op(_gmNext, 0), op(_gmNackMsg, 1), op(_gmNext, 0), op(_gmAck, 0), op(_gmSleep, 0),
		op(_gmNext, 0), op(_gmNext, 0), op(_gmAck, 1)))
	// Two groups, a window of one, delete and recreate.
	f.Add(seq(3,
		op(_gmPublish, 3), op(_gmNext, 1), op(_gmNext, 1), op(_gmReopen, 9), op(_gmNext, 0),
		op(_gmNext, 0), op(_gmAck, 0), op(_gmNext, 0), op(_gmDelete, 0), op(_gmClose, 0),
		op(_gmDelete, 0), op(_gmReopen, 0), op(_gmNext, 0), op(_gmDelete, 2), op(_gmStoreReopen, 0),
		op(_gmNext, 1)))
	// A delivery nacked, then nacked again by its Msg; acks after Close.
	f.Add(seq(0,
		op(_gmPublish, 1), op(_gmNext, 0), op(_gmNext, 0), op(_gmNack, 8), op(_gmNackMsg, 0),
		op(_gmClose, 0), op(_gmAck, 0), op(_gmAck, 0), op(_gmAck, 1)))
	// AckWait 50 ms, MaxDeliver 2: expired twice, dead from the timer.
	f.Add(seq(0,
		op(_gmReopen, 0x44), op(_gmPublish, 1), op(_gmNext, 0), op(_gmNext, 0), op(_gmSleep, 0),
		op(_gmNext, 0), op(_gmNext, 0), op(_gmAck, 0), op(_gmSleep, 0), op(_gmNext, 0),
		op(_gmPublish, 0), op(_gmNext, 0), op(_gmClose, 0), op(_gmReopen, 0x44), op(_gmNext, 0)))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > 200 {
			return
		}
		r := &modelRun{t: t, mem: vfs.NewMem(), end: 1}
		r.cfg.Retention.UntilAcked = in[0]&1 != 0
		r.openStore()
		defer func() {
			for _, m := range r.groups {
				noErr(t, m.g.Close())
			}
			noErr(t, r.st.Close())
		}()
		r.groups = []*gmodel{{name: "g"}}
		if in[0]&2 != 0 {
			r.groups = append(r.groups, &gmodel{name: "h"})
		}
		for _, m := range r.groups {
			r.openGroup(m, 0)
		}
		for i := 1; i < len(in); i += 2 {
			r.step++
			o := in[i] % _gmOps
			var arg byte
			if i+1 < len(in) {
				arg = in[i+1]
			}
			m := r.groups[int(arg>>7)%len(r.groups)]
			arg &= 0x7f
			switch o {
			case _gmPublish:
				for range 1 + arg%4 {
					seq, err := r.s.Publish([]byte(payload(r.end)))
					if err != nil || seq != r.end {
						r.fatalf("Publish = %d, %v, want %d", seq, err, r.end)
					}
					r.end++
				}
				r.logf("publish: next %d", r.end)
			case _gmNext:
				r.next(m)
			case _gmNextDone:
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				msg, err := m.g.Next(ctx, nil)
				r.logf("next %s cancelled: %d %v", m.name, msg.Seq, err)
				r.isErr("Next with a cancelled context", err, context.Canceled)
			case _gmAck:
				r.ack(m, r.pick(m, arg))
			case _gmNack:
				r.nack(m, r.pick(m, arg), 0, false)
			case _gmNackMsg:
				if len(m.msgs) == 0 {
					r.nack(m, r.pick(m, arg), int(arg%3), true)
					break
				}
				msg := m.msgs[int(arg>>1)%len(m.msgs)]
				if arg&1 == 0 { // its current delivery
					msg = m.msgs[len(m.msgs)-1-int(arg>>1)%len(m.msgs)]
					if rc := m.recs[msg.Seq]; rc != nil {
						msg.Delivery = rc.n
					}
				}
				r.nack(m, msg.Seq, msg.Delivery, true)
			case _gmSleep:
				switch {
				case m.short():
					time.Sleep(2 * _gmAckWait)
				case m.slow() && m.open:
					r.settle(m)
				}
				r.logf("sleep")
			case _gmCheckpoint:
				err := m.g.Checkpoint()
				r.logf("checkpoint %s: %v", m.name, err)
				if m.open {
					r.isErr("Checkpoint", err, nil)
				} else {
					r.isErr("Checkpoint after Close", err, ErrClosed)
				}
			case _gmClose:
				err := m.g.Close()
				r.logf("close %s: %v", m.name, err)
				r.isErr("Close", err, nil)
				if m.open {
					m.closed()
				}
			case _gmReopen:
				if m.open {
					noErr(t, m.g.Close())
					m.closed()
				}
				r.openGroup(m, arg)
			case _gmStoreReopen:
				err := r.st.Close()
				r.logf("store close: %v", err)
				r.isErr("Store.Close", err, nil)
				for _, m := range r.groups {
					if m.open {
						m.closed()
						r.isErr("Next after Store.Close", func() error { _, err := m.g.Next(context.Background(), nil); return err }(), ErrClosed)
					}
				}
				r.openStore()
				for _, m := range r.groups {
					if m.exists {
						r.openGroup(m, m.optByte())
					}
				}
			case _gmDelete:
				name := m.name
				if arg%4 == 3 {
					name = "nogroup"
				}
				err := r.s.DeleteGroup(name)
				r.logf("delete %s: %v", name, err)
				switch {
				case name == "nogroup":
					r.isErr("DeleteGroup of no group", err, ErrNoGroup)
				case m.open:
					r.isErr("DeleteGroup of an open group", err, ErrGroupOpen)
				case !m.exists:
					r.isErr("DeleteGroup of a deleted group", err, ErrNoGroup)
				default:
					r.isErr("DeleteGroup", err, nil)
					m.exists = false
					if arg&1 == 0 {
						r.openGroup(m, arg>>1)
					}
				}
			}
			for _, m := range r.groups {
				r.check(m)
			}
		}
	})
}
