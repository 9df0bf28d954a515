package stream

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"
	"math/bits"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/wal"
)

// Group defaults.
const (
	// DefaultAckWait is the default GroupOptions.AckWait.
	DefaultAckWait = 30 * time.Second
	// DefaultCheckpointEvery is the default GroupOptions.CheckpointEvery.
	DefaultCheckpointEvery = time.Second
	// MaxAckPending is the most records a group may have delivered and not
	// yet acked above its committed position: the span of the ack window
	// of its wal.Cursor.
	MaxAckPending = 8192
	// _maxAckWait bounds GroupOptions.AckWait (146 years): a deadline,
	// nanoseconds since the group opened, stays below math.MaxInt64.
	_maxAckWait = time.Duration(math.MaxInt64 / 2)
	// DefaultMaxAckPending is the default GroupOptions.MaxAckPending. A
	// group keeps 32 bytes of state per record of its window, so a store
	// of many groups wants the window no wider than its consumers need.
	DefaultMaxAckPending = 1024
)

// GroupOptions configures a Group. A nil *GroupOptions, or a zero field,
// means the default. A group's options are kept in the stream's
// groups/NAME.json when it is created; opening it again with nil options
// uses them.
type GroupOptions struct {
	// AckWait is how long a delivered record may stay unacked before it is
	// delivered again, to whichever member asks next. Default
	// DefaultAckWait; math.MaxInt64 (or anything over 146 years) means
	// never. The group's timer checks every AckWait/4 (at least
	// 1 ms, at most CheckpointEvery and 1 s), and a delivery's deadline
	// is set by the first check after it, so a record unacked goes out
	// again between AckWait and AckWait plus two of those periods after
	// its delivery, never sooner.
	AckWait time.Duration
	// MaxDeliver, if positive, bounds the deliveries of one record: a
	// record still unacked after MaxDeliver deliveries is dead. It is
	// acked (the group moves past it), counted in GroupStats.Dead and
	// passed to OnDead.
	MaxDeliver int
	// CheckpointEvery is how often the committed position is written when
	// it moved. Default DefaultCheckpointEvery.
	CheckpointEvery time.Duration
	// MaxAckPending bounds how far delivery may run ahead of the committed
	// position (the lowest unacked record): when the records from it to
	// the next fresh one number MaxAckPending, Next delivers only
	// redeliveries until acks move it. At most MaxAckPending; default
	// DefaultMaxAckPending.
	MaxAckPending int
	// StartAt is the first record a new group delivers; 0 means the
	// stream's first record. It is recorded in the group's file, and
	// ignored when the group exists.
	StartAt uint64
	// OnDead, if set, is called (from the group's timer goroutine, or from
	// Nack) with each record that became dead. It must not block. It may
	// close the group, another group or the store: a Close made from a
	// timer's OnDead call does not wait for OnDead calls, its own or
	// another group's (which may be waiting for it); each timer making
	// one exits after it. A Close from any other goroutine, the group's or
	// the store's, waits for an OnDead call in progress to return: nothing
	// the group started runs after Close. A Delete of the stream does not
	// wait for it; the store's Close does.
	OnDead func(seq uint64, deliveries int) `json:"-"`
}

// groupFile is groups/NAME.json.
type groupFile struct {
	Version         int    `json:"version"`
	Name            string `json:"name"`
	AckWait         string `json:"ack_wait"`
	MaxDeliver      int    `json:"max_deliver,omitempty"`
	CheckpointEvery string `json:"checkpoint_every"`
	MaxAckPending   int    `json:"max_ack_pending"`
	// StartAt is the StartAt the group was created with (0: the stream's
	// first record): where it starts if it has no position yet.
	StartAt uint64 `json:"start_at,omitempty"`
}

// Msg is a record delivered by Group.Next.
type Msg struct {
	// Seq is the record's sequence number in the stream.
	Seq uint64
	// Data is the record: the dst given to Next, grown as needed. It
	// belongs to the caller.
	Data []byte
	// Delivery is 1 on a record's first delivery, 2 on its second...
	Delivery int
}

// slot is a delivered record's state in the group's window, indexed by
// seq % MaxAckPending.
type slot struct {
	// seq is the record last delivered through this slot; acked equals it
	// once that record is acked. Written by Next (under mu) and Ack.
	seq, acked atomic.Uint64
	// due is when the delivery expires (monotonic nanoseconds since the
	// group opened); 0 until the group's timer sets it, at its first pass
	// after the delivery (so that delivering reads no clock). n is the
	// delivery count, queued whether it waits in redo. Protected by
	// Group.mu.
	due    int64
	n      uint32
	queued bool
}

