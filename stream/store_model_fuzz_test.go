package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/wal"
)

// The operations of FuzzStoreModel, one input byte each (modulo _smOps),
// followed by the argument bytes the operation reads.
const (
	_smCreate      = iota // create a stream: name, config
	_smStream             // Store.Stream: name
	_smDelete             // Store.Delete: name
	_smList               // Store.List
	_smPublish            // Publish: name, count and size
	_smBatch              // PublishBatch: name, count and size
	_smWait               // WaitDurable of the last record: name
	_smGroup              // Stream.Group (create or open): name, group
	_smNext               // Group.Next: name, group
	_smAck                // Group.Ack: name, group, pick
	_smNack               // Group.Nack: name, group, pick
	_smCheckpoint         // Group.Checkpoint: name, group
	_smGroupClose         // Group.Close: name, group
	_smGroups             // Stream.Groups: name
	_smReopen             // Store.Close, then Open
	_smCrash              // MemFS.Crash between operations: rng seed (0: nil rng), recovery cut
	_smCut                // a power cut during an operation: k (see below), recovery cut, operation, its arguments
	_smBadName            // a bad stream or group name: which name, which call
	_smDeleteGroup        // Stream.DeleteGroup: name, group (bit 1: Close it first)
	_smOps
)

// _smDir is the store's directory on the MemFS.
const _smDir = "/store"

// _smNames are the stream names the model uses: index 3 is as long as a
// name may be.
var _smNames = []string{"a", "b", "c.d-e_F", strings.Repeat("x", MaxName)}

// _smBadNames are names Create, Stream, Delete and Group refuse with
// ErrName; the last is a valid stream name too long for a group.
var _smBadNames = []string{
	"", ".", "..", "../x", "a/b", "/a", "a\x00b", strings.Repeat("n", MaxName+1),
	".new-a", ".del-a", "é", "a b", "a\\b", strings.Repeat("g", MaxGroupName+1),
}

// _smConfigs are the configurations streams are created with.
var _smConfigs = []Config{
	{},
	{SegmentSize: 64 << 10, Sync: wal.SyncBatch},
	{SegmentSize: 64 << 10, Sync: wal.SyncNever, MaxRecordSize: 4 << 10},
	{SegmentSize: 64 << 10, Sync: wal.SyncInterval, Retention: Retention{MaxAge: time.Hour}},
	{SegmentSize: 64 << 10, Retention: Retention{UntilAcked: true}},
	{SegmentSize: 64 << 10, Retention: Retention{MaxBytes: 128 << 10}},
	{SegmentSize: 64 << 10, Sync: wal.SyncNever, Retention: Retention{MaxBytes: 64 << 10, UntilAcked: true}},
	{SegmentSize: 128 << 10, Retention: Retention{UntilAcked: true, MaxAge: time.Hour}},
}

// _smSizes are the payload sizes of published records: the larger ones
// tear at sector boundaries, roll 64 KiB segments and exceed a MaxRecordSize
// of 4 KiB.
var _smSizes = []int{24, 300, 3000, 9000}

// smGroup is the model of one consumer group.
type smGroup struct {
	name string
	g    *Group // open in the current store, nil if closed
	// cands are the positions a group reopened after a power cut may
	// have: the last one written durably and any written since.
	cands []uint64
	// fresh is set until the group's first checkpoint: a power cut may
	// then leave its file without its position, and it starts at
	// startAt (0: the first record the stream holds).
	fresh   bool
	startAt uint64

	// The current life (since the group was opened).
	base      uint64
	next      uint64
	delivered []uint64 // records delivered, in order of first delivery
	acked     map[uint64]bool
	queued    map[uint64]bool
	redo      []uint64 // sorted; acked ones are passed by Next
}

func (m *smGroup) committed() uint64 {
	for s := m.base; s < m.next; s++ {
		if !m.acked[s] {
			return s
		}
	}
	return m.next
}

// smStream is the model of one stream.
type smStream struct {
	name    string
	cfg     Config
	h       *Stream  // from the current store, nil until asked
	recs    [][]byte // recs[i] is record i+1, as published
	durable uint64   // the last record WaitDurable (or a clean Close) confirmed
	groups  map[string]*smGroup
	// keep bounds the first record a stream kept UntilAcked (MaxBytes 0)
	// holds while it has no group (0: 1): the position of its last group
	// when DeleteGroup deleted it. With no group nothing is deleted.
	keep uint64
}

func (s *smStream) nextSeq() uint64 { return uint64(len(s.recs)) + 1 }

// deletes reports whether retention may delete records no group acked.
func (s *smStream) deletes() bool {
	return s.cfg.Retention.MaxBytes > 0 && !s.cfg.Retention.UntilAcked
}

// smInflight is an operation a power cut interrupted: its effect may or
// may not have survived.
type smInflight struct {
	op     byte
	stream string
	cfg    Config
	group  string
	// startAt is the StartAt of a group being created.
	startAt uint64
}

// smEpoch is one MemFS and the store opened on it, until a power cut.
type smEpoch struct {
	r    *smRun
	mem  *vfs.MemFS
	fsys vfs.FS

	// cutAt is the operation to cut the power before, 0: none; ops
	// counts the operations since it was set. Both are changed, and
	// the cut made, under mu.
	cutAt atomic.Int64
	ops   atomic.Int64
	seed  uint64

	mu    sync.Mutex
	after *vfs.MemFS // what the cut left; Protected by mu.
}

func (ep *smEpoch) cut() *vfs.MemFS {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.after
}

// arm cuts the power before the k-th file operation from now.
func (ep *smEpoch) arm(k int64) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.ops.Store(0)
	ep.cutAt.Store(k)
}

// disarm stops the count and returns what the cut left, nil if it did not
// fall. An operation of another goroutine in flight (a log's flusher)
// cut the power before disarm returns or does not count: a cut never
// falls after the model decided it did not.
func (ep *smEpoch) disarm() (after *vfs.MemFS, k int64) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	k = ep.cutAt.Swap(0)
	return ep.after, k
}

// smRun is one run of FuzzStoreModel.
type smRun struct {
	t       *testing.T
	idle    time.Duration
	ep      *smEpoch
	st      *Store
	streams map[string]*smStream
	gen     int // counts publishes, so that a record's bytes are its own
	step    int
	log     []string

	// recording counts the operations of a call that must touch nothing.
	recording atomic.Bool
	touched   atomic.Int64
	mu        sync.Mutex
	escaped   []string // paths outside the store. Protected by mu.
}

func (r *smRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("step %d: %s\nops:\n%s", r.step, fmt.Sprintf(format, args...), strings.Join(r.log, "\n"))
}

