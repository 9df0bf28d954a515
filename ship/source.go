package ship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

// source is what a Shipper reads: records by sequence number, acked when
// Kafka acknowledged them, with a durable committed position.
type source interface {
	// next returns the next record; rec is valid until the next call. It
	// returns an error once ctx is done, and a *wal.GapError, with no
	// record, for a recorded gap, whose records the source acked.
	next(ctx context.Context) (seq uint64, rec []byte, err error)
	ack(seq uint64) error
	// committed is the lowest sequence number not acked; end the sequence
	// number after the source's last record.
	committed() uint64
	end() uint64
	// commit makes the committed position durable.
	commit(ctx context.Context) error
	// rewind makes next deliver the records from the committed position
	// on again, those read and not acked. REQUIRES: no ack meanwhile.
	rewind() error
	// caughtUp is when the source last had nothing more to deliver and
	// began to wait (the zero time if never).
	caughtUp() time.Time
	// lost reports records deleted before they were read, which the
	// source went on after.
	lost() error
	// record returns a copy of record seq, and false if the source never
	// held it; an error wrapping wal.ErrTruncated if it no longer does. It
	// waits (until ctx is done) for a record appended and not yet readable.
	record(ctx context.Context, seq uint64) ([]byte, bool, error)
	// name describes the source in errors.
	name() string
	close() error
}

// walSource reads a wal log through a cursor: one on an open wal.Log, or
// one from wal.OpenCursor on a log another process writes.
type walSource struct {
	c   *wal.Cursor
	dir string
	// open opens a reader of the log from a sequence number.
	open func(from uint64) (*wal.Reader, error)
}

func (w *walSource) record(ctx context.Context, seq uint64) ([]byte, bool, error) {
	r, err := w.open(seq)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	for !r.Next() {
		if r.Err() != nil || seq >= w.c.End() {
			return nil, false, nil
		}
		// Appended, and still in the log's buffer: taken for a record
		// the log never held, the read-back would skip the records up to
		// it unchecked. A waiting Reader makes the log write it at once.
		if err := r.Wait(ctx); err != nil {
			return nil, false, err
		}
	}
	if r.Seq() != seq {
		return nil, false, nil
	}
	return bytes.Clone(r.Record()), true, nil
}

func (w *walSource) next(ctx context.Context) (uint64, []byte, error) {
	return w.c.Next(ctx) // a *wal.GapError's records the cursor acked
}

func (w *walSource) ack(seq uint64) error             { return w.c.Ack(seq) }
func (w *walSource) committed() uint64                { return w.c.Committed() }
func (w *walSource) end() uint64                      { return w.c.End() }
func (w *walSource) commit(ctx context.Context) error { return w.c.Commit(ctx) }
func (w *walSource) rewind() error                    { return w.c.Seek(w.c.Committed()) }
func (w *walSource) name() string                     { return w.dir }
func (w *walSource) caughtUp() time.Time              { return w.c.CaughtUp() }
func (w *walSource) lost() error                      { return nil } // the cursor returns a *wal.TruncatedError
func (w *walSource) close() error                     { return w.c.Close() }

// groupSource reads a stream through a consumer group the shipper is the
// only member of.
type groupSource struct {
	s *stream.Stream
	// g is the group, replaced by rewind (Stats reads it meanwhile).
	g atomic.Pointer[stream.Group]
	// open opens the group again, with the shipper's options (rewind).
	open func() (*stream.Group, error)
	buf  []byte
	// want is the seq after the last record delivered (at first the
	// committed position); skipped the group's GroupStats.Skipped when
	// opened; lostBefore the records a group rewind closed had skipped.
	want, skipped, lostBefore uint64
}

// newGroupSource returns the source reading s through g, which open opens
// again.
func newGroupSource(s *stream.Stream, g *stream.Group, open func() (*stream.Group, error)) *groupSource {
	gs := &groupSource{s: s, open: open, want: g.Committed(), skipped: g.Stats().Skipped}
	gs.g.Store(g)
	return gs
}

// _groupAckWait is the AckWait of a shipper's group: a record waits for
// Kafka's acknowledgement as long as it takes, and is never handed out
// again meanwhile (a redelivery would be a duplicate).
const _groupAckWait = time.Duration(math.MaxInt64 / 4)