// Group is a consumer group of a stream: any number of goroutines call
// Next, and each record goes to one of them at a time, in stream order;
// a record not acked within AckWait, or nacked, goes out again, before any
// fresh record. The committed position, below which every record is
// acked, is a wal.Cursor of the stream's log, checkpointed every
// CheckpointEvery and by Close: after a crash the group resumes from its
// last checkpoint (records from there on may come again; none below it
// do). A group with one member is a plain ordered consumer.
//
// Its methods are safe for concurrent use. Ack does no I/O, takes no lock
// and does not allocate.
type Group struct {
	s     *Stream
	l     *wal.Log
	name  string
	opts  GroupOptions
	c     *wal.Cursor
	mask  uint64
	slots []slot
	epoch time.Time

	mu struct {
		sync.Mutex
		next     uint64   // the fresh record delivered next
		reading  bool     // a member is reading fresh records from c
		redo     []uint64 // records to deliver again, in order
		rr       *wal.Reader
		rrLast   uint64 // the last record rr returned, 0 if none
		closed   error  // why the group is closed, nil while open
		lastCkpt time.Time
		// delivered counts first deliveries, consumedBytes their data:
		// under mu, which every first delivery holds, so that counting
		// costs no locked instruction of its own.
		delivered, consumedBytes uint64
	}
	// wake interrupts the member waiting in c.NextOrWake.
	wake chan struct{}
	// bc wakes members waiting for the reader role, a redelivery or room
	// in the window; waiting counts them.
	bc      engine.Broadcaster
	waiting atomic.Int32
	full    atomic.Bool // a member waits for acks to make room

	stop chan struct{}
	done chan struct{}
	// pass is held by the timer during each pass (deadlines and
	// checkpoint), not while it calls OnDead; calling is set, under pass,
	// while it does (the store records the timer's goroutine id for as
	// long: see Store.inOnDead).
	pass    sync.Mutex
	calling atomic.Bool
	// closed is closed when the first close has finished: a close called
	// meanwhile, from another goroutine, waits for it.
	closed chan struct{}
	// closing is set, under mu, when the first close begins: read without
	// mu by Stream.Group, which holds the stream's lock (mu comes first).
	closing atomic.Bool
	// acking counts the Acks in progress: each adds itself, then looks at
	// closing; close sets closing, then waits for acking to drop to zero
	// before the cursor writes its last checkpoint. So an Ack either sees
	// the close and returns ErrClosed, or its ack is in the cursor before
	// that checkpoint is taken: an Ack that returned nil is never lost.
	acking atomic.Int32

	redelivered, acked, nacked, dead, skipped atomic.Uint64
}

// Group opens the consumer group name of the stream, creating it if it
// does not exist (StartAt then says where it starts). Opening an open
// group returns the same *Group; its options are those it was first
// opened with. Options given for an existing group replace the stored
// ones.
//
// A new group's file is written, durably, before its position (the wal
// cursor of its name): a power cut while a group is created leaves no
// trace of it, or a group that Groups lists and that opens normally,
// starting at its StartAt (or the first record the stream still holds),
// never a position without a group, which would hold the records of a
// stream kept UntilAcked for ever. Until it is first opened such a group
// holds no record from retention. A power cut that takes records at or
// before a group's StartAt (published, never confirmed) moves its start
// to the stream's end when it is next opened: the records published
// after the cut are the group's.
func (s *Stream) Group(name string, opts *GroupOptions) (*Group, error) {
	if err := checkName("group", name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaitDeleteLocked()
	if s.mu.err != nil {
		return nil, s.wrapErr(s.mu.err) // its groups, closed, are still listed
	}
	for {
		g, ok := s.mu.groups[name]
		if !ok {
			break
		}
		if !g.closing.Load() {
			return g, nil
		}
		// Closed by another goroutine, whose Close has not yet returned:
		// open the group again once that close has released its cursor.
		s.mu.Unlock()
		<-g.closed
		s.mu.Lock()
		s.awaitDeleteLocked()
		if s.mu.err != nil {
			return nil, s.wrapErr(s.mu.err)
		}
		if s.mu.groups[name] == g {
			delete(s.mu.groups, name)
		}
	}
	l, err := s.logLocked()
	if err != nil {
		return nil, err
	}
	g, err := s.openGroup(l, name, opts)
	if err != nil {
		return nil, fmt.Errorf("stream %q: group %q: %w", s.name, name, err)
	}
	s.mu.groups[name] = g
	return g, nil
}

// DeleteGroup removes group name of the stream, durably: its committed
// position (the wal cursor of its name) first, then its groups/NAME.json.
// From then on the group keeps no record from retention: in a stream kept
// UntilAcked, what every remaining group acked is deleted at once. It is
// how a group nobody will consume with again (a mistyped name, a retired
// consumer) stops holding the stream's records. An open group (Close it
// first), or a position another process holds (a shipper through
// wal.OpenCursor), is ErrGroupOpen; a group that does not exist is
// ErrNoGroup. A crash in the middle leaves the group without its position
// (as a crash while creating it may): deleting it again finishes; opening
// it instead starts it as a new group, at the StartAt it was created with
// or the first record the stream holds. A position without a group file
// (a cursor another process made, or what a crash of an older build left
// while creating a group) is deleted too.
func (s *Stream) DeleteGroup(name string) error {
	if err := checkName("group", name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaitDeleteLocked()
	if s.mu.err != nil {
		return s.wrapErr(s.mu.err)
	}
	if _, ok := s.mu.groups[name]; ok {
		return fmt.Errorf("stream %q: group %q: %w: close it first", s.name, name, ErrGroupOpen)
	}
	l, err := s.logLocked()
	if err != nil {
		return err
	}
	fsys := s.st.fsys
	path := filepath.Join(s.dir, _groupsDir, name+".json")
	_, statErr := fsys.Stat(path)
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return fmt.Errorf("stream %q: group %q: %w", s.name, name, statErr)
	}
	err = l.DeleteCursor(name)
	switch {
	case errors.Is(err, wal.ErrCursorOpen):
		return fmt.Errorf("stream %q: group %q: %w (%w)", s.name, name, ErrGroupOpen, err)
	case errors.Is(err, fs.ErrNotExist):
		if statErr != nil {
			return fmt.Errorf("stream %q: group %q: %w", s.name, name, ErrNoGroup)
		}
	case err != nil:
		return fmt.Errorf("stream %q: group %q: %w", s.name, name, err)
	}
	if statErr == nil {
		if err := fsys.Remove(path); err != nil {
			return fmt.Errorf("stream %q: delete group %q: %w", s.name, name, err)
		}
		if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
			return fmt.Errorf("stream %q: delete group %q: sync %s: %w", s.name, name, filepath.Dir(path), err)
		}
	}
	if s.cfg.Retention.UntilAcked {
		// As a group's checkpoint does (Group.truncate): what the groups
		// left have acked goes. With no group left the stream keeps
		// everything: TruncateFront, finding no cursor, would delete it
		// all.
		if floor, ok := cursorFloor(l); ok {
			_ = l.TruncateFront(floor)
		}
	}
	return nil
}