func (r *smRun) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if len(line) > 400 {
		line = line[:400] + "..."
	}
	r.log = append(r.log, fmt.Sprintf("%3d ", r.step)+line)
}

// isErr checks that err is want (nil for none).
func (r *smRun) isErr(what string, err, want error) {
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

// newEpoch wraps mem with the run's injector.
func (r *smRun) newEpoch(mem *vfs.MemFS) {
	ep := &smEpoch{r: r, mem: mem}
	ep.fsys = vfs.WithFaults(mem, func(op vfs.Op, name string, off int64, n int) (int, error) {
		r.observe(op, name)
		if ep.cutAt.Load() == 0 {
			return n, nil
		}
		ep.mu.Lock()
		defer ep.mu.Unlock()
		if k := ep.cutAt.Load(); k > 0 && ep.ops.Add(1) == k && ep.after == nil {
			var rng *rand.Rand
			if ep.seed != 0 {
				rng = rand.New(rand.NewPCG(ep.seed, uint64(k)))
			}
			ep.after = ep.mem.Crash(rng)
		}
		return n, nil
	})
	r.ep = ep
}

// observe checks that the store touches no path outside its directory, and
// counts what a call that must touch nothing does. A stream's log has
// goroutines of its own (its flusher), whose operations are not counted.
func (r *smRun) observe(op vfs.Op, name string) {
	clean := filepath.Clean(name)
	inside := clean == _smDir || strings.HasPrefix(clean, _smDir+"/")
	// The store's parent, /, is only looked at and synced (Open creates
	// the store's directory durably).
	if !inside && !(clean == "/" && (op == vfs.OpSyncDir || op == vfs.OpStat)) {
		r.mu.Lock()
		r.escaped = append(r.escaped, fmt.Sprintf("%v %q", op, name))
		r.mu.Unlock()
	}
	if r.recording.Load() && op != vfs.OpStat && op != vfs.OpList &&
		!strings.Contains(clean, "/"+_logDir+"/") && !strings.HasSuffix(clean, "/"+_logDir) {
		r.touched.Add(1)
	}
}

func (r *smRun) checkEscaped() {
	r.t.Helper()
	r.mu.Lock()
	esc := slices.Clone(r.escaped)
	r.mu.Unlock()
	if len(esc) > 0 {
		r.fatalf("the store touched paths outside %s: %q", _smDir, esc)
	}
}

func (r *smRun) open() {
	r.t.Helper()
	st, err := Open(_smDir, &Options{IdleTimeout: r.idle, fsys: r.ep.fsys})
	if err != nil {
		r.fatalf("open store: %v", err)
	}
	r.st = st
	for _, m := range r.streams {
		m.h = nil
		for _, g := range m.groups {
			g.g = nil
		}
	}
}

// handle returns the current store's *Stream of m.
func (r *smRun) handle(m *smStream) *Stream {
	r.t.Helper()
	if m.h == nil {
		s, err := r.st.Stream(m.name)
		if err != nil {
			r.fatalf("Stream(%q): %v", m.name, err)
		}
		m.h = s
	}
	return m.h
}

// payload returns the bytes of record seq of stream name, published as the
// gen-th publish, size bytes long.
func smPayload(name string, seq uint64, gen, size int) []byte {
	p := fmt.Appendf(nil, "%.8s|%d|%d|", name, seq, gen)
	for len(p) < size {
		p = append(p, byte('a'+(len(p)+gen)%26))
	}
	return p
}

// arg reads the argument bytes of an operation.
type smArgs struct {
	in []byte
	i  int
}

func (a *smArgs) byte() byte {
	if a.i >= len(a.in) {
		return 0
	}
	b := a.in[a.i]
	a.i++
	return b
}

// stream returns the model of the stream an argument byte names, nil if
// that stream does not exist.
func (r *smRun) stream(b byte) (string, *smStream) {
	name := _smNames[int(b)%len(_smNames)]
	return name, r.streams[name]
}

func (r *smRun) groupOf(b byte, gb byte) (*smStream, *smGroup, string) {
	_, m := r.stream(b)
	if m == nil {
		return nil, nil, ""
	}
	name := []string{"g", "h"}[gb&1]
	return m, m.groups[name], name
}

// do runs operation o, with its arguments from a. in is set when a power
// cut may interrupt it: then do reports what was in flight.
func (r *smRun) do(o byte, a *smArgs) *smInflight {
	r.t.Helper()
	ctx := context.Background()
	switch o {
	case _smCreate:
		name, m := r.stream(a.byte())
		cfg := _smConfigs[int(a.byte())%len(_smConfigs)]
		r.recording.Store(m != nil)
		r.touched.Store(0)
		s, err := r.st.Create(name, &cfg)
		r.recording.Store(false)
		r.logf("create %.8s %+v: %v", name, cfg, err)
		if m != nil {
			r.isErr("Create of an existing stream", err, ErrExists)
			if n := r.touched.Load(); n != 0 {
				r.fatalf("Create of an existing stream did %d file operations", n)
			}
			return nil
		}
		if err != nil && r.ep.cut() != nil {
			return &smInflight{op: _smCreate, stream: name, cfg: s0cfg(cfg)}
		}
		r.isErr("Create", err, nil)
		if got := s.Config(); got != s0cfg(cfg) {
			r.fatalf("Create: Config %+v, want %+v", got, s0cfg(cfg))
		}
		r.streams[name] = &smStream{name: name, cfg: s0cfg(cfg), h: s, groups: map[string]*smGroup{}}
	case _smStream:
		name, m := r.stream(a.byte())
		s, err := r.st.Stream(name)
		r.logf("stream %.8s: %v", name, err)
		if m == nil {
			r.isErr("Stream of no stream", err, ErrNotFound)
			return nil
		}
		r.isErr("Stream", err, nil)
		if m.h != nil && s != m.h {
			r.fatalf("Stream(%q) returned another *Stream", name)
		}
		if got := s.Config(); got != m.cfg {
			r.fatalf("Stream(%q): Config %+v, want %+v", name, got, m.cfg)
		}
		m.h = s
	case _smDelete:
		name, m := r.stream(a.byte())
		err := r.st.Delete(name)
		r.logf("delete %.8s: %v", name, err)
		if m == nil {
			r.isErr("Delete of no stream", err, ErrNotFound)
			return nil
		}
		if err != nil && r.ep.cut() != nil {
			// Delete closed the groups first, writing their positions.
			for _, g := range m.groups {
				if g.g != nil {
					g.cands = append(g.cands, g.g.Committed())
				}
			}
			return &smInflight{op: _smDelete, stream: name}
		}
		r.isErr("Delete", err, nil)
		delete(r.streams, name)
		if m.h != nil {
			_, err := m.h.Publish([]byte("after delete"))
			r.isErr("Publish to a deleted stream", err, ErrNotFound)
			r.isErr("DeleteGroup of a deleted stream", m.h.DeleteGroup("g"), ErrNotFound)
		}
		for _, g := range m.groups {
			if g.g != nil {
				_, err := g.g.Next(ctx, nil)
				r.isErr("Next of a deleted stream's group", err, ErrNotFound)
			}
		}
	case _smList:
		got := r.st.List()
		r.logf("list: %.8q", got)
		if want := r.names(); !slices.Equal(got, want) {
			r.fatalf("List = %q, want %q", got, want)
		}
	case _smPublish, _smBatch, _smWait:
		_, m := r.stream(a.byte())
		var b byte
		if o != _smWait {
			b = a.byte()
		}
		if m == nil {
			return nil
		}
		s := r.handle(m)
		if o != _smWait {
			if err, ok := r.publish(m, s, o == _smBatch, b); !ok {
				if r.ep.cut() != nil {
					return &smInflight{op: o, stream: m.name}
				}
				r.fatalf("publish: %v", err)
			}
		}
		if o != _smWait && b&0x80 == 0 && r.ep.cutAt.Load() == 0 {
			return nil // a cut publish waits: the cut may fall in its sync
		}
		last := uint64(len(m.recs))
		if last == 0 {
			return nil
		}
		err := s.WaitDurable(ctx, last)
		r.logf("wait %.8s %d: %v", m.name, last, err)
		if err != nil && r.ep.cut() != nil {
			return &smInflight{op: o, stream: m.name}
		}
		r.isErr("WaitDurable", err, nil)
		m.durable = last
	case _smGroup:
		m, g, name := r.groupOf(a.byte(), a.byte())
		sb := a.byte()
		if m == nil {
			return nil
		}
		return r.openGroup(m, g, name, sb)
	case _smNext:
		m, g, _ := r.groupOf(a.byte(), a.byte())
		if g == nil || g.g == nil {
			return nil
		}
		r.next(m, g)
	case _smAck, _smNack:
		m, g, _ := r.groupOf(a.byte(), a.byte())
		pb := a.byte()
		if g == nil || g.g == nil {
			return nil
		}
		r.ackNack(m, g, o == _smNack, pb)
	case _smCheckpoint, _smGroupClose:
		m, g, _ := r.groupOf(a.byte(), a.byte())
		if g == nil || g.g == nil {
			return nil
		}
		c := g.committed()
		var err error
		if o == _smCheckpoint {
			err = g.g.Checkpoint()
		} else {
			err = g.g.Close()
		}
		r.logf("%s %.8s/%s at %d: %v", map[bool]string{true: "checkpoint", false: "close"}[o == _smCheckpoint], m.name, g.name, c, err)
		if err != nil && r.ep.cut() != nil {
			g.cands = append(g.cands, g.g.Committed())
			return &smInflight{op: o, stream: m.name, group: g.name}
		}
		r.isErr("Checkpoint or Close", err, nil)
		r.checkpointed(m, g)
		if o == _smGroupClose {
			g.g = nil
		}
	case _smGroups:
		_, m := r.stream(a.byte())
		if m == nil {
			return nil
		}
		got, err := r.handle(m).Groups()
		r.logf("groups %.8s: %q %v", m.name, got, err)
		r.isErr("Groups", err, nil)
		if want := sortedKeys(m.groups); !slices.Equal(got, want) {
			r.fatalf("Groups of %q = %q, want %q", m.name, got, want)
		}
	case _smReopen:
		if in := r.closeStore(); in != nil {
			return in
		}
		r.open()
		r.verify(nil, false)
	case _smCrash:
		b := a.byte()
		var rng *rand.Rand
		if b != 0 {
			rng = rand.New(rand.NewPCG(uint64(b), uint64(r.step)))
		}
		k2 := a.byte()
		r.logf("crash (seed %d)", b)
		after := r.ep.mem.Crash(rng)
		r.crashed(after, nil, k2)
	case _smBadName:
		r.badName(a.byte(), a.byte())
	case _smDeleteGroup:
		sb, gb := a.byte(), a.byte()
		m, g, name := r.groupOf(sb, gb)
		if m == nil {
			return nil
		}
		if g != nil && g.g != nil && gb&2 != 0 {
			// Closed first, as a caller deleting a group does; a power
			// cut counts from DeleteGroup's first file operation.
			_, k := r.ep.disarm()
			c, err := g.g.Committed(), g.g.Close()
			r.logf("close %.8s/%s at %d: %v", m.name, g.name, c, err)
			if err != nil && r.ep.cut() != nil {
				g.cands = append(g.cands, g.g.Committed())
				return &smInflight{op: _smGroupClose, stream: m.name, group: g.name}
			}
			r.isErr("Close", err, nil)
			r.checkpointed(m, g)
			g.g = nil
			r.ep.arm(k)
		}
		return r.deleteGroup(m, g, name)
	}
	return nil
}

// deleteGroup calls DeleteGroup on group name of m (g its model, nil if
// there is none) and checks what its doc promises: an open group is
// ErrGroupOpen and a missing one ErrNoGroup, neither touching a file;
// otherwise the group is gone (its file and its position), and its
// position holds no record from retention: in a stream kept UntilAcked
// what the remaining groups acked is deleted at once, and with no group
// left nothing is. A power cut may interrupt it.
func (r *smRun) deleteGroup(m *smStream, g *smGroup, name string) *smInflight {
	r.t.Helper()
	s := r.handle(m)
	open := g != nil && g.g != nil
	before, known := heldFrom(s)
	r.touched.Store(0)
	r.recording.Store(g == nil || open)
	err := s.DeleteGroup(name)
	r.recording.Store(false)
	r.logf("delete group %.8s/%s (open %v): %v", m.name, name, open, err)
	switch {
	case open:
		r.isErr("DeleteGroup of an open group", err, ErrGroupOpen)
	case g == nil && err != nil && r.ep.cut() != nil:
		return nil // there was nothing to delete; the name stays absent
	case g == nil:
		r.isErr("DeleteGroup of no group", err, ErrNoGroup)
	case err != nil && r.ep.cut() != nil:
		return &smInflight{op: _smDeleteGroup, stream: m.name, group: name}
	default:
		r.isErr("DeleteGroup", err, nil)
	}
	if g == nil || open {
		if n := r.touched.Load(); n != 0 {
			r.fatalf("DeleteGroup of an open or missing group did %d file operations", n)
		}
		return nil
	}
	r.groupDeleted(m, g)
	if r.ep.cutAt.Load() != 0 {
		// A power cut may yet fall in what follows: the reopen checks
		// that the group stays gone.
		return nil
	}
	names, err := s.Groups()
	r.isErr("Groups after DeleteGroup", err, nil)
	if slices.Contains(names, name) {
		r.fatalf("Groups of %q after DeleteGroup(%q) = %q", m.name, name, names)
	}
	err = withLog(s, func(l *wal.Log) error {
		if err := r.checkCursors(m, l, names); err != nil || m.cfg.Retention.MaxBytes != 0 {
			return err // MaxBytes may delete records meanwhile
		}
		return r.checkHeld(m, l, before, known)
	})
	r.isErr("checks after DeleteGroup", err, nil)
	return nil
}

// withLog calls fn with the log of s, again with a new log if the janitor
// closed it as idle meanwhile.
func withLog(s *Stream, fn func(l *wal.Log) error) error {
	for {
		l, err := s.log()
		if err != nil {
			return err
		}
		if err := fn(l); err == nil || !s.retry(l, err) {
			return err
		}
	}
}

// groupDeleted drops group g from the model of m, deleted durably.
func (r *smRun) groupDeleted(m *smStream, g *smGroup) {
	delete(m.groups, g.name)
	if len(m.groups) == 0 {
		// Its position was checkpointed (a closed group's is), and
		// UntilAcked deleted nothing at or above it.
		m.keep = slices.Max(g.cands)
	}
}

// heldFrom returns the first record s holds as this store last saw it,
// without opening its log; known is false if this store never opened it.
func heldFrom(s *Stream) (first uint64, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.cur.Load(); l != nil {
		return l.FirstSeq(), true
	}
	return s.mu.first, s.mu.baseNext != 0
}

// checkCursors checks that every position in the log l of m is a group's:
// one of names, its groups with a file.
func (r *smRun) checkCursors(m *smStream, l *wal.Log, names []string) error {
	r.t.Helper()
	cs, err := l.Cursors()
	if err != nil {
		return err
	}
	for _, c := range cs {
		if !slices.Contains(names, c.Name) {
			r.fatalf("stream %q: a position %q (at %d) without a group; groups %q", m.name, c.Name, c.Committed, names)
		}
	}
	return nil
}

// checkHeld checks, after a DeleteGroup, what m (without MaxBytes, so that
// only acks delete records) holds: with groups left in a stream kept
// UntilAcked, what they all acked is deleted already, so that truncating
// again, as their next checkpoint does, deletes nothing; otherwise
// nothing was deleted (before, if known, was the first record held).
func (r *smRun) checkHeld(m *smStream, l *wal.Log, before uint64, known bool) error {
	r.t.Helper()
	first := l.FirstSeq()
	if m.cfg.Retention.UntilAcked && len(m.groups) > 0 {
		if err := l.TruncateFront(l.NextSeq()); err != nil {
			return err
		}
		if got := l.FirstSeq(); got != first {
			r.fatalf("stream %q: DeleteGroup kept records %d to %d, which every group left acked", m.name, first, got-1)
		}
		return nil
	}
	if known && first != before {
		r.fatalf("stream %q: DeleteGroup moved the first record from %d to %d, with no group left to have acked them", m.name, before, first)
	}
	return nil
}

// closeStore closes the store; a power cut may interrupt it.
func (r *smRun) closeStore() *smInflight {
	r.t.Helper()
	err := r.st.Close()
	r.logf("store close: %v", err)
	if err != nil && r.ep.cut() != nil {
		// Close closed the groups first, writing their positions.
		for _, m := range r.streams {
			for _, g := range m.groups {
				if g.g != nil {
					g.cands = append(g.cands, g.g.Committed())
				}
			}
		}
		return &smInflight{op: _smReopen}
	}
	r.isErr("Store.Close", err, nil)
	for _, m := range r.streams {
		for _, g := range m.groups {
			if g.g != nil {
				r.checkpointed(m, g)
			}
		}
		m.durable = uint64(len(m.recs))
	}
	for _, s := range r.handles() {
		_, err := s.Publish([]byte("after close"))
		r.isErr("Publish to a stream of a closed store", err, ErrClosed)
	}
	return nil
}

func sortedKeys(m map[string]*smGroup) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// s0cfg is cfg as Create records it: MaxRecordSize defaulted.
func s0cfg(cfg Config) Config {
	if cfg.MaxRecordSize == 0 {
		cfg.MaxRecordSize = DefaultMaxRecordSize
	}
	return cfg
}

func (r *smRun) names() []string {
	out := make([]string, 0, len(r.streams))
	for n := range r.streams {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// handles returns the *Stream of every stream fetched from the store.
func (r *smRun) handles() []*Stream {
	var out []*Stream
	for _, m := range r.streams {
		if m.h != nil {
			out = append(out, m.h)
		}
	}
	return out
}

// publish publishes 1 to 4 records to m, one by one or as a batch. It
// reports false if a publish failed for a reason the model does not expect.
func (r *smRun) publish(m *smStream, s *Stream, batch bool, b byte) (error, bool) {
	n := 1 + int(b)%4
	size := _smSizes[int(b>>2)%len(_smSizes)]
	if b&0x40 != 0 {
		size = _smSizes[0]
	}
	ps := make([][]byte, n)
	for i := range ps {
		r.gen++
		ps[i] = smPayload(m.name, m.nextSeq()+uint64(i), r.gen, size)
	}
	tooLarge := size > m.cfg.MaxRecordSize
	if batch {
		first, err := s.PublishBatch(ps)
		r.logf("batch %.8s %dx%d: %d %v", m.name, n, size, first, err)
		if tooLarge {
			return err, errors.Is(err, wal.ErrTooLarge)
		}
		if err != nil {
			return err, false
		}
		if first != m.nextSeq() {
			r.fatalf("PublishBatch to %q = %d, want %d", m.name, first, m.nextSeq())
		}
		m.recs = append(m.recs, ps...)
		return nil, true
	}
	for _, p := range ps {
		seq, err := s.Publish(p)
		r.logf("publish %.8s %d: %d %v", m.name, len(p), seq, err)
		if tooLarge {
			if !errors.Is(err, wal.ErrTooLarge) {
				return err, false
			}
			continue
		}
		if err != nil {
			return err, false
		}
		if seq != m.nextSeq() {
			r.fatalf("Publish to %q = %d, want %d", m.name, seq, m.nextSeq())
		}
		m.recs = append(m.recs, p)
	}
	return nil, true
}

// groupOptions are the options of every group: no redelivery by time and
// checkpoints only when asked, so that the model knows every position.
func groupOptions(startAt uint64) *GroupOptions {
	return &GroupOptions{AckWait: math.MaxInt64, CheckpointEvery: time.Hour, StartAt: startAt}
}

// openGroup opens (or creates) group name of m.
func (r *smRun) openGroup(m *smStream, g *smGroup, name string, sb byte) *smInflight {
	r.t.Helper()
	s := r.handle(m)
	var startAt uint64
	if g == nil && sb&1 != 0 && m.cfg.Retention == (Retention{}) {
		startAt = 1 + uint64(sb>>1)%m.nextSeq()
	}
	h, err := s.Group(name, groupOptions(startAt))
	r.logf("group %.8s/%s start %d: %v", m.name, name, startAt, err)
	if err != nil && r.ep.cut() != nil {
		if g != nil {
			return nil // opening an existing group writes no position
		}
		return &smInflight{op: _smGroup, stream: m.name, group: name, startAt: startAt}
	}
	r.isErr("Group", err, nil)
	if g != nil && g.g != nil {
		if h != g.g {
			r.fatalf("Group of an open group returned another *Group")
		}
		return nil
	}
	c := h.Committed()
	if g == nil {
		// A new group, or one whose name DeleteGroup deleted: it starts
		// at its StartAt, or the first record the stream holds (which
		// MaxBytes may move meanwhile).
		g = &smGroup{name: name, fresh: true, startAt: startAt, cands: []uint64{c}}
		want := startAt
		if want == 0 {
			want = max(h.l.FirstSeq(), 1)
		}
		if m.cfg.Retention.MaxBytes == 0 && c != want {
			r.fatalf("new group %s of %q starts at %d, want %d", name, m.name, c, want)
		}
		m.groups[name] = g
	} else if !slices.Contains(g.cands, c) {
		r.fatalf("group %s of %q reopened at %d, want one of %v", name, m.name, c, g.cands)
	}
	r.startLife(g, h, c)
	return nil
}

func (r *smRun) startLife(g *smGroup, h *Group, c uint64) {
	g.g = h
	g.base, g.next = c, c
	g.delivered = nil
	g.acked, g.queued = map[uint64]bool{}, map[uint64]bool{}
	g.redo = nil
}

// checkpointed records that group g's position was written durably.
func (r *smRun) checkpointed(m *smStream, g *smGroup) {
	r.t.Helper()
	c := g.g.Committed()
	if !m.deletes() && c != g.committed() {
		r.fatalf("group %s of %q: Committed %d, want %d", g.name, m.name, c, g.committed())
	}
	g.cands, g.fresh = []uint64{c}, false
	// Doc: the checkpoint waits for the acked records to be durable.
	if c > 0 {
		m.durable = max(m.durable, min(c-1, uint64(len(m.recs))))
	}
}

// next calls Next on group g of m and checks the record it delivers.
func (r *smRun) next(m *smStream, g *smGroup) {
	r.t.Helper()
	// What may come, in order: queued records not acked, then fresh ones.
	var order []uint64
	for _, s := range g.redo {
		if !g.acked[s] {
			order = append(order, s)
		}
	}
	if g.next < m.nextSeq() {
		order = append(order, g.next)
	}
	wait := 10 * time.Second
	if len(order) == 0 {
		wait = 5 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	msg, err := g.g.Next(ctx, nil)
	cancel()
	r.logf("next %.8s/%s: want %v: %d/%d %v", m.name, g.name, order, msg.Seq, msg.Delivery, err)
	if len(order) == 0 {
		if m.deletes() && errors.Is(err, context.DeadlineExceeded) {
			g.redo = nil
			return
		}
		r.isErr("Next with nothing to deliver", err, context.DeadlineExceeded)
		g.redo = nil
		return
	}
	r.isErr("Next", err, nil)
	i := slices.Index(order, msg.Seq)
	switch {
	case i < 0 && m.deletes() && msg.Seq > g.next && msg.Seq < m.nextSeq():
		// Retention deleted the fresh records up to it.
		i = len(order)
	case i < 0, i > 0 && !m.deletes():
		r.fatalf("group %s of %q: Next = record %d, want %d", g.name, m.name, msg.Seq, order[0])
	}
	if want := m.recs[msg.Seq-1]; string(msg.Data) != string(want) {
		r.fatalf("group %s of %q: record %d is %.40q, want %.40q", g.name, m.name, msg.Seq, msg.Data, want)
	}
	// What it passed was deleted by retention: skipped, as acked.
	for _, s := range order[:min(i, len(order))] {
		if s != msg.Seq {
			g.acked[s] = true
		}
	}
	for s := g.next; s < msg.Seq; s++ {
		g.acked[s] = true
	}
	for len(g.redo) > 0 && (g.redo[0] <= msg.Seq || g.acked[g.redo[0]]) {
		g.redo = g.redo[1:]
	}
	if msg.Seq >= g.next {
		if msg.Delivery != 1 {
			r.fatalf("fresh record %d has Delivery %d", msg.Seq, msg.Delivery)
		}
		g.delivered = append(g.delivered, msg.Seq)
		g.next = msg.Seq + 1
	}
	g.queued[msg.Seq] = false
}

// ackNack acks or nacks a record picked by b: one delivered, or one not.
func (r *smRun) ackNack(m *smStream, g *smGroup, nack bool, b byte) {
	r.t.Helper()
	var seq uint64
	if len(g.delivered) > 0 && b%8 != 7 {
		seq = g.delivered[int(b>>3)%len(g.delivered)]
	} else {
		seq = g.next + 2 + uint64(b>>3)%3 // never delivered
	}
	var err error
	if nack {
		err = g.g.Nack(seq)
	} else {
		err = g.g.Ack(seq)
	}
	r.logf("%s %.8s/%s %d: %v", map[bool]string{true: "nack", false: "ack"}[nack], m.name, g.name, seq, err)
	delivered := slices.Contains(g.delivered, seq)
	switch {
	case !delivered:
		r.isErr("Ack or Nack of a record not delivered", err, ErrNotDelivered)
	case !nack:
		r.isErr("Ack", err, nil)
		g.acked[seq] = true
	case g.acked[seq]:
		r.isErr("Nack of an acked record", err, ErrNotDelivered)
	default:
		r.isErr("Nack", err, nil)
		if !g.queued[seq] {
			g.queued[seq] = true
			i, _ := slices.BinarySearch(g.redo, seq)
			g.redo = slices.Insert(g.redo, i, seq)
		}
	}
}

// badName calls Create, Stream, Delete, Group or DeleteGroup with a bad
// name: each must return ErrName and touch nothing.
func (r *smRun) badName(nb, cb byte) {
	r.t.Helper()
	name := _smBadNames[int(nb)%len(_smBadNames)]
	var s *Stream
	for _, n := range r.names() {
		s = r.handle(r.streams[n])
		break
	}
	before := r.st.List()
	r.touched.Store(0)
	r.recording.Store(true)
	var err error
	call := cb % 5
	switch {
	case call == 0:
		_, err = r.st.Create(name, nil)
	case call == 1:
		_, err = r.st.Stream(name)
	case call == 2:
		err = r.st.Delete(name)
	case s == nil:
		err = ErrName
	case call == 3:
		_, err = s.Group(name, nil)
	default:
		err = s.DeleteGroup(name)
	}
	r.recording.Store(false)
	r.logf("bad name %.12q call %d: %v", name, call, err)
	if name == _smBadNames[len(_smBadNames)-1] && call < 3 {
		// A valid stream name, too long for a group.
		switch call {
		case 0:
			// Created: a real stream now, removed again.
			r.isErr("Create of a long name", err, nil)
			r.isErr("Delete of a long name", r.st.Delete(name), nil)
		case 1, 2:
			r.isErr("a long name", err, ErrNotFound)
		}
		return
	}
	r.isErr(fmt.Sprintf("call %d with bad name %q", call, name), err, ErrName)
	if n := r.touched.Load(); n != 0 {
		r.fatalf("call %d with bad name %q did %d file operations", call, name, n)
	}
	if got := r.st.List(); !slices.Equal(got, before) {
		r.fatalf("List after a bad name = %q, want %q", got, before)
	}
}

// crashed reopens the store on after, what a power cut left, and checks
// it. With k2 other than 0 (and even) the power is cut again at the k2/2-th
// file operation of the recovery: Open, and the first use of each stream,
// which opens its log (cutting its torn tail), then Store.Close.
func (r *smRun) crashed(after *vfs.MemFS, in *smInflight, k2 byte) {
	r.t.Helper()
	_ = r.st.Close() // fails, the power being gone; its goroutines end all the same
	r.newEpoch(after)
	if k2 != 0 && k2%2 == 0 {
		ep := r.ep
		ep.seed = uint64(k2) + uint64(r.step)<<8
		ep.arm(int64(k2 / 2))
		st, err := Open(_smDir, &Options{IdleTimeout: r.idle, fsys: ep.fsys})
		if err == nil {
			for _, n := range st.List() {
				if s, err := st.Stream(n); err == nil {
					_, _ = s.PublishBatch(nil) // opens the log
				}
			}
			err = st.Close()
		}
		if again, _ := ep.disarm(); again != nil {
			r.logf("cut at file operation %d of the recovery: %v", k2/2, err)
			r.newEpoch(again)
		} else if err != nil {
			r.fatalf("recovery: %v", err)
		}
	}
	r.open()
	r.verify(in, true)
}

// verify checks the store just opened against the model, which it then
// brings up to date: with in set, the outcome of that operation is
// open; with crashed set, records not durable may be lost.
func (r *smRun) verify(in *smInflight, crashed bool) {
	r.t.Helper()
	r.checkEscaped()
	if root, err := r.ep.mem.List("/"); err != nil || !slices.Equal(root, []string{"store"}) {
		r.fatalf("the MemFS root holds %q (%v), want only store", root, err)
	}
	got := r.st.List()
	want := r.names()
	if in != nil && (in.op == _smCreate || in.op == _smDelete) {
		has := slices.Contains(got, in.stream)
		if in.op == _smCreate && has {
			r.streams[in.stream] = &smStream{name: in.stream, cfg: in.cfg, groups: map[string]*smGroup{}}
		}
		if in.op == _smDelete && !has {
			delete(r.streams, in.stream)
		}
		r.logf("cut during %s of %.8s: there after: %v", map[byte]string{_smCreate: "create", _smDelete: "delete"}[in.op], in.stream, has)
		want = r.names()
	}
	if !slices.Equal(got, want) {
		r.fatalf("List after reopen = %.12q, want %.12q (in flight: %+v)", got, want, in)
	}
	sdir := filepath.Join(_smDir, _streamsDir)
	if left, err := r.ep.mem.List(sdir); err != nil || !slices.Equal(left, want) {
		r.fatalf("%s holds %.12q (%v), want %.12q", sdir, left, err, want)
	}
	for _, n := range want {
		r.verifyStream(r.streams[n], in, crashed)
	}
	if in != nil && in.op == _smCreate {
		if m := r.streams[in.stream]; m != nil {
			// Whole: publishable.
			s := r.handle(m)
			r.gen++
			p := smPayload(m.name, 1, r.gen, 10)
			seq, err := s.Publish(p)
			if err != nil || seq != 1 {
				r.fatalf("Publish to %q created across a cut = %d, %v", m.name, seq, err)
			}
			r.isErr("WaitDurable", s.WaitDurable(context.Background(), 1), nil)
			m.recs, m.durable = append(m.recs, p), 1
		}
	}
}

// verifyStream checks stream m after a reopen: its config, its records and
// its groups.
func (r *smRun) verifyStream(m *smStream, in *smInflight, crashed bool) {
	r.t.Helper()
	s := r.handle(m)
	if got := s.Config(); got != m.cfg {
		r.fatalf("stream %q: Config after reopen %+v, want %+v", m.name, got, m.cfg)
	}
	var seqs []uint64
	err := s.Scan(0, func(seq uint64, rec []byte) error {
		if seq > uint64(len(m.recs)) {
			return fmt.Errorf("record %d past the last published, %d", seq, len(m.recs))
		}
		if want := m.recs[seq-1]; string(rec) != string(want) {
			return fmt.Errorf("record %d is %.40q, want %.40q", seq, rec, want)
		}
		seqs = append(seqs, seq)
		return nil
	})
	if err != nil {
		r.fatalf("stream %q: scan after reopen: %v", m.name, err)
	}
	st := s.Stats()
	first, next := st.FirstSeq, st.NextSeq
	if first == 0 {
		first = 1
	}
	for i, seq := range seqs {
		if seq != first+uint64(i) {
			r.fatalf("stream %q: records %v are not contiguous from %d", m.name, seqs, first)
		}
	}
	if len(seqs) > 0 && seqs[len(seqs)-1] != next-1 || len(seqs) == 0 && first != next {
		r.fatalf("stream %q: scan read %v, first %d, next %d", m.name, seqs, first, next)
	}
	if next-1 < m.durable || (!crashed && next-1 != uint64(len(m.recs))) || next-1 > uint64(len(m.recs)) {
		r.fatalf("stream %q: %d records after reopen, want %d (%d durable)", m.name, next-1, len(m.recs), m.durable)
	}
	m.recs = m.recs[:next-1]
	ret := m.cfg.Retention
	if ret.MaxBytes == 0 && !ret.UntilAcked && first != 1 {
		r.fatalf("stream %q without retention: first record %d after reopen", m.name, first)
	}
	names, err := s.Groups()
	r.isErr("Groups after reopen", err, nil)
	wantNames := sortedKeys(m.groups)
	if in != nil && in.op == _smGroup && in.stream == m.name && slices.Contains(names, in.group) && m.groups[in.group] == nil {
		m.groups[in.group] = &smGroup{name: in.group, fresh: true, startAt: in.startAt}
		wantNames = sortedKeys(m.groups)
		r.logf("cut during group create %.8s/%s: there after", m.name, in.group)
	}
	if in != nil && in.op == _smDeleteGroup && in.stream == m.name {
		// Doc: a cut leaves the group whole, gone, or without its
		// position, which it then gets as a new group would.
		if g := m.groups[in.group]; g != nil {
			has := slices.Contains(names, in.group)
			if has {
				g.fresh = true
			} else {
				r.groupDeleted(m, g)
			}
			wantNames = sortedKeys(m.groups)
			r.logf("cut during delete group %.8s/%s: there after: %v", m.name, in.group, has)
		}
	}
	if !slices.Equal(names, wantNames) {
		r.fatalf("stream %q: Groups after reopen = %q, want %q", m.name, names, wantNames)
	}
	r.isErr("Cursors after reopen", withLog(s, func(l *wal.Log) error { return r.checkCursors(m, l, names) }), nil)
	if ret.UntilAcked && ret.MaxBytes == 0 && len(names) == 0 && first > max(m.keep, 1) {
		// Doc: a stream with no group loses nothing to acks (MaxBytes
		// still deletes, no group holding records from it).
		r.fatalf("stream %q kept until acked, without groups: first record %d after reopen, want at most %d", m.name, first, max(m.keep, 1))
	}
	for _, n := range names {
		r.verifyGroup(m, m.groups[n], first, next)
	}
}

// verifyGroup opens group g of m after a reopen and checks its position and
// the record it delivers first; then closes it.
func (r *smRun) verifyGroup(m *smStream, g *smGroup, first, next uint64) {
	r.t.Helper()
	h, err := r.handle(m).Group(g.name, nil)
	if err != nil {
		r.fatalf("group %s of %q after reopen: %v", g.name, m.name, err)
	}
	p := h.Committed()
	if g.startAt > next {
		// Doc: a start the cut left past the stream's end moves to it,
		// in the group's file.
		g.startAt = next
	}
	ok := slices.Contains(g.cands, p)
	if g.fresh {
		start := g.startAt
		if start == 0 {
			start = first
		}
		ok = ok || p == min(max(start, first), next)
	}
	if !ok && m.deletes() {
		// Retention may have deleted records below every candidate.
		for _, c := range g.cands {
			ok = ok || max(c, first) == max(p, first)
		}
	}
	if !ok {
		r.fatalf("group %s of %q at %d after reopen, want one of %v (fresh %v, start %d; records %d to %d)", g.name, m.name, p, g.cands, g.fresh, g.startAt, first, next-1)
	}
	if p > next {
		r.fatalf("group %s of %q at %d after reopen, past the stream's end %d", g.name, m.name, p, next)
	}
	if m.cfg.Retention.UntilAcked && first > p {
		r.fatalf("stream %q kept until acked: first record %d after reopen, past group %s's position %d", m.name, first, g.name, p)
	}
	// Every record from there on comes, in order, and then none.
	for want := max(p, first); ; want++ {
		wait := 10 * time.Second
		if want >= next {
			wait = 5 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		msg, err := h.Next(ctx, nil)
		cancel()
		if want >= next {
			r.logf("reopened group %.8s/%s at %d: delivered to %d, then %d %v", m.name, g.name, p, want-1, msg.Seq, err)
			r.isErr("Next of a group at the stream's end", err, context.DeadlineExceeded)
			break
		}
		switch {
		case err != nil:
			r.fatalf("group %s of %q at %d: Next = %v, want record %d", g.name, m.name, p, err, want)
		case msg.Seq != want || string(msg.Data) != string(m.recs[want-1]):
			r.fatalf("group %s of %q at %d: Next = record %d %.40q, want %d %.40q", g.name, m.name, p, msg.Seq, msg.Data, want, m.recs[want-1])
		}
	}
	c := h.Committed()
	r.isErr("Group.Close", h.Close(), nil)
	g.g, g.cands, g.fresh = nil, []uint64{c}, false
	if c > 0 {
		m.durable = max(m.durable, min(c-1, uint64(len(m.recs))))
	}
}

// FuzzStoreModel runs a sequence of operations, decoded from its input, on a
// store on a crashable MemFS, and checks them against a model of what the
// documentation promises: Create, Stream, Delete and List agree with the
// streams created and not deleted (ErrExists, ErrNotFound otherwise); bad
// names are ErrName and touch no file; published records come back, in
// order, with their bytes; groups deliver in order and redeliver what was
// nacked. DeleteGroup of an open group is ErrGroupOpen, of a missing one
// ErrNoGroup, neither touching a file; otherwise the group's file and
// position are gone, in a stream kept UntilAcked what the remaining
// groups acked is deleted at once (and nothing if none remains), and the
// name makes a new group, at its StartAt or the first record held. After
// a Store.Close and Open everything is there. After a power cut
// (MemFS.Crash between operations, or in the middle of one: Create,
// Delete, a publish and its WaitDurable, a group's creation, Checkpoint,
// Close or deletion, Store.Close) the store opens; its streams are those
// whose Create returned and whose Delete did not, plus the one whose
// Create or Delete was cut, whole (its Config, its records, publishable)
// or absent, and no temporary entry is left; every record WaitDurable
// confirmed is there, with its bytes, and the records held are
// contiguous; a group deleted stays deleted, and the one whose deletion
// was cut is whole, gone, or without its position; no position is left
// without its group; each group's position is one it checkpointed (or,
// never checkpointed or its deletion cut, where it started), never past
// the stream's end, and the group delivers the record there first;
// retention never deletes what the config keeps. No path outside the
// store's directory is ever touched.
func FuzzStoreModel(f *testing.F) {
	op := func(o byte, args ...byte) []byte { return append([]byte{o}, args...) }
	seq := func(head byte, ops ...[]byte) []byte { return slices.Concat(append([][]byte{{head}}, ops...)...) }
	// Every operation, a clean reopen and a crash.
	f.Add(seq(0,
		op(_smCreate, 0, 1), op(_smCreate, 1, 4), op(_smCreate, 0, 2), op(_smList), op(_smStream, 2),
		op(_smPublish, 0, 0x81), op(_smBatch, 1, 0x82), op(_smWait, 1), op(_smGroup, 0, 0, 0),
		op(_smNext, 0, 0), op(_smNext, 0, 0), op(_smAck, 0, 0, 0), op(_smNack, 0, 0, 8), op(_smNext, 0, 0),
		op(_smAck, 0, 0, 7), op(_smCheckpoint, 0, 0), op(_smGroups, 0), op(_smGroup, 1, 1, 0), op(_smNext, 1, 1),
		op(_smGroupClose, 1, 1), op(_smReopen), op(_smPublish, 0, 0x42), op(_smCrash, 3, 0), op(_smDelete, 1),
		op(_smDelete, 1), op(_smList), op(_smCrash, 0, 6), op(_smStream, 1)))
	// A cut during Create, with unsynced records torn.
	f.Add(seq(1,
		op(_smCreate, 0, 5), op(_smPublish, 0, 0x0b), op(_smCut, 9, 0, _smCreate, 1, 3), op(_smList),
		op(_smCut, 4, 0, _smCreate, 2, 6), op(_smPublish, 2, 0x83)))
	// A cut during Delete, and during a group's checkpoint.
	f.Add(seq(2,
		op(_smCreate, 3, 1), op(_smBatch, 3, 0x85), op(_smGroup, 3, 0, 0), op(_smNext, 3, 0), op(_smAck, 3, 0, 0),
		op(_smCut, 3, 0, _smCheckpoint, 3, 0), op(_smCut, 12, 0, _smDelete, 3), op(_smList), op(_smCreate, 3, 0)))
	// Bad names; a cut while a group is created, a publish is synced, a
	// store closes; retention that deletes.
	f.Add(seq(3,
		op(_smBadName, 0, 0), op(_smBadName, 4, 1), op(_smBadName, 6, 2), op(_smCreate, 1, 5),
		op(_smBadName, 7, 3), op(_smBadName, 2, 4), op(_smBadName, 13, 0), op(_smBadName, 3, 3),
		op(_smCut, 5, 0, _smGroup, 1, 1, 3), op(_smBatch, 1, 0x0f), op(_smBatch, 1, 0x0f), op(_smBatch, 1, 0x0f),
		op(_smCut, 2, 8, _smPublish, 1, 0x8f), op(_smGroup, 1, 0, 0), op(_smNext, 1, 0), op(_smCut, 20, 0, _smReopen)))
	// DeleteGroup: of a group holding a stream kept UntilAcked, whose
	// records the other group acked go; of a missing group and an open
	// one; cut; of a group that started at its StartAt, whose name then
	// makes a new group at the first record, across a crash.
	var nexts, acks [][]byte
	for i := range 8 {
		nexts = append(nexts, op(_smNext, 0, 1))
		acks = append(acks, op(_smAck, 0, 1, byte(i<<3)))
	}
	f.Add(seq(4, slices.Concat(
		[][]byte{
			op(_smCreate, 0, 4), op(_smBatch, 0, 0x8f), op(_smBatch, 0, 0x8f), op(_smBatch, 0, 0x8f), op(_smBatch, 0, 0x8f),
			op(_smGroup, 0, 0, 0), op(_smGroupClose, 0, 0), op(_smGroup, 0, 1, 0),
		},
		nexts, acks,
		[][]byte{
			op(_smGroupClose, 0, 1), op(_smDeleteGroup, 0, 0), op(_smDeleteGroup, 0, 0), op(_smGroup, 0, 1, 0),
			op(_smDeleteGroup, 0, 1), op(_smGroupClose, 0, 1), op(_smGroup, 0, 0, 0), op(_smGroupClose, 0, 0),
			op(_smCut, 2, 0, _smDeleteGroup, 0, 1), op(_smGroups, 0),
			op(_smCreate, 1, 0), op(_smPublish, 1, 0x83), op(_smGroup, 1, 0, 5), op(_smNext, 1, 0), op(_smAck, 1, 0, 0),
			op(_smGroupClose, 1, 0), op(_smDeleteGroup, 1, 0), op(_smCrash, 0, 0), op(_smGroup, 1, 0, 0), op(_smNext, 1, 0),
		})...))
	// A cut at the first file operation of DeleteGroup of a group closed
	// just before, after one deleted whole.
	f.Add(seq(5,
		op(_smCreate, 1, 0), op(_smPublish, 1, 0x81), op(_smGroup, 1, 0, 0), op(_smDeleteGroup, 1, 2),
		op(_smGroup, 1, 1, 0), op(_smCut, 0, 0, _smDeleteGroup, 1, 3), op(_smGroups, 1)))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > 300 {
			return
		}
		r := &smRun{t: t, idle: -1, streams: map[string]*smStream{}}
		if in[0]&0x80 != 0 {
			r.idle = 20 * time.Millisecond
		}
		r.newEpoch(vfs.NewMem())
		r.open()
		defer func() { _ = r.st.Close() }()
		a := &smArgs{in: in, i: 1}
		for a.i < len(in) {
			r.step++
			o := a.byte() % _smOps
			if o != _smCut {
				if inf := r.do(o, a); inf != nil {
					r.fatalf("operation %d was cut without a power cut", o)
				}
				r.checkEscaped()
				continue
			}
			// Half the values cut within the first 16 file operations,
			// where the short operations (a group's creation, deletion,
			// checkpoint) have all theirs.
			kb := a.byte()
			k := 1 + int64(kb%64)
			if kb >= 128 {
				k = 1 + int64(kb%16)
			}
			k2 := a.byte()
			sub := []byte{_smCreate, _smDelete, _smPublish, _smBatch, _smGroup, _smCheckpoint, _smGroupClose, _smReopen, _smDeleteGroup}
			if o = a.byte() % _smOps; !slices.Contains(sub, o) {
				o = sub[int(o)%len(sub)]
			}
			ep := r.ep
			ep.seed = uint64(in[0]&0x7f) + uint64(r.step)<<8
			if in[0]&1 == 0 {
				ep.seed = 0
			}
			ep.arm(k)
			r.logf("cut before file operation %d of:", k)
			var inf *smInflight
			if o == _smReopen {
				inf = r.closeStore()
			} else {
				inf = r.do(o, a)
			}
			after, _ := ep.disarm()
			if after == nil {
				if o == _smReopen {
					r.open()
					r.verify(nil, false)
				}
				continue
			}
			r.crashed(after, inf, k2)
		}
	})
}