func (gs *groupSource) next(ctx context.Context) (uint64, []byte, error) {
	m, err := gs.g.Load().Next(ctx, gs.buf)
	if err != nil {
		return 0, nil, err
	}
	gs.buf = m.Data
	if m.Delivery != 1 {
		return 0, nil, fmt.Errorf("record %d delivered %d times: the group has another member", m.Seq, m.Delivery)
	}
	if m.Seq > gs.want {
		// Records lost to damage (a recorded gap), deleted by retention,
		// or delivered to another member (a consumer that opened the
		// group in this process got the shipper's).
		if err := gs.lost(); err != nil {
			return 0, nil, err
		}
		if seq, ok := gs.held(gs.want, m.Seq); ok {
			return 0, nil, gs.otherMember(seq)
		}
	}
	gs.want = m.Seq + 1
	return m.Seq, m.Data, nil
}

// lost reports the records the stream's retention deleted before the
// group delivered them: the group goes on after them (counting them in
// GroupStats.Skipped), so they never reach Kafka; and those delivered to
// another member and acked.
func (gs *groupSource) lost() error {
	g := gs.g.Load()
	if n := gs.lostBefore + g.Stats().Skipped - gs.skipped; n > 0 {
		return fmt.Errorf("%d records of stream %s were deleted by its retention before they were shipped: they are not in Kafka, and group %s has gone on after them (keep the stream UntilAcked so that retention waits for the shipper)",
			n, gs.s.Name(), g.Name())
	}
	// The committed position passed records that never came to the
	// shipper: a gap's, or another member's, acked.
	if c := g.Committed(); c > gs.want {
		if seq, ok := gs.held(gs.want, c); ok {
			return gs.otherMember(seq)
		}
	}
	return nil
}

// otherMember is the error for record seq, which the group delivered to
// another member than the shipper.
func (gs *groupSource) otherMember(seq uint64) error {
	return fmt.Errorf("record %d of stream %s went to another member of group %s: it is not in Kafka (a shipper must be its group's only member: a consumer of this process that opens the group while the shipper has it open gets the shipper's)",
		seq, gs.s.Name(), gs.g.Load().Name())
}

// held returns the first record the stream holds from seq from on, if it
// is below to.
func (gs *groupSource) held(from, to uint64) (uint64, bool) {
	first, _, ok, err := gs.firstFrom(from, false)
	return first, err == nil && ok && first < to
}

func (gs *groupSource) record(_ context.Context, seq uint64) ([]byte, bool, error) {
	got, p, ok, err := gs.firstFrom(seq, true)
	if err != nil || !ok || got != seq {
		return nil, false, err
	}
	return p, p != nil, nil
}

// errFound stops a Scan at its first record (see firstFrom).
var errFound = errors.New("found")

// firstFrom returns the stream's first record at or after seq and, with
// data, a copy of its payload; ok is false when it holds none.
func (gs *groupSource) firstFrom(seq uint64, data bool) (got uint64, p []byte, ok bool, err error) {
	err = gs.s.Scan(seq, func(s uint64, b []byte) error {
		got, ok = s, true
		if data {
			p = bytes.Clone(b)
		}
		return errFound
	})
	if err == errFound {
		err = nil
	}
	return got, p, ok, err
}

func (gs *groupSource) ack(seq uint64) error         { return gs.g.Load().Ack(seq) }
func (gs *groupSource) committed() uint64            { return gs.g.Load().Committed() }
func (gs *groupSource) end() uint64                  { return gs.s.NextSeq() }
func (gs *groupSource) commit(context.Context) error { return gs.g.Load().Checkpoint() }
func (gs *groupSource) caughtUp() time.Time          { return gs.g.Load().CaughtUp() }
func (gs *groupSource) name() string {
	return fmt.Sprintf("stream %s group %s", gs.s.Name(), gs.g.Load().Name())
}
func (gs *groupSource) close() error { return gs.g.Load().Close() }

// rewind closes the group and opens it again: a group does not deliver a
// record again to its one member (a redelivery is taken for another
// member's, see next), but a group opened anew delivers from its
// committed position, which its close checkpointed, the records read and
// not acked included. Acks above the committed position are forgotten, so
// records Kafka took may come again too: prepare's read-back finds them.
func (gs *groupSource) rewind() error {
	old := gs.g.Load()
	lost := old.Stats().Skipped - gs.skipped // not reported yet: lost reports them still
	closeErr := old.Close()
	if closeErr != nil {
		closeErr = fmt.Errorf("close group %s to read it again from its committed position %d: %w", old.Name(), old.Committed(), closeErr)
	}
	g, err := gs.open()
	if err != nil {
		return errors.Join(closeErr, fmt.Errorf("open group %s again: %w", old.Name(), err))
	}
	gs.lostBefore += lost
	gs.skipped = g.Stats().Skipped
	gs.want = g.Committed()
	gs.g.Store(g)
	return closeErr
}