// Groups returns the names of the stream's groups, open or not, sorted:
// those with a group file. A position in the stream's log without one (a
// cursor another process holds, a shipper's through wal.OpenCursor, or
// what a power cut left of a group being created by an older build) is no
// group: wal.Log.Cursors lists those, and DeleteGroup removes them.
func (s *Stream) Groups() ([]string, error) {
	s.mu.Lock()
	s.awaitDeleteLocked()
	err := s.mu.err
	s.mu.Unlock()
	if err != nil {
		return nil, s.wrapErr(err)
	}
	dir := filepath.Join(s.dir, _groupsDir)
	names, err := s.st.fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %q: list groups: %w", s.name, err)
	}
	var out []string
	for _, n := range names {
		name, ok := strings.CutSuffix(n, ".json")
		if ok && checkName("group", name) == nil {
			out = append(out, name) // not a temporary file, NAME.json.tmp
		}
	}
	slices.Sort(out)
	return out, nil
}

// cursorFloor returns the lowest checkpointed position of l's cursors (the
// groups' positions and those of other processes), ok false if it has
// none or they cannot be read.
func cursorFloor(l *wal.Log) (floor uint64, ok bool) {
	cs, err := l.Cursors()
	if err != nil {
		return 0, false
	}
	for _, c := range cs {
		if c.Err != nil {
			return 0, false
		}
		if !ok || c.Committed < floor {
			floor, ok = c.Committed, true
		}
	}
	return floor, ok
}

// openGroup opens or creates group name on l.
// REQUIRES: s.mu is held.
func (s *Stream) openGroup(l *wal.Log, name string, given *GroupOptions) (*Group, error) {
	fsys := s.st.fsys
	path := filepath.Join(s.dir, _groupsDir, name+".json")
	var stored groupFile
	err := readJSON(fsys, path, &stored)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var o GroupOptions
	switch {
	case given != nil:
		o = *given
	case exists:
		var problem string
		o, problem = stored.options(name)
		if problem != "" {
			return nil, &MetaError{Path: path, Problem: problem}
		}
	}
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	// An AckWait meant as "never" (math.MaxInt64) must not overflow a
	// delivery's deadline into the past.
	o.AckWait = min(o.AckWait, _maxAckWait)
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = DefaultMaxAckPending
	}
	var bad string
	switch {
	case o.AckWait < 0 || o.CheckpointEvery < 0:
		bad = fmt.Sprintf("negative AckWait %v or CheckpointEvery %v", o.AckWait, o.CheckpointEvery)
	case o.MaxDeliver < 0:
		bad = fmt.Sprintf("negative MaxDeliver %d", o.MaxDeliver)
	case o.MaxAckPending < 0 || o.MaxAckPending > MaxAckPending:
		bad = fmt.Sprintf("MaxAckPending %d not in [1, %d]", o.MaxAckPending, MaxAckPending)
	}
	switch {
	case bad != "" && given == nil:
		return nil, &MetaError{Path: path, Problem: bad} // the stored options
	case bad != "":
		return nil, errors.New(bad)
	}
	if !exists && o.StartAt != 0 {
		// Checked before the cursor is made: the cursor of a group refused
		// would keep records from retention (UntilAcked) for a group that
		// does not exist.
		if first := l.FirstSeq(); o.StartAt < first {
			return nil, fmt.Errorf("StartAt %d: %w", o.StartAt, &wal.TruncatedError{Seq: o.StartAt, First: first})
		}
		if next := l.NextSeq(); o.StartAt > next {
			return nil, fmt.Errorf("%w: StartAt %d is past the stream's end (next is %d)", wal.ErrNotAppended, o.StartAt, next)
		}
	}
	// The group file is written first, durably: it is what makes the group
	// exist, and a position is made only for a group that has one (as
	// DeleteGroup removes the position first, then the file). A power cut
	// in between leaves a group file without a position, which opening
	// the group completes, never a position no group owns, which would
	// hold the stream's records from retention (UntilAcked) for ever.
	start := o.StartAt // where the group starts: recorded in its file
	write := !exists || given != nil
	if exists {
		start = stored.StartAt
		if next := l.NextSeq(); start > next {
			// A power cut took records at or before the group's start,
			// never confirmed: the sequence numbers from the stream's end
			// on go to records published after the group, which are its
			// own. Its start moves to the end, durably, before its
			// position is placed; otherwise each reopen would move the
			// group to its old start again, past such records, as far as
			// the stream reaches then.
			start, write = next, true
		}
	}
	if write {
		if err := s.writeGroupFile(path, o.file(name, start)); err != nil {
			return nil, err
		}
	}
	// Acks reach the cursor only for the records delivered and unacked, at
	// most MaxAckPending above the committed position: its window needs
	// no more (8 bytes a record).
	c, err := l.CursorWith(name, &wal.CursorOptions{AckWindow: o.MaxAckPending})
	if err != nil {
		if !exists && errors.Is(err, wal.ErrCursorOpen) {
			// Another holder's position of that name: this group was never
			// made. Any other failure leaves the group file, a group that
			// opening again completes.
			s.removeGroupFile(path)
		}
		return nil, err
	}
	if err := s.placeCursor(l, c, exists, start); err != nil {
		c.Close()
		return nil, err
	}
	// The slots of the window: a power of two at least MaxAckPending, so
	// that the records delivered and unacked never share one.
	window := uint64(1) << bits.Len(uint(o.MaxAckPending-1))
	g := &Group{
		s:      s,
		l:      l,
		name:   name,
		opts:   o,
		c:      c,
		mask:   window - 1,
		slots:  make([]slot, window),
		epoch:  time.Now(),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		closed: make(chan struct{}),
	}
	g.mu.next = c.Committed()
	g.mu.lastCkpt = time.Now()
	s.st.timerStarted()
	go g.timer()
	return g, nil
}

