package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
)

// Retention bounds what a log keeps. Whole sealed segments, oldest first,
// are deleted; the active segment never is. A zero field means no bound.
// The sealer goroutine applies it after each segment is sealed, and with
// MaxAge a goroutine of the Log also applies it every MaxAge/4 (at most
// every minute), off the write path: deleting never blocks Append.
type Retention struct {
	// MaxBytes bounds the total size of the segment files; the active
	// segment counts as Options.SegmentSize (its preallocated size).
	MaxBytes int64
	// MaxAge deletes a sealed segment once its last record was written
	// longer ago than MaxAge (a segment found at Open is dated by its
	// file's modification time). It applies to the active segment too:
	// one that nothing was written to for MaxAge is sealed, dated by its
	// last record, and deleted, by the flusher's timer MaxAge after that
	// record (or by the first write after, if it comes first); new records
	// start a new segment. A log that gets no write at all still loses its
	// records MaxAge after the last one.
	MaxAge time.Duration
	// IgnoreCursors lets retention and TruncateFront delete records that a
	// Cursor has not committed. By default they never delete a record at
	// or above the lowest checkpointed Cursor position: that of every
	// cursor in the cursors directory when the deletion reads them, a
	// cursor that OpenCursor is creating in another process included (the
	// lock file cursors/..floor.lock orders the two, see OpenCursor). A
	// background pass that finds that lock held (a cursor being created)
	// deletes nothing and is counted in Stats.RetentionSkipped; the next
	// pass does its work.
	IgnoreCursors bool
}

// ErrTruncated is matched (errors.Is) by the *TruncatedError of a read
// below the log's first record.
var ErrTruncated = errors.New("wal: records deleted by retention")

// TruncatedError reports a read of sequence number Seq, which retention or
// TruncateFront deleted: the first record still in the log is First.
type TruncatedError struct {
	Seq, First uint64
}

func (e *TruncatedError) Error() string {
	if e.Seq == 0 {
		// No record has sequence number 0: nothing was deleted.
		return fmt.Sprintf("wal: there is no record 0 (sequence numbers start at 1); the first record available is %d", e.First)
	}
	return fmt.Sprintf("wal: record %d was deleted by retention; the first record available is %d", e.Seq, e.First)
}

// Is reports whether target is ErrTruncated.
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

// FirstSeq returns the sequence number of the first record the log still
// holds (retention and TruncateFront move it up); with no record yet, the
// one the first Append gets.
func (l *Log) FirstSeq() uint64 { return l.segs.first.Load() }

// TruncateFront deletes every segment that holds only records below seq,
// never the active one, and makes the deletion durable (directory fsync)
// before it returns. Records from the first segment holding seq onwards
// stay. Unless Options.Retention.IgnoreCursors is set it deletes nothing
// at or above the lowest checkpointed Cursor position, including that of
// a cursor OpenCursor is creating in another process: if it would delete
// something while one is (the floor lock is held, see OpenCursor), it
// waits for it, for a few seconds at most, then deletes nothing and
// returns an error wrapping ErrFloorBusy naming the holder. Readers
// positioned in a deleted segment finish it; a read below FirstSeq
// afterwards is a *TruncatedError. Appends go on meanwhile. A failure of
// background retention since the last call is returned too.
//
// A segment that a rotation just created gets its name (a rename and a
// directory fsync by the sealer) only after the segment before it is
// durably sealed; until then a power cut would leave the log without it.
// TruncateFront waits for that name before it deletes the segment before
// it, so that a power cut never leaves a log emptied of the records
// TruncateFront kept, starting its sequence numbers again at 1.
func (l *Log) TruncateFront(seq uint64) error {
	if err := l.mapErr(l.eng.Err()); err != nil {
		return err
	}
	if s := l.segs.unnamedTail(); s != nil {
		// Not under l.ret: the sealer takes it (applyRetention) before
		// it names the segment of the next rotation.
		<-s.named
	}
	closed := false
	// Not under l.ret while it waits for the floor lock: Log.Cursor and
	// the sealer's retention go on meanwhile.
	err := whileBusy(l.opts.clock, func() error {
		l.ret.Lock()
		defer l.ret.Unlock()
		if closed = l.ret.closed; closed {
			return nil
		}
		return l.deleteFront(func(s *liveSeg, _ int64) bool { return s.end.Load() <= seq })
	})
	if closed {
		return ErrClosed
	}
	l.ret.Lock()
	defer l.ret.Unlock()
	if berr := l.ret.err; berr != nil {
		l.ret.err = nil
		err = errors.Join(err, berr)
	}
	return err
}

