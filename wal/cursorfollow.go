package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/engine/clock"
)

// cursorFollower is the state of a cursor from OpenCursor: a consumer of a
// log another process writes (or nobody does).
type cursorFollower struct {
	opts Options
	// mu serialises the cursor's checkpoint writes; writes counts them.
	mu     sync.Mutex
	writes atomic.Int64
	// failed is the first fdatasync error of a segment, after which no
	// checkpoint is written again: a failed sync is never retried (the
	// kernel may have dropped the pages it could not write). Protected by
	// mu.
	failed error
	stopc  chan struct{} // closed by Close to stop the checkpointer
	done   chan struct{} // closed when the checkpointer exits
}

// OpenCursor opens the durable cursor name of the log in dir without
// opening the log itself: for a consumer in another process than the
// writer's (a shipper beside a service), or of a log nobody writes. It
// takes no log lock and writes nothing but the cursor's files.
//
// It is the Cursor of Log.Cursor in every respect but these:
//   - Next reads through a following Reader (see OpenReader): it waits for
//     the writer's records through the files' change events, and sees a
//     record once the writer handed it to the OS. NextOrWake looks at its
//     wake channel between those events and the follower's polls, so
//     within the poll interval rather than at once.
//   - A record may be acked once the cursor knows it is in the files (it
//     is below End); ErrAckRange above.
//   - A checkpoint makes the records it covers durable itself: before it
//     writes one it fdatasyncs the segments holding the records acked
//     since the last, so a checkpoint never points past a record a power
//     cut could take back, whatever the writer's sync policy. A failed
//     fdatasync is never retried: every later checkpoint, Commit and
//     Close returns that error.
//   - Commit writes the checkpoint at once; there is no waiting on a
//     writer's group commit.
//   - The checkpointer is a goroutine of the cursor's own, joined by Close.
//
// The writer's retention keeps every record this cursor has not
// checkpointed past, as for a cursor of its own (unless
// Retention.IgnoreCursors). That holds from the start, across processes:
// OpenCursor holds the lock file cursors/..floor.lock from before it
// reads where the log starts until a new cursor's checkpoint is in the
// directory, and a deletion of the writer's that would delete something
// holds it from before it reads the cursors' checkpoints until its files
// are removed. So a new cursor is either counted by a deletion, which
// then keeps the log's first record, or created after it, and starts at
// the first record the deletion left (Committed, and the first Next,
// say which); its checkpoint never names a deleted record. Neither side
// waits long: a background retention pass that finds the lock held skips
// its turn (Stats.RetentionSkipped), and OpenCursor tries again for a few
// seconds, then returns an error wrapping ErrFloorBusy naming the holder.
// The kernel releases the lock of a process that dies holding it. (On
// systems without flock(2) the lock only orders the callers of one
// process.) A cursor is open in one place at a time,
// across processes: a cursor open in the writer or another consumer is
// ErrCursorOpen naming the holder. A checkpoint past the end of the
// records in the files is clamped to that end and reported by Clamped.
// opts configures the reads (MaxRecordSize, ReaderWindow,
// CheckpointEvery); nil means the defaults.
func OpenCursor(dir, name string, opts *Options, copts *CursorOptions) (*Cursor, error) {
	if err := checkCursorName(name); err != nil {
		return nil, err
	}
	window, err := ackWindow(name, copts)
	if err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if _, _, err := openDir(o.fsys, dir, "open cursor"); err != nil {
		return nil, err
	}
	if err := makeCursorDir(o.fsys, dir); err != nil {
		return nil, err
	}
	fol := &cursorFollower{opts: o, stopc: make(chan struct{}), done: make(chan struct{})}
	c := newCursor(o.fsys, dir, name, window, &fol.mu, &fol.writes)
	c.fol = fol
	var floor io.Closer
	err = c.start(func() (first, end uint64, err error) {
		// Held until the new checkpoint is in the directory: start
		// writes it before it returns.
		first, end, c.logID, floor, err = followBounds(dir, &o, "OpenCursor")
		if err != nil {
			return 0, 0, fmt.Errorf("wal: open cursor %q: %w", name, err)
		}
		return first, end, nil
	})
	if floor != nil {
		// Closing the lock's file releases it, whatever the unlock says.
		_ = floor.Close()
	}
	if err != nil {
		return nil, err
	}
	clk := o.clock
	if clk == nil {
		clk = clock.Real()
	}
	go c.followLoop(clk, o.CheckpointEvery)
	return c, nil
}