// placeCursor moves the cursor c of a group that starts at start (0: the
// stream's first record) to where the group starts, if it is not past it
// already. For a new group (exists false) the cursor is new, or one that a
// crash of an older build left without its group file: it is moved to
// start. For an existing group, a cursor below start is one made after a
// power cut between the group file and its position, or after a
// DeleteGroup cut in the middle: the group starts there as it would have
// when created, within the records the stream holds. A group's position
// is otherwise never below its start.
func (s *Stream) placeCursor(l *wal.Log, c *wal.Cursor, exists bool, start uint64) error {
	first, next := l.FirstSeq(), l.NextSeq()
	if !exists {
		if start == 0 {
			start = first
		}
		if c.Committed() != start {
			return c.Seek(start)
		}
		return nil
	}
	if start == 0 {
		return nil
	}
	at := min(max(start, first), next)
	if c.Committed() < at {
		return c.Seek(at)
	}
	return nil
}

// writeGroupFile writes the group file path, durably, creating the
// stream's groups directory if it is missing.
func (s *Stream) writeGroupFile(path string, f groupFile) error {
	fsys := s.st.fsys
	dir := filepath.Dir(path)
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return writeJSON(fsys, path, f)
}

// removeGroupFile removes the group file path of a group whose creation
// failed, as best it can: what it leaves is a group without a position,
// which opening again completes.
func (s *Stream) removeGroupFile(path string) {
	if err := s.st.fsys.Remove(path); err == nil {
		_ = s.st.fsys.SyncDir(filepath.Dir(path))
	}
}

func (o *GroupOptions) file(name string, start uint64) groupFile {
	return groupFile{
		Version:         1,
		Name:            name,
		StartAt:         start,
		AckWait:         o.AckWait.String(),
		MaxDeliver:      o.MaxDeliver,
		CheckpointEvery: o.CheckpointEvery.String(),
		MaxAckPending:   o.MaxAckPending,
	}
}