// applyRetention applies Options.Retention, unless the log failed. The
// sealer calls it after each seal, and the ager every period; an error is
// kept for the next TruncateFront.
func (l *Log) applyRetention() {
	r := l.opts.Retention
	if r.MaxBytes <= 0 && r.MaxAge <= 0 {
		return
	}
	if l.eng.Err() != nil {
		return // a failed log deletes nothing more, as its sealer does not
	}
	l.ret.Lock()
	defer l.ret.Unlock()
	if l.ret.closed {
		return
	}
	now := l.now()
	err := l.deleteFront(func(s *liveSeg, total int64) bool {
		if r.MaxBytes > 0 && total > r.MaxBytes {
			return true
		}
		return r.MaxAge > 0 && !s.sealedAt.IsZero() && now.Sub(s.sealedAt) > r.MaxAge
	})
	if errors.Is(err, ErrFloorBusy) {
		// OpenCursor is creating a cursor: never wait on the sealer. The
		// next pass (the next seal's, or the ager's) deletes instead.
		l.retSkipped.Add(1)
		return
	}
	if err != nil && l.ret.err == nil {
		l.ret.err = fmt.Errorf("wal: retention: %w", err)
	}
}

// now reads the log's clock.
func (l *Log) now() time.Time {
	if l.opts.clock != nil {
		return l.opts.clock.Now()
	}
	return time.Now()
}

// deleteFront deletes sealed segments from the oldest on while drop says
// so, given the segment and the total size of the segments (the active one
// counted as SegmentSize) before it is deleted; it stops at the first one
// kept, at the active segment, at the one before the active segment
// while the active one's name is not durable (see liveSeg.named), and at
// the cursors' floor. Files are removed oldest first, so a crash leaves a
// log that starts later, never one with a hole, and never one with no
// segment.
//
// When the cursors' floor applies and something would be deleted, it
// holds the floor lock (see the cursor files) from before it reads the
// cursors' checkpoints until the files are removed, so that a cursor
// OpenCursor creates meanwhile, in any process, is either read or starts
// after the deletion. If the lock is held, it deletes nothing and returns
// an error wrapping ErrFloorBusy. REQUIRES: l.ret held.
func (l *Log) deleteFront(drop func(s *liveSeg, total int64) bool) error {
	floor := ^uint64(0)
	t := l.segs
	if !l.opts.Retention.IgnoreCursors && l.retentionFloor != nil {
		t.mu.Lock()
		k := frontDeletable(t.mu.segs, floor, l.opts.SegmentSize, drop)
		t.mu.Unlock()
		if k == 0 {
			return nil // nothing to delete: no cursor to read
		}
		// A new cursor's lock file is in the cursors directory: make it,
		// or a cursor created after this look at it could not be seen.
		if err := makeCursorDir(l.opts.fsys, l.dir); err != nil {
			return err
		}
		lock, err := tryFloorLock(l.opts.fsys, l.dir, "retention")
		if err != nil {
			return err
		}
		// Closing the lock's file releases it, whatever the unlock says.
		defer lock.Close()
		f, ok, err := l.retentionFloor()
		if err != nil {
			return fmt.Errorf("wal: retention: cursor positions: %w", err)
		}
		if ok {
			floor = f
		}
	}
	t.mu.Lock()
	segs := t.mu.segs
	k := frontDeletable(segs, floor, l.opts.SegmentSize, drop)
	gone := append([]*liveSeg(nil), segs[:k]...)
	if k > 0 {
		t.mu.segs = append(segs[:0:0], segs[k:]...)
		t.first.Store(t.mu.segs[0].firstSeq)
	}
	t.mu.Unlock()
	if len(gone) == 0 {
		return nil
	}
	var err error
	for _, s := range gone {
		if err == nil {
			if rerr := l.opts.fsys.Remove(filepath.Join(l.dir, s.name)); rerr != nil {
				err = fmt.Errorf("wal: delete segment %s: %w", s.name, rerr)
			}
			t.removeIndexFile(s)
		}
		t.mu.Lock()
		t.dropLocked(s)
		t.mu.Unlock()
	}
	if serr := l.opts.fsys.SyncDir(l.dir); err == nil && serr != nil {
		err = fmt.Errorf("wal: delete segments: sync directory %s: %w", l.dir, serr)
	}
	l.deleted.Add(int64(len(gone)))
	return err
}

