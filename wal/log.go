package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/hist"
	"github.com/appendlog/appendlog/internal/vfs"
)

// Log is a durable segmented log. Append, AppendBatch, Flush, Sync,
// WaitDurable and the accessors may be called from many goroutines at once.
type Log struct {
	dir    string
	opts   Options
	lock   io.Closer
	eng    *engine.Engine
	w      *segWriter
	rec    Recovery
	maxRec int

	// wrap is the scratch buffer for frames that straddle the ring's end.
	wrap struct {
		sync.Mutex
		buf []byte // Protected by the mutex.
	}

	// cursors are the log's durable consumer cursors (cursor.go).
	cursors cursorSet

	// segs lists the segments for Readers (NewReader) and retention.
	segs *segTable
	// ret serialises deletions (TruncateFront, and retention on the
	// sealer). closed stops them once Close began; err is a background
	// retention failure not yet returned by TruncateFront.
	ret struct {
		sync.Mutex
		closed bool  // Protected by the mutex.
		err    error // Protected by the mutex.
	}
	// retentionFloor reports the lowest position retention must keep (ok
	// false: no bound), unless Options.Retention.IgnoreCursors. Open sets
	// it to cursorFloor; deletion never removes a record at or above it.
	retentionFloor func() (floor uint64, ok bool, err error)
	// deleted counts segments deleted by retention and TruncateFront.
	deleted atomic.Int64
	// retSkipped counts background retention passes skipped for a busy
	// floor lock (OpenCursor was creating a cursor).
	retSkipped atomic.Int64
	// ager applies Retention.MaxAge on a quiet log (retention.go).
	ager retentionAger

	closeOnce sync.Once
	closeErr  error
}

// Recovery describes what Open found and did.
type Recovery struct {
	// Segments is the number of segment files the log had when opened.
	Segments int
	// FirstSeq and NextSeq bound the records present after recovery:
	// [FirstSeq, NextSeq). Both are 1 for an empty log.
	FirstSeq, NextSeq uint64
	// TailSegment is the segment appends continue in.
	TailSegment string
	// ScannedBytes counts the segment bytes that were CRC-checked: the
	// tail's, and with Options.VerifyOnOpen every sealed segment's too.
	ScannedBytes int64
	// TruncatedAt is the offset in TailSegment where a torn tail was cut, or
	// -1. TruncatedBytes counts the non-zero bytes cut there, and Damage
	// says what the first of them looked like.
	TruncatedAt    int64
	TruncatedBytes int64
	Damage         error
	// Gaps lists the gaps recorded by a forced Repair that Open read past:
	// those in the tail, and with Options.VerifyOnOpen those in every
	// segment. Open accepts a recorded gap; see GapError.
	Gaps []GapError
	// RemovedSegment names an incomplete segment (crash while it was being
	// created, no records in it) that Open removed.
	RemovedSegment string
}

// Open opens the log in dir, creating the directory and the log if needed,
// or recovering it: sealed segments are trusted by their footer (or, with
// Options.VerifyOnOpen, CRC-scanned as well); the tail segment is
// CRC-scanned and a torn tail (damage past the last durable mark) is cut
// and reported in Recovery. Damage where durable data lives is a
// *CorruptionError naming segment and offset; Open never skips it. A gap a
// forced Repair recorded is accepted (see GapError).
//
// Only one Log may have a log open at a time, in this process or another: a
// second Open fails with an error wrapping ErrInUse that names the lock file
// and its holder. A directory holding other files but no segment and no
// LOCK file appendlog wrote is refused with a *NotLogError (ErrNotLog); an
// empty or missing directory becomes an empty log. Other failures name
// their cause (a read-only file system, a permission, not a directory) and
// wrap the system's error, so errors.Is(err, fs.ErrPermission) works.
func Open(dir string, opts *Options) (*Log, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	fsys := o.fsys
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
			return nil, fmt.Errorf("wal: open %s: %w", dir, err)
		}
	}
	// Refuse a file, or a directory of something else, before the lock
	// file is created in it.
	if _, _, err := openDir(fsys, dir, "open"); err != nil {
		return nil, err
	}
	lock, err := lockLog(fsys, dir, "open", fmt.Sprintf("%s%d", _holderPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: o, lock: lock, maxRec: o.MaxRecordSize}
	w, rec, err := recoverLog(fsys, dir, &o)
	if err != nil {
		lock.Close()
		return nil, notSegmentFile(fsys, dir, err)
	}
	l.w, l.rec = w, rec
	if l.segs, err = newSegTable(fsys, dir, &o); err != nil {
		w.closeFile(false)
		lock.Close()
		return nil, err
	}
	l.retentionFloor = l.cursorFloor
	w.written.Store(rec.NextSeq)
	w.table, w.onSeal, w.now = l.segs, l.applyRetention, l.now
	w.live, w.indexed = l.segs.mu.segs[len(l.segs.mu.segs)-1], w.startOff
	l.initRetention()
	w.seals = make(chan *sealJob, 1)
	w.sealed = make(chan struct{})
	l.eng, err = engine.New(engine.Config{
		Size:          o.BufferSize,
		FlushInterval: o.FlushInterval,
		Sync:          engineSyncMode(o.Sync),
		SyncEvery:     o.SyncEvery,
		BatchBytes:    o.BatchBytes,
		BatchAge:      o.BatchAge,
		FirstSeq:      rec.NextSeq,
		Clock:         o.clock,
	}, w)
	if err != nil {
		w.seals = nil // no sealer runs yet
		w.closeFile(false)
		l.segs.close()
		lock.Close()
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	// No spare segment yet: the first rotation creates one, and the sealer
	// prepares each next one off the write path. Open and Close of a log
	// that never rotates do no preallocation work for it. The sealer starts
	// once l.eng is set: after a seal it applies retention, which asks the
	// engine whether the log failed. A rotation before it starts waits in
	// w.seals.
	go w.sealLoop()
	l.startRetention()
	return l, nil
}

// engineSyncMode maps a validated SyncMode to the engine's policy of the
// same meaning.
func engineSyncMode(m SyncMode) engine.SyncMode {
	switch m {
	case SyncInterval:
		return engine.SyncInterval
	case SyncBatch:
		return engine.SyncBatch
	}
	return engine.SyncNever
}

// Recovery returns what Open found and did.
func (l *Log) Recovery() Recovery { return l.rec }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Append appends one record and returns its sequence number. It returns once
// the record is in the log's buffer: use WaitDurable (or SyncBatch mode's
// batch bounds) for durability. p is copied; the caller may reuse it.
func (l *Log) Append(p []byte) (uint64, error) {
	if len(p) > l.maxRec {
		return 0, fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, len(p), l.maxRec)
	}
	n := frame.HeaderSize + len(p)
	c, err := l.eng.Claim(n, 1)
	if err != nil {
		return 0, l.mapErr(err)
	}
	l.encode(c, 0, c.Seq, p)
	l.eng.Commit(c)
	return c.Seq, nil
}