func (f *groupFile) options(name string) (GroupOptions, string) {
	if f.Version != 1 {
		return GroupOptions{}, fmt.Sprintf("version %d, this build reads version 1", f.Version)
	}
	if f.Name != name {
		return GroupOptions{}, fmt.Sprintf("records group %q, not %q", f.Name, name)
	}
	aw, err := time.ParseDuration(f.AckWait)
	if err != nil {
		return GroupOptions{}, fmt.Sprintf("ack_wait: %v", err)
	}
	ce, err := time.ParseDuration(f.CheckpointEvery)
	if err != nil {
		return GroupOptions{}, fmt.Sprintf("checkpoint_every: %v", err)
	}
	return GroupOptions{AckWait: aw, MaxDeliver: f.MaxDeliver, CheckpointEvery: ce, MaxAckPending: f.MaxAckPending}, ""
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// now returns monotonic nanoseconds since the group opened.
func (g *Group) now() int64 { return int64(time.Since(g.epoch)) }

// Next waits for a record for this member and returns it, its data
// appended to dst[:0]. Redeliveries (nacked or expired records) come
// first, lowest sequence number first; then fresh records in stream order.
// It returns when a record is available, ctx is done, or the group,
// stream or store is closed (ErrClosed, or ErrNotFound once the stream
// was deleted). With ctx done already it takes no record. A nil ctx is
// an error.
//
// A record deleted by retention before it was delivered (Retention without
// UntilAcked) is skipped and counted in GroupStats.Skipped.
func (g *Group) Next(ctx context.Context, dst []byte) (Msg, error) {
	if ctx == nil {
		return Msg{}, fmt.Errorf("stream: group %q: Next: nil context", g.name)
	}
	if err := ctx.Err(); err != nil {
		return Msg{}, err // a member that stops takes no record
	}
	for {
		g.mu.Lock()
		if err := g.mu.closed; err != nil {
			g.mu.Unlock()
			return Msg{}, g.settled(err)
		}
		if m, ok, err := g.redeliverLocked(dst); ok || err != nil {
			g.mu.Unlock()
			if err != nil {
				return m, g.settled(err)
			}
			return m, nil
		}
		if !g.mu.reading && g.mu.next-g.c.Committed() < uint64(g.opts.MaxAckPending) {
			m, ok, err := g.readFresh(ctx, dst) // releases and retakes mu
			if ok || err != nil {
				g.mu.Unlock()
				if err != nil {
					return m, g.settled(err)
				}
				return m, nil
			}
			g.mu.Unlock()
			continue
		}
		// Wait for the reader role, a redelivery or room in the window.
		w := g.bc.Waiter()
		w.Arm()
		g.waiting.Add(1)
		if !g.mu.reading {
			g.full.Store(true)
		}
		room := !g.mu.reading && g.mu.next-g.c.Committed() < uint64(g.opts.MaxAckPending)
		g.mu.Unlock()
		if !room {
			select {
			case <-w.C():
			case <-ctx.Done():
				g.waiting.Add(-1)
				w.Release()
				return Msg{}, ctx.Err()
			}
		}
		g.waiting.Add(-1)
		w.Release()
	}
}

// readFresh reads the next fresh record as the group's reader. A record
// already visible is read with mu held (no other member can be reading:
// none has the role); otherwise mu is released while it waits. ok is
// false when it was woken (by a redelivery, a close or a gap) without a
// record.
// REQUIRES: g.mu is held, !g.mu.reading; it is held again on return.
func (g *Group) readFresh(ctx context.Context, dst []byte) (m Msg, ok bool, err error) {
	seq, rec, ok, err := g.c.Poll()
	switch {
	case ok:
		m = Msg{Seq: seq, Data: append(dst[:0], rec...), Delivery: 1}
	case err == nil:
		g.mu.reading = true
		g.mu.Unlock()
		seq, rec, err = g.c.NextOrWake(ctx, g.wake)
		if err == nil {
			m = Msg{Seq: seq, Data: append(dst[:0], rec...), Delivery: 1}
		}
		g.mu.Lock()
		g.mu.reading = false
		if g.waiting.Load() > 0 {
			g.bc.Broadcast()
		}
	}
	ge, gap := errors.AsType[*wal.GapError](err)
	te, truncated := errors.AsType[*wal.TruncatedError](err)
	switch {
	case err == nil:
		sl := &g.slots[seq&g.mask]
		sl.seq.Store(seq)
		sl.n = 1
		sl.due = 0 // set by the timer's next pass
		sl.queued = false
		g.mu.next = seq + 1
		g.mu.delivered++
		g.mu.consumedBytes += uint64(len(m.Data))
		return m, true, nil
	case errors.Is(err, wal.ErrWoken):
		return Msg{}, false, nil
	case gap:
		// The cursor acked the gap's records; they will never come.
		g.mu.next = ge.End
		return Msg{}, false, nil
	case truncated:
		// Retention deleted records this group had not read.
		if serr := g.c.Seek(te.First); serr != nil {
			return Msg{}, false, g.s.mapErr(serr)
		}
		g.skipped.Add(te.First - g.mu.next)
		g.mu.next = te.First
		return Msg{}, false, nil
	case errors.Is(err, wal.ErrClosed):
		if cerr := g.mu.closed; cerr != nil {
			return Msg{}, false, cerr
		}
		return Msg{}, false, g.s.mapErr(err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Msg{}, false, err
	}
	return Msg{}, false, g.s.mapErr(err) // a failed log: name the stream
}

// redeliverLocked delivers the first queued redelivery, if any.
// REQUIRES: g.mu is held.
func (g *Group) redeliverLocked(dst []byte) (Msg, bool, error) {
	for len(g.mu.redo) > 0 {
		seq := g.mu.redo[0]
		g.mu.redo = g.mu.redo[1:]
		sl := &g.slots[seq&g.mask]
		if sl.seq.Load() != seq {
			continue
		}
		sl.queued = false
		if sl.acked.Load() == seq {
			continue
		}
		rec, err := g.readAt(seq)
		if err != nil {
			if te, ok := errors.AsType[*wal.TruncatedError](err); ok && te.First > seq {
				// Deleted by retention while unacked: it cannot come again.
				g.skipped.Add(1)
				_, _ = g.ackSlot(sl, seq) // a closed group stops at its next call
				continue
			}
			return Msg{}, false, g.s.mapErr(err)
		}
		sl.n++
		sl.due = 0 // set by the timer's next pass
		g.redelivered.Add(1)
		return Msg{Seq: seq, Data: append(dst[:0], rec...), Delivery: int(sl.n)}, true, nil
	}
	return Msg{}, false, nil
}

// readAt returns record seq, read with the group's redelivery Reader,
// which it moves forward (or reopens to go back). A *wal.TruncatedError
// says that retention deleted seq.
// REQUIRES: g.mu is held.
func (g *Group) readAt(seq uint64) ([]byte, error) {
	for {
		opened := false
		if g.mu.rr == nil || g.mu.rrLast >= seq {
			if g.mu.rr != nil {
				g.mu.rr.Close()
				g.mu.rr = nil
			}
			r, err := g.l.NewReader(seq, nil)
			if err != nil {
				return nil, err
			}
			g.mu.rr, g.mu.rrLast, opened = r, 0, true
		}
		r := g.mu.rr
		for r.Next() {
			g.mu.rrLast = r.Seq()
			if r.Seq() == seq {
				return r.Record(), nil
			}
			if r.Seq() > seq {
				break
			}
		}
		err := r.Err()
		r.Close()
		g.mu.rr = nil
		if te, ok := errors.AsType[*wal.TruncatedError](err); ok && !opened && te.First <= seq {
			// Placed before seq, the Reader reached segments retention
			// deleted; seq is still there: read it from a Reader placed
			// at it (which says whether it went meanwhile).
			continue
		}
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("stream %q: group %q: record %d was delivered but cannot be read again", g.s.name, g.name, seq)
	}
}

// ackSlot acks seq in its slot and the cursor. It reports whether seq was
// not acked before, and the cursor's error: in the window by construction,
// so only wal.ErrClosed once the group's cursor is closed.
func (g *Group) ackSlot(sl *slot, seq uint64) (bool, error) {
	for {
		old := sl.acked.Load()
		if old >= seq {
			return false, nil
		}
		if sl.acked.CompareAndSwap(old, seq) {
			break
		}
	}
	err := g.c.Ack(seq)
	if g.full.Load() {
		g.full.Store(false)
		g.bc.Broadcast()
	}
	return true, err
}

// Ack records that record seq was processed: it is never delivered again
// by this group, and the committed position moves past it once every
// record below it is acked. Acks may come in any order and more than once.
// It does no I/O and does not allocate. A record not delivered by this
// group is ErrNotDelivered. An Ack that returns nil counts, even one
// racing Close: the close's last checkpoint includes it. Once Close has
// begun the ack cannot be recorded and is ErrClosed (the group opened
// next delivers the record again), except for a record below the
// committed position, acked already; a record acked before Close above
// that position is ErrClosed too, as it comes again all the same. An ack of any delivery of the record acks it: a member
// whose delivery expired and went to another member may still ack what
// it processed.
func (g *Group) Ack(seq uint64) error {
	if seq < g.c.Committed() {
		return nil
	}
	// Counted in progress before closing is read (see acking): a close
	// that began already refuses the ack, one that begins from here on
	// waits for it.
	g.acking.Add(1)
	if g.closing.Load() {
		g.acking.Add(-1)
		// The group opened after it delivers seq again, even if an Ack
		// before the close took it: it was above the committed position.
		return g.closedErr(nil)
	}
	sl := &g.slots[seq&g.mask]
	if sl.seq.Load() != seq {
		g.acking.Add(-1)
		return fmt.Errorf("%w: group %q: record %d", ErrNotDelivered, g.name, seq)
	}
	// A slot acked already was acked by an Ack that reached the cursor,
	// or that is in progress and that a close waits for.
	acked, err := g.ackSlot(sl, seq)
	g.acking.Add(-1)
	if err != nil {
		// The cursor was closed under the group, its log with it.
		return g.closedErr(err)
	}
	if acked {
		g.acked.Add(1)
	}
	return nil
}

// closedErr returns why the group is closed (its names and ErrClosed or
// the stream's error), or err mapped (see Stream.mapErr) if it is open.
func (g *Group) closedErr(err error) error {
	g.mu.Lock()
	cerr := g.mu.closed
	g.mu.Unlock()
	if cerr == nil {
		cerr = g.s.mapErr(err)
	}
	return g.settled(cerr)
}

// settled returns err, an error of a group call, unless it says that the
// stream was deleted (errDeleted) by a Delete still deciding whether the
// stream goes: then it waits for that Delete, and returns why the group
// is closed after it (ErrClosed, and why, if the stream stays). A member
// never finds the stream gone that a Delete that failed leaves there.
// REQUIRES: no lock is held.
func (g *Group) settled(err error) error {
	if !g.s.awaitDelete(err) {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed != nil {
		return g.mu.closed
	}
	return err
}

// Nack asks for record seq to be delivered again now, before any fresh
// record. It counts as a delivery that failed: with MaxDeliver, a record
// nacked after its last delivery is dead. It acts on the record's current
// delivery, whichever member has it: a member whose delivery may have
// expired and gone to another (AckWait passed) nacks with NackMsg instead.
func (g *Group) Nack(seq uint64) error { return g.nack(seq, 0) }

// NackMsg is Nack of the delivery m (its Seq and Delivery, as Next
// returned them): a delivery that is no longer the record's current one
// (it expired or was nacked, by another member or by a NackMsg before,
// whether or not the record went out again since) is ErrNotDelivered,
// and the record, in another member's hands or queued to go out again,
// is left as it is. An ack of any delivery acks the record (see Ack).
func (g *Group) NackMsg(m Msg) error {
	if m.Delivery < 1 {
		return fmt.Errorf("%w: stream %q: group %q: record %d: delivery %d (deliveries count from 1)", ErrNotDelivered, g.s.name, g.name, m.Seq, m.Delivery)
	}
	return g.nack(m.Seq, m.Delivery)
}

// nack is Nack of delivery of record seq, or of its current delivery if
// delivery is 0.
func (g *Group) nack(seq uint64, delivery int) error {
	sl := &g.slots[seq&g.mask]
	g.mu.Lock()
	if err := g.mu.closed; err != nil {
		g.mu.Unlock()
		return g.settled(err)
	}
	if seq < g.c.Committed() || sl.seq.Load() != seq || sl.acked.Load() == seq {
		g.mu.Unlock()
		return fmt.Errorf("%w: stream %q: group %q: record %d is not delivered and unacked", ErrNotDelivered, g.s.name, g.name, seq)
	}
	if delivery != 0 && (uint32(delivery) != sl.n || uint64(delivery) > math.MaxUint32) {
		n := sl.n
		g.mu.Unlock()
		return fmt.Errorf("%w: stream %q: group %q: record %d: delivery %d is not its current one (delivery %d)", ErrNotDelivered, g.s.name, g.name, seq, delivery, n)
	}
	if delivery != 0 && sl.queued {
		// Nacked, or expired, and queued to go out again: the delivery
		// is over, and the record is left as it is.
		g.mu.Unlock()
		return fmt.Errorf("%w: stream %q: group %q: record %d: delivery %d was nacked or expired, and the record is queued to go out again", ErrNotDelivered, g.s.name, g.name, seq, delivery)
	}
	g.nacked.Add(1)
	dead := g.expireLocked(sl, seq)
	n := int(sl.n)
	g.mu.Unlock()
	if dead {
		g.reportDead(seq, n)
	}
	return nil
}

// expireLocked queues the delivered, unacked record seq for redelivery,
// or makes it dead when it had MaxDeliver deliveries. It reports whether
// it died.
// REQUIRES: g.mu is held.
func (g *Group) expireLocked(sl *slot, seq uint64) (dead bool) {
	if sl.queued {
		return false
	}
	if g.opts.MaxDeliver > 0 && int(sl.n) >= g.opts.MaxDeliver {
		// A member's Ack, which takes no lock, may have come since the
		// caller saw the record unacked: then it is acked, not dead.
		// (A closed group's ack fails; it stops at its next call.)
		if first, _ := g.ackSlot(sl, seq); !first {
			return false
		}
		g.dead.Add(1)
		return true
	}
	sl.queued = true
	i, _ := slices.BinarySearch(g.mu.redo, seq)
	g.mu.redo = slices.Insert(g.mu.redo, i, seq)
	select {
	case g.wake <- struct{}{}:
	default:
	}
	if g.waiting.Load() > 0 {
		g.bc.Broadcast()
	}
	return false
}

func (g *Group) reportDead(seq uint64, n int) {
	if g.opts.OnDead != nil {
		g.opts.OnDead(seq, n)
	}
}

// Committed returns the committed position: the lowest record not yet
// acked (every record below it was).
func (g *Group) Committed() uint64 { return g.c.Committed() }

// Checkpoint writes the committed position now, durably (it waits for the
// acked records to be durable in the stream first).
func (g *Group) Checkpoint() error {
	if err := g.closedErr(nil); err != nil {
		return err
	}
	acked := g.c.Committed()
	if err := g.c.Commit(context.Background()); err != nil {
		return g.closedErr(err) // closed meanwhile, or the log failed
	}
	g.mu.Lock()
	g.mu.lastCkpt = time.Now()
	g.mu.Unlock()
	g.truncate(acked)
	return nil
}

// truncate deletes what every group acked, for a stream kept UntilAcked,
// after a checkpoint: at most the records below acked, this group's
// committed position when it began.
func (g *Group) truncate(acked uint64) {
	if g.s.cfg.Retention.UntilAcked {
		// TruncateFront keeps every record at or after the lowest
		// checkpointed position of any group, open or not. Bounded by
		// this group's own position too: the group may have been closed
		// and deleted since its checkpoint (by another goroutine), and
		// with no cursor left TruncateFront would delete every record.
		_ = g.l.TruncateFront(acked)
	}
}

// timerPhase returns where in its period the timer of group name of
// stream starts: a fraction of period, in [0, period), from a hash of the
// names.
func timerPhase(stream, name string, period time.Duration) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(stream + "/" + name))
	return period * time.Duration(h.Sum32()%1024) / 1024
}

// timerPeriod returns the period of the timer of a group with options o:
// AckWait/4, at most CheckpointEvery and 1 s, and at least 1 ms whatever
// they say.
func timerPeriod(o *GroupOptions) time.Duration {
	return max(min(o.AckWait/4, o.CheckpointEvery, time.Second), time.Millisecond)
}

// timer expires deliveries older than AckWait and checkpoints every
// CheckpointEvery, until Close.
func (g *Group) timer() {
	defer g.s.st.timerExited()
	defer close(g.done)
	period := timerPeriod(&g.opts)
	// Groups opened together (a broker starting) would check and
	// checkpoint together, every period, each checkpoint a few system
	// calls and two syncs: start each at its own phase of the period,
	// from its names, so that their passes spread over it.
	phase := time.NewTimer(timerPhase(g.s.name, g.name, period))
	select {
	case <-g.stop:
		phase.Stop()
		return
	case <-phase.C:
	}
	t := time.NewTicker(period)
	defer t.Stop()
	var deadSeqs []uint64
	var deadN []int
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		g.pass.Lock()
		select {
		case <-g.stop: // closed while the tick was taken
			g.pass.Unlock()
			return
		default:
		}
		deadSeqs, deadN = deadSeqs[:0], deadN[:0]
		g.mu.Lock()
		// Every delivery so far took mu before this clock read: one with
		// no deadline yet was made before now, so now+AckWait is never
		// too soon.
		now := g.now()
		for seq := g.c.Committed(); seq < g.mu.next; seq++ {
			sl := &g.slots[seq&g.mask]
			if sl.seq.Load() != seq || sl.acked.Load() == seq || sl.queued {
				continue
			}
			if sl.due == 0 {
				sl.due = now + int64(g.opts.AckWait)
			}
			if sl.due > now {
				continue
			}
			if g.expireLocked(sl, seq) {
				deadSeqs, deadN = append(deadSeqs, seq), append(deadN, int(sl.n))
			}
		}
		ckpt := time.Since(g.mu.lastCkpt) >= g.opts.CheckpointEvery
		g.mu.Unlock()
		if ckpt {
			acked := g.c.Committed()
			ctx, cancel := context.WithTimeout(context.Background(), max(g.opts.CheckpointEvery, period))
			err := g.c.Commit(ctx)
			cancel()
			if err == nil {
				g.mu.Lock()
				g.mu.lastCkpt = time.Now()
				g.mu.Unlock()
				g.truncate(acked)
			}
		}
		// Set under pass: a close that took pass after this pass sees
		// whom not to wait for.
		calling := len(deadSeqs) > 0
		var id uint64
		if calling {
			id = goid()
			g.s.st.onDeadBegin(id)
		}
		g.calling.Store(calling)
		g.pass.Unlock()
		for i, seq := range deadSeqs {
			g.reportDead(seq, deadN[i])
		}
		if calling {
			g.s.st.onDeadEnd(id)
		}
		g.calling.Store(false)
	}
}