// frontDeletable returns how many segments from the front of segs
// deleteFront deletes: sealed ones, while drop says so (given the total
// size of the segments, the active one counted as segSize), the name of
// the next one is durable, and the records of each end at or below floor.
func frontDeletable(segs []*liveSeg, floor uint64, segSize int64, drop func(s *liveSeg, total int64) bool) int {
	var total int64
	for _, s := range segs[:max(len(segs)-1, 0)] {
		total += s.size
	}
	total += segSize
	k := 0
	for ; k < len(segs)-1; k++ {
		s := segs[k]
		if s.end.Load() > floor || !segs[k+1].nameDurable() || !drop(s, total) {
			break
		}
		total -= s.size
	}
	return k
}

// retentionAger applies Retention.MaxAge to a log that does not seal
// segments: a goroutine, started by Open and joined by Close, runs
// retention every period.
type retentionAger struct {
	stop chan struct{} // closed to stop the goroutine; nil if none runs
	done chan struct{} // closed when it exits
}

// _agerMaxPeriod bounds the ager's period: a segment is deleted at most
// this long after it expired.
const _agerMaxPeriod = time.Minute

// initRetention prepares the segment writer for Retention.MaxAge, before
// the flusher starts: the active segment is sealed before a write once it
// was idle for MaxAge, and its last write is dated by its file's
// modification time.
func (l *Log) initRetention() {
	age := l.opts.Retention.MaxAge
	if age <= 0 {
		return
	}
	l.w.sealIdle = age
	l.w.lastWrite = l.now()
	if st, err := l.opts.fsys.Stat(filepath.Join(l.dir, l.w.live.name)); err == nil {
		l.w.lastWrite = st.ModTime()
	}
}

// startRetention starts the ager if Retention.MaxAge is set.
func (l *Log) startRetention() {
	age := l.opts.Retention.MaxAge
	if age <= 0 {
		return
	}
	clk := l.opts.clock
	if clk == nil {
		clk = clock.Real()
	}
	period := max(min(age/4, _agerMaxPeriod), time.Millisecond)
	l.ager.stop, l.ager.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(l.ager.done)
		t := clk.NewTimer(period)
		defer t.Stop()
		for {
			select {
			case <-l.ager.stop:
				return
			case <-t.C():
			}
			l.applyRetention()
			t.Reset(period)
		}
	}()
}

// stopRetention stops the ager and waits for it (Close).
func (l *Log) stopRetention() {
	if l.ager.stop != nil {
		close(l.ager.stop)
		<-l.ager.done
	}
}

// sealDueIn returns how long until the active segment is due to be
// sealed for having had nothing written to it for sealIdle
// (Retention.MaxAge), or -1 when it is not to be: no MaxAge, no record in
// it, or a record only partly written (the write that completes it comes
// first). Flusher only.
func (w *segWriter) sealDueIn(now time.Time) time.Duration {
	if w.sealIdle <= 0 || w.count == 0 || w.inFrame || w.nhdr != 0 {
		return -1
	}
	return max(w.sealIdle-now.Sub(w.lastWrite), 0)
}

// sealQuiet seals the active segment at pos, the end of its last record,
// dated last (its last write), so that retention deletes it as soon as it
// is older than MaxAge. Flusher only.
func (w *segWriter) sealQuiet(pos uint64, last time.Time) error {
	if w.table != nil && w.live != nil {
		w.table.dateSeal(w.live, last) // before rotate: the sealer may apply retention at once
	}
	return w.rotate(pos)
}

// sealAged seals the active segment at pos, before the records written
// from pos on, if it holds records and nothing was written to it for
// sealIdle; the sealed segment is dated by its last write, so retention
// deletes it as soon as it is older than MaxAge. It notes the time of
// this write. Flusher only (segWriter.Write).
func (w *segWriter) sealAged(pos uint64) error {
	now, last := w.now(), w.lastWrite
	due := w.sealDueIn(now) == 0
	w.lastWrite = now
	if !due {
		return nil
	}
	return w.sealQuiet(pos, last)
}