// followBounds is readBounds for a cursor from OpenCursor about to write
// a checkpoint at a position it checks against them (a new cursor's, a
// Seek's): it also takes the floor lock of the log in dir, for holder,
// waiting for it as whileBusy does, and returns it held; the caller
// releases it once the checkpoint is in the directory. That orders the
// checkpoint against the writer's deletions: a deletion that read the
// cursors before the checkpoint was there has removed its segments
// before the lock is taken, and the first record is read again under the
// lock. The bounds are read before the lock, which is not held while the
// last segment is read through.
func followBounds(dir string, o *Options, holder string) (first, end uint64, id frame.LogID, floor io.Closer, err error) {
	if first, end, id, err = readBounds(dir, o); err != nil {
		return 0, 0, id, nil, err
	}
	err = whileBusy(o.clock, func() error {
		var err error
		floor, err = tryFloorLock(o.fsys, dir, holder)
		return err
	})
	if err != nil {
		return 0, 0, id, nil, err
	}
	f, err := firstInFiles(o.fsys, dir)
	if err != nil {
		_ = floor.Close() // closing the lock's file releases it
		return 0, 0, id, nil, err
	}
	first = max(first, f)
	return first, max(end, first), id, floor, nil
}

// End returns the sequence number after the log's last record as far as
// the cursor knows: for a cursor on an open Log, the Log's NextSeq. For one
// from OpenCursor it reads the directory and the last segment's header:
// the greatest of the end of the records in the files when the cursor was
// opened, the record after the last one Next delivered, the last
// segment's first sequence number and the durable mark the writer keeps in
// its header (what an earlier, completed sync made durable, written at
// most about 10 ms after it). So it may lag the writer by the records
// appended since a sync some 10 ms back; the records of a segment the
// writer has not named yet (see OpenReader) show once it does.
func (c *Cursor) End() uint64 {
	if c.fol == nil {
		return c.l.NextSeq()
	}
	end := c.appended.Load()
	segs, _, _, err := listSegments(c.fsys, c.dir)
	if err != nil || len(segs) == 0 {
		return end
	}
	last := segs[len(segs)-1]
	end = max(end, last.firstSeq)
	f, err := c.fsys.OpenRegular(filepath.Join(c.dir, last.name), os.O_RDONLY, 0)
	if err != nil {
		return end
	}
	defer f.Close()
	if h, mark, err := readHeader(f); err == nil && h.FirstSeq == last.firstSeq && mark.NextSeq > end {
		end = mark.NextSeq
	}
	return end
}

// followLoop is the checkpointer of a cursor from OpenCursor.
func (c *Cursor) followLoop(clk clock.Clock, period time.Duration) {
	defer close(c.fol.done)
	t := clk.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-c.fol.stopc:
			return
		case <-t.C():
		}
		// A failed write is kept in c.err and returned by Commit and
		// Close; the next period tries again.
		_ = c.checkpoint(math.MaxUint64)
		t.Reset(period)
	}
}

// syncBelow fdatasyncs the segments holding the records from the last
// checkpoint up to v, for a cursor from OpenCursor, and then fsyncs the
// log directory: the writer names a new segment (a rename of its spare
// file) before it fsyncs the directory, and a power cut in between brings
// the file back under the spare's name, which recovery removes with its
// records. A segment retention deleted meanwhile needs nothing.
// REQUIRES: c.wmu is held.
func (c *Cursor) syncBelow(v uint64) error {
	if c.fol.failed != nil {
		return c.fol.failed
	}
	segs, _, _, err := listSegments(c.fsys, c.dir)
	if err != nil {
		return fmt.Errorf("wal: checkpoint cursor %q: %w", c.name, err)
	}
	synced := false
	for i, s := range segs {
		if s.firstSeq >= v {
			break
		}
		if i+1 < len(segs) && segs[i+1].firstSeq <= c.written {
			continue // only records the last checkpoint covered
		}
		path := filepath.Join(c.dir, s.name)
		f, err := c.fsys.OpenRegular(path, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wal: checkpoint cursor %q: open %s: %w", c.name, path, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			c.fol.failed = fmt.Errorf("wal: checkpoint cursor %q: fdatasync %s: %w (no checkpoint is written after a failed sync)", c.name, path, err)
			return c.fol.failed
		}
		synced = true
	}
	if synced {
		if err := c.fsys.SyncDir(c.dir); err != nil {
			c.fol.failed = fmt.Errorf("wal: checkpoint cursor %q: fsync directory %s: %w (no checkpoint is written after a failed sync)", c.name, c.dir, err)
			return c.fol.failed
		}
	}
	return nil
}

// closeFollow is Close of a cursor from OpenCursor.
func (c *Cursor) closeFollow() error {
	c.closing.Store(true) // before the checkpoint below reads the position
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(c.fol.stopc)
	<-c.fol.done
	err := c.checkpoint(math.MaxUint64)
	return errors.Join(err, c.unlock())
}