// Close writes the group's last checkpoint and closes it; members waiting
// in Next return ErrClosed. It waits for an OnDead call in progress,
// unless it is called from an OnDead call (see GroupOptions.OnDead). The group may be
// opened again. Later calls return nil, once the first has finished.
func (g *Group) Close() error {
	err := g.close(ErrClosed)
	g.s.mu.Lock()
	if g.s.mu.groups[g.name] == g {
		delete(g.s.mu.groups, g.name)
	}
	g.s.mu.Unlock()
	g.join()
	return err
}

// join waits for the group's timer, stopped by close, to exit, unless it
// is calling OnDead and the caller is a timer calling OnDead, this one or
// another group's: that call may be waiting for the caller's (a Close
// from each group's OnDead of the other). A timer not calling OnDead
// exits without running user code. It holds no lock: OnDead may take any.
func (g *Group) join() {
	// close took pass after it stopped the timer: a pass that set
	// calling came before, and no pass sets it after. A timer whose
	// goroutine id could not be read is in the store's record as
	// _unknownG, which inOnDead takes for any caller.
	if g.calling.Load() && g.s.st.inOnDead() {
		return
	}
	<-g.done
}

// close stops the group: members return why. A call while another
// closes the group waits for it to finish, and returns nil. It does not
// wait for an OnDead call in progress (a Delete calls it holding the
// store's lock, which OnDead may take); Group.Close and Store.Close do,
// after it.
func (g *Group) close(why error) error {
	g.mu.Lock()
	if g.mu.closed != nil {
		g.mu.Unlock()
		<-g.closed
		return nil
	}
	defer close(g.closed)
	g.mu.closed = fmt.Errorf("stream %q: group %q: %w", g.s.name, g.name, why)
	g.closing.Store(true)
	select {
	case g.wake <- struct{}{}:
	default:
	}
	g.bc.Broadcast()
	// Wait for the reader to leave the cursor: Cursor.Close must not run
	// concurrently with its Next.
	for g.mu.reading {
		w := g.bc.Waiter()
		w.Arm()
		g.waiting.Add(1)
		g.mu.Unlock()
		select {
		case g.wake <- struct{}{}:
		default:
		}
		<-w.C()
		g.waiting.Add(-1)
		w.Release()
		g.mu.Lock()
	}
	if g.mu.rr != nil {
		g.mu.rr.Close()
		g.mu.rr = nil
	}
	g.mu.Unlock()
	close(g.stop)
	// Wait for the timer's pass in progress, then for the timer to exit,
	// unless it is calling OnDead: that may be what called close, and the
	// timer does nothing after it but exit.
	g.pass.Lock()
	calling := g.calling.Load()
	g.pass.Unlock()
	if !calling {
		<-g.done
	}
	// Let the Acks that saw the group open reach the cursor before its
	// last checkpoint; those that come now see closing and are refused.
	// None waits for anything, so this is short.
	for g.acking.Load() != 0 {
		runtime.Gosched()
	}
	err := g.c.Close()
	if errors.Is(err, wal.ErrClosed) {
		err = nil
	}
	return err
}