// encode writes record p with sequence number seq into claim c at offset
// off. The frame is encoded in place in the ring, checksum computed over the
// copy; a frame that straddles the ring's end (once per BufferSize bytes) is
// encoded into a shared scratch buffer first.
func (l *Log) encode(c engine.Claim, off int, seq uint64, p []byte) {
	n := frame.HeaderSize + len(p)
	a, b := l.eng.Slice(c, off, n)
	if len(b) == 0 {
		frame.Encode(a, seq, p)
		return
	}
	l.wrap.Lock()
	if cap(l.wrap.buf) < n {
		l.wrap.buf = make([]byte, n)
	}
	buf := l.wrap.buf[:n]
	frame.Encode(buf, seq, p)
	l.eng.Put(c, off, buf)
	l.wrap.Unlock()
}

// AppendBatch appends recs as consecutive records, contiguous in the log,
// and returns the sequence number of the first. The whole batch (payloads
// plus 16 bytes each) must fit in half the buffer.
func (l *Log) AppendBatch(recs [][]byte) (first uint64, err error) {
	if len(recs) == 0 {
		return 0, nil
	}
	total := 0
	for _, p := range recs {
		if len(p) > l.maxRec {
			return 0, fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, len(p), l.maxRec)
		}
		total += frame.HeaderSize + len(p)
	}
	if total > l.opts.BufferSize/2 {
		return 0, fmt.Errorf("%w: batch of %d bytes (max %d, half the buffer)", ErrTooLarge, total, l.opts.BufferSize/2)
	}
	c, err := l.eng.Claim(total, len(recs))
	if err != nil {
		return 0, l.mapErr(err)
	}
	off := 0
	for i, p := range recs {
		l.encode(c, off, c.Seq+uint64(i), p)
		off += frame.HeaderSize + len(p)
	}
	l.eng.Commit(c)
	return c.Seq, nil
}

// Flush returns once every record appended before the call has been handed
// to the OS. Cancelling ctx abandons the wait, not the write. A nil ctx is
// ErrNilContext.
func (l *Log) Flush(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Flush", ErrNilContext)
	}
	return l.mapErr(l.eng.Flush(ctx))
}

// Sync returns once every record appended before the call is durable
// (fdatasync, and the directory fsynced for any segment created). A nil ctx
// is ErrNilContext.
func (l *Log) Sync(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Sync", ErrNilContext)
	}
	return l.mapErr(l.eng.Sync(ctx))
}