// GroupStats is a snapshot of a group's counters, since it was opened.
type GroupStats struct {
	// Committed is the lowest unacked record; Next the fresh record
	// delivered next.
	Committed, Next uint64
	// Delivered counts first deliveries, Redelivered the others, Acked
	// the records acked, Nacked the Nack calls.
	Delivered, Redelivered, Acked, Nacked uint64
	// Dead counts records that reached MaxDeliver; Skipped records
	// retention deleted before this group got them.
	Dead, Skipped uint64
	// Pending is the number of records delivered and not yet acked;
	// Redeliveries those of them queued to go out again.
	Pending, Redeliveries int
	// LagRecords is the number of records published and not yet
	// delivered; LagBytes their size, frames included, estimated from the
	// stream's mean record size.
	LagRecords, LagBytes uint64
	// OldestUnacked is how long the oldest delivered, unacked record has
	// waited, to within the group's timer period (see AckWait: it counts
	// from the timer's first pass after the delivery); CheckpointAge how
	// long since the last checkpoint.
	OldestUnacked, CheckpointAge time.Duration
	// ConsumedBytes counts the data delivered the first time.
	ConsumedBytes uint64
}

// CaughtUp returns when a member last found no record to take from the
// stream and began to wait for one (see wal.Cursor.CaughtUp); the zero
// time if none did.
func (g *Group) CaughtUp() time.Time { return g.c.CaughtUp() }

// Stats returns the group's counters.
func (g *Group) Stats() GroupStats {
	g.mu.Lock()
	out := GroupStats{
		Committed:     g.c.Committed(),
		Next:          g.mu.next,
		Delivered:     g.mu.delivered,
		ConsumedBytes: g.mu.consumedBytes,
	}
	for _, seq := range g.mu.redo {
		// Not those acked since they were queued: Next passes them.
		if sl := &g.slots[seq&g.mask]; sl.seq.Load() == seq && sl.acked.Load() != seq {
			out.Redeliveries++
		}
	}
	now := g.now()
	var oldest int64 = -1
	for seq := out.Committed; seq < out.Next; seq++ {
		sl := &g.slots[seq&g.mask]
		if sl.seq.Load() == seq && sl.acked.Load() != seq {
			out.Pending++
			at := now // delivered since the timer's last pass
			if sl.due != 0 {
				at = sl.due - int64(g.opts.AckWait) // the pass after the delivery
			}
			if oldest < 0 || at < oldest {
				oldest = at
			}
		}
	}
	if oldest >= 0 {
		out.OldestUnacked = time.Duration(now - oldest)
	}
	out.CheckpointAge = time.Since(g.mu.lastCkpt)
	g.mu.Unlock()
	out.Redelivered = g.redelivered.Load()
	out.Acked, out.Nacked = g.acked.Load(), g.nacked.Load()
	out.Dead, out.Skipped = g.dead.Load(), g.skipped.Load()
	ls := g.l.Stats()
	if ls.NextSeq > out.Next {
		out.LagRecords = ls.NextSeq - out.Next
		if n := ls.NextSeq - 1; n > 0 && ls.Appended > 0 {
			// Appended counts since the log opened; so does its record count.
			recs := ls.NextSeq - g.l.Recovery().NextSeq
			if recs > 0 {
				out.LagBytes = out.LagRecords * (ls.Appended / recs)
			}
		}
	}
	return out
}