// WaitDurable returns once record seq is durable. Waiters from many
// goroutines share one fdatasync (group commit); only a sync that covered
// the record releases its waiter. A lone waiter whose ctx can never be
// cancelled (context.Background), with no sync in flight, writes and syncs
// on its own goroutine rather than wake the flusher and wait to be woken.
// Cancelling ctx abandons the wait: a cancellable wait never runs I/O on
// its caller's goroutine. A nil ctx is ErrNilContext.
func (l *Log) WaitDurable(ctx context.Context, seq uint64) error {
	if ctx == nil {
		return fmt.Errorf("%w: WaitDurable", ErrNilContext)
	}
	if l.w.durable.Load() > seq {
		return nil
	}
	pos, next := l.eng.Tail()
	if seq >= next {
		if err := l.mapErr(l.eng.Err()); err != nil {
			return err
		}
		return fmt.Errorf("%w: %d (next is %d)", ErrNotAppended, seq, next)
	}
	if ctx.Done() == nil && l.eng.SyncInline(pos) && l.w.durable.Load() > seq {
		return nil
	}
	l.eng.RequestSync(pos)
	return l.mapErr(l.eng.AwaitAtLeast(ctx, &l.w.durable, seq+1))
}

// DurableSeq returns the highest sequence number known durable, or 0 if no
// record is.
func (l *Log) DurableSeq() uint64 { return l.w.durable.Load() - 1 }

// NextSeq returns the sequence number the next Append will get.
func (l *Log) NextSeq() uint64 {
	_, seq := l.eng.Tail()
	return seq
}

// Stats is a snapshot of the log's counters.
type Stats struct {
	NextSeq, DurableSeq uint64
	Appended, Written   uint64 // bytes since Open, frames included
	Syncs, Writes       uint64
	// InlineSyncs counts the Syncs that ran on a waiting caller's own
	// goroutine rather than the flusher's: a lone WaitDurable or Sync with
	// a context that cannot be cancelled (see WaitDurable).
	InlineSyncs     uint64
	SegmentsCreated int64
	// SegmentsDeleted counts segments deleted by retention and
	// TruncateFront since Open.
	SegmentsDeleted int64
	// RetentionSkipped counts background retention passes that deleted
	// nothing because OpenCursor, in this process or another, was
	// creating a cursor at that moment (see OpenCursor); the next pass,
	// after the next seal or the MaxAge timer, deletes what they would
	// have. A count that keeps growing while segments pile up means a
	// process holds cursors/..floor.lock and does not let go.
	RetentionSkipped int64
	// SyncLatency times the fdatasync of each group commit (the wait for
	// the disk, not the queueing before it).
	SyncLatency Histogram
	// SyncedRecords counts the records those fdatasyncs made durable:
	// SyncedRecords / SyncLatency.Count() is the mean group-commit size.
	SyncedRecords uint64
	// Failed is true once a write or sync failed: every later call
	// returns that error, and nothing is retried.
	Failed bool
}

// Histogram counts durations in power-of-two buckets, with their sum; it is
// the writer package's Histogram too (see writer.Histogram).
type Histogram = hist.Histogram

// Stats returns a snapshot of the log's counters.
func (l *Log) Stats() Stats {
	// DurableSeq first: both only grow, so read in this order the durable
	// end is never past NextSeq, however a sync lands between the reads.
	durable := l.DurableSeq()
	es := l.eng.Stats()
	return Stats{
		NextSeq:          l.NextSeq(),
		DurableSeq:       durable,
		Appended:         es.Claimed,
		Written:          es.Written,
		Syncs:            es.Syncs,
		Writes:           es.Flushes,
		InlineSyncs:      es.InlineSyncs,
		SegmentsCreated:  l.w.segments.Load(),
		SegmentsDeleted:  l.deleted.Load(),
		RetentionSkipped: l.retSkipped.Load(),
		SyncLatency:      l.w.syncLatency.Snapshot(),
		SyncedRecords:    l.w.syncedRecords.Load(),
		Failed:           l.eng.Err() != nil,
	}
}

// Close flushes and syncs every appended record, stops the flusher, and
// releases the files and the lock. It is idempotent: later calls return
// the first call's result. Calls other than Close made after it return
// ErrClosed.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.cursors.stop()
		l.stopRetention()
		err := l.eng.Close()
		if err != nil {
			err = fmt.Errorf("wal: close: %w", err)
		}
		// closeFile joins the sealer, and with it retention's last run.
		if cerr := l.w.closeFile(err == nil); err == nil {
			err = cerr
		}
		l.ret.Lock()
		l.ret.closed = true
		l.ret.Unlock()
		l.segs.close()
		if cerr := l.cursors.close(l.DurableSeq()); err == nil {
			err = cerr
		}
		if lerr := l.lock.Close(); err == nil && lerr != nil {
			err = fmt.Errorf("wal: release lock: %w", lerr)
		}
		l.closeErr = err
	})
	return l.closeErr
}

// mapErr turns engine errors into wal errors.
func (l *Log) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrClosed):
		return ErrClosed
	case errors.Is(err, engine.ErrWoken):
		return ErrWoken
	case errors.Is(err, engine.ErrNilContext):
		// Not a failure of the log: a call that reached the engine with a
		// nil context (the entry points refuse one first).
		return ErrNilContext
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("wal: log failed: %w", err)
}

var _ vfs.FS = vfs.OS()
