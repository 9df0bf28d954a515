package stream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/internal/walhook"
	"github.com/appendlog/appendlog/wal"
)

// errDeleted is what a deleted stream's calls return (wrapped, ErrNotFound).
var errDeleted = fmt.Errorf("%w (deleted)", ErrNotFound)

// Stream is one named stream of a Store: an append-only log of records
// numbered from 1, published by any number of goroutines and consumed by
// groups. Its methods are safe for concurrent use.
//
// Its log is opened on first use and closed again when the stream is idle
// (see Options.IdleTimeout); that is invisible to callers.
type Stream struct {
	st   *Store
	name string
	dir  string
	cfg  Config

	// cur is the open log, nil while the stream is idle or shut.
	cur atomic.Pointer[wal.Log]
	// used is set by each use and cleared by the janitor.
	used atomic.Bool

	mu struct {
		sync.Mutex
		groups map[string]*Group // open groups. Protected by mu.
		// err is set when the stream is shut: ErrClosed (Store.Close),
		// errDeleted, or its directory removed outside the store; or when
		// closing its idle log failed. Protected by mu.
		err error
		// idle counts the janitor's consecutive periods without use.
		idle int
		// baseNext is the log's NextSeq when this Store first opened it,
		// 0 before; closed holds the byte count of logs closed since.
		baseNext    uint64
		closedBytes uint64
		// last is the log's Stats when it was last closed.
		last wal.Stats
		// first is the log's FirstSeq when it was last closed.
		first uint64
		// deleting is set while a Delete of the stream runs, and closed
		// (and cleared) once it knows whether the stream goes: calls
		// made meanwhile wait for it (awaitDeleteLocked), rather than
		// find the stream gone by a Delete that then fails and leaves it
		// there. awaiting counts them (tests look).
		deleting chan struct{}
		awaiting int
	}
}

func newStream(st *Store, name, dir string, cfg Config) *Stream {
	s := &Stream{st: st, name: name, dir: dir, cfg: cfg}
	s.mu.groups = make(map[string]*Group)
	return s
}

// Name returns the stream's name.
func (s *Stream) Name() string { return s.name }

// Config returns the stream's configuration.
func (s *Stream) Config() Config { return s.cfg }

// log returns the stream's open log, opening it if the stream is idle.
func (s *Stream) log() (*wal.Log, error) {
	if !s.used.Load() {
		s.used.Store(true)
	}
	if l := s.cur.Load(); l != nil {
		return l, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaitDeleteLocked()
	return s.logLocked()
}

// awaitDeleteLocked waits, s.mu released, while a Delete of the stream
// has yet to decide whether the stream goes (see Store.Delete): what a
// caller then finds is the stream deleted, or there and usable.
// REQUIRES: s.mu is held, and no lock that a Delete takes (a group's); it
// is held again on return.
func (s *Stream) awaitDeleteLocked() {
	for ch := s.mu.deleting; ch != nil; ch = s.mu.deleting {
		s.mu.awaiting++
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
		s.mu.awaiting--
	}
}

// awaitDelete is awaitDeleteLocked for a caller holding no lock, with
// err, an error it got, from the stream deleted: it reports whether a
// Delete in progress was awaited, and the caller must look again.
func (s *Stream) awaitDelete(err error) bool {
	if !errors.Is(err, errDeleted) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	waited := s.mu.deleting != nil
	s.awaitDeleteLocked()
	return waited
}

// beginDelete marks a Delete of the stream in progress until the
// function it returns is called (more than once is fine).
func (s *Stream) beginDelete() (decided func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.mu.deleting = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.deleting == ch {
			s.mu.deleting = nil
			close(ch)
		}
	}
}

// logLocked is log. REQUIRES: s.mu is held.
func (s *Stream) logLocked() (*wal.Log, error) {
	if s.mu.err != nil {
		return nil, s.wrapErr(s.mu.err)
	}
	if l := s.cur.Load(); l != nil {
		return l, nil
	}
	// wal.Open would create a missing directory: a stream whose files were
	// removed underneath the store must not come back empty.
	if _, err := s.st.fsys.Stat(filepath.Join(s.dir, _streamFile)); err != nil {
		return nil, fmt.Errorf("stream %q: its files are gone (%w); the directory %s was removed outside the store", s.name, err, s.dir)
	}
	// Create makes the log directory: one missing lost the stream's
	// records and positions, and must not come back empty either.
	logDir := filepath.Join(s.dir, _logDir)
	if _, err := s.st.fsys.Stat(logDir); err != nil {
		return nil, fmt.Errorf("stream %q: its log directory is gone (%w); %s was removed outside the store", s.name, err, logDir)
	}
	o := s.st.opts
	o.BufferSize, o.ReaderWindow = s.st.sizes()
	wo := s.cfg.walOptions(&o)
	walhook.SetFS(&wo, s.st.fsys)
	l, err := wal.Open(logDir, &wo)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", s.name, err)
	}
	if s.mu.baseNext == 0 {
		s.mu.baseNext = l.NextSeq()
	}
	s.mu.idle = 0
	s.cur.Store(l)
	return l, nil
}

// wrapErr names the stream in a shut stream's error.
func (s *Stream) wrapErr(err error) error {
	return fmt.Errorf("stream %q: %w", s.name, err)
}

// retry reports whether a call that got wal.ErrClosed from l should try
// again on a new log: the janitor closed l because the stream was idle,
// or a Delete that then failed closed it.
func (s *Stream) retry(l *wal.Log, err error) bool {
	if !errors.Is(err, wal.ErrClosed) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaitDeleteLocked() // a Delete that fails opens the log again
	return s.mu.err == nil && s.cur.Load() != l
}

// mapErr names the stream in an error of its log, and turns wal.ErrClosed
// from a shut stream into the stream's error.
func (s *Stream) mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, wal.ErrClosed) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.err != nil {
			return s.wrapErr(s.mu.err)
		}
	}
	return s.wrapErr(err)
}

// Publish appends p to the stream and returns its sequence number. It
// returns once the record is in the log's buffer: WaitDurable confirms it.
// It does not allocate.
func (s *Stream) Publish(p []byte) (seq uint64, err error) {
	for {
		l, err := s.log()
		if err != nil {
			return 0, err
		}
		seq, err := l.Append(p)
		if err != nil && s.retry(l, err) {
			continue
		}
		return seq, s.mapErr(err)
	}
}

// PublishBatch appends the records of ps as one batch and returns the
// sequence number of the first; they get first..first+len(ps)-1. An empty
// ps publishes nothing and returns the sequence number the next record
// gets, so that WaitDurable(ctx, first+len(ps)-1) waits for the records
// before it.
func (s *Stream) PublishBatch(ps [][]byte) (first uint64, err error) {
	for {
		l, err := s.log()
		if err != nil {
			return 0, err
		}
		if len(ps) == 0 {
			return l.NextSeq(), nil
		}
		first, err := l.AppendBatch(ps)
		if err != nil && s.retry(l, err) {
			continue
		}
		return first, s.mapErr(err)
	}
}

// WaitDurable waits until record seq, and every record before it, is
// durable (fdatasynced): the confirm of a publish. Waiters of every
// publisher share each fdatasync (group commit).
func (s *Stream) WaitDurable(ctx context.Context, seq uint64) error {
	return s.awaitLog(func(l *wal.Log) error { return l.WaitDurable(ctx, seq) })
}

// Flush waits until every record published before the call was handed to
// the OS (written, not yet durable: see WaitDurable). Cancelling ctx
// abandons the wait, not the write.
func (s *Stream) Flush(ctx context.Context) error {
	return s.awaitLog(func(l *wal.Log) error { return l.Flush(ctx) })
}

// awaitLog runs wait, a wait on the stream's log, again on the log opened
// anew when the one it waited on was closed idle: closing the log wrote
// and synced it, so the reopened log has every record the old one had.
func (s *Stream) awaitLog(wait func(l *wal.Log) error) error {
	for {
		l, err := s.log()
		if err != nil {
			return err
		}
		err = wait(l)
		if err != nil && s.retry(l, err) {
			continue
		}
		return s.mapErr(err)
	}
}

// NextSeq returns the sequence number the next record published gets
// (Stats().NextSeq, without Stats' listing of the stream's files). It is
// cheap enough to poll. Its first call on a stream this Store has not
// used yet opens the stream's log, which holds the answer.
func (s *Stream) NextSeq() uint64 {
	if l := s.cur.Load(); l != nil {
		return l.NextSeq()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaitDeleteLocked() // a Delete that fails leaves it there, its records too
	if l := s.openedLocked(); l != nil {
		return l.NextSeq()
	}
	return s.mu.last.NextSeq
}

// DurableSeq returns the last durable record (0 if none): every record
// at or below it is confirmed. It is cheap enough to poll. Its first call
// on a stream this Store has not used yet opens the stream's log.
func (s *Stream) DurableSeq() uint64 {
	if l := s.cur.Load(); l != nil {
		return l.DurableSeq()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaitDeleteLocked() // a Delete that fails leaves it there, its records too
	if l := s.openedLocked(); l != nil {
		return l.DurableSeq()
	}
	return s.mu.last.DurableSeq
}

// openedLocked returns the open log, opening it if this Store never did
// (s.mu.last then holds nothing), or nil: the log is closed (idle or shut;
// s.mu.last is then its last state) or cannot be opened.
// REQUIRES: s.mu is held.
func (s *Stream) openedLocked() *wal.Log {
	if l := s.cur.Load(); l != nil || s.mu.baseNext != 0 {
		return l
	}
	l, _ := s.logLocked() // an error is returned by every other call
	return l
}

// Scan calls fn with each record of the stream from seq from (0: the first
// record held) to the last one published when Scan began, in order, then
// returns nil; it returns fn's error if fn fails. rec is valid only until
// fn returns. Scan reads without a group: nothing is delivered or acked.
// from below FirstSeq is a *wal.TruncatedError naming the first record
// held.
func (s *Stream) Scan(from uint64, fn func(seq uint64, rec []byte) error) error {
	for {
		l, err := s.log()
		if err != nil {
			return err
		}
		end := l.NextSeq()
		if from == 0 {
			from = l.FirstSeq()
		}
		r, err := l.NewReader(from, nil)
		if err != nil {
			if s.retry(l, err) {
				continue
			}
			return s.mapErr(err)
		}
		var fnErr error
		err = scan(r, from, end, func(seq uint64, rec []byte) error {
			if seq%4096 == 0 {
				s.used.Store(true) // a long scan keeps the stream from idling
			}
			from = seq + 1
			fnErr = fn(seq, rec)
			return fnErr
		})
		r.Close()
		if fnErr != nil {
			return fnErr
		}
		if err != nil && s.retry(l, err) {
			continue // closed while idle: go on from where it was
		}
		return s.mapErr(err)
	}
}

// scan feeds fn the records of r, which starts at from, below end.
func scan(r *wal.Reader, from, end uint64, fn func(seq uint64, rec []byte) error) error {
	for next := from; next < end; {
		if !r.Next() {
			if err := r.Err(); err != nil {
				return err
			}
			// Published but not yet visible (in the log's buffer): wait
			// for it; a waiting reader makes the flusher write at once.
			if err := r.Wait(context.Background()); err != nil {
				return err
			}
			continue
		}
		next = r.Seq() + 1
		if err := fn(r.Seq(), r.Record()); err != nil {
			return err
		}
	}
	return nil
}

// checkDir shuts a stream whose log is open and whose directory, or log
// directory, was removed outside the store, or replaced by a file: its
// log writes into files no one can open again, so every later call
// fails, naming the directory. The janitor calls it every period.
func (s *Stream) checkDir() {
	if s.cur.Load() == nil {
		return // a log opened again checks first
	}
	fsys := s.st.fsys
	gone := s.dir
	_, err := fsys.Stat(filepath.Join(s.dir, _streamFile))
	if !notDir(fsys, s.dir) && !errors.Is(err, fs.ErrNotExist) {
		gone = filepath.Join(s.dir, _logDir)
		if !notDir(fsys, gone) {
			return
		}
	}
	// Under the store's lock, as Delete shuts a stream: never both at once.
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if s.st.mu.streams[s.name] == s {
		_ = s.shut(fmt.Errorf("its directory %s was removed or replaced outside the store: records published since may be lost", gone))
	}
}

// notDir reports whether path is missing or is not a directory (a file
// put in place of one). Another error (the stat failed) is not taken for
// either.
func notDir(fsys vfs.FS, path string) bool {
	fi, err := fsys.Stat(path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return !fi.IsDir()
}

// closeIdle closes the log of a stream the janitor found unused for two
// periods in a row, with no group open.
func (s *Stream) closeIdle() {
	used := s.used.Swap(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if used || len(s.mu.groups) > 0 {
		s.mu.idle = 0
		return
	}
	s.mu.idle++
	if s.mu.idle < 2 || s.cur.Load() == nil || s.mu.err != nil {
		return
	}
	// A log that failed, before or in its Close, stays failed: every later
	// call returns the error. Records it took may be lost, and a log
	// opened again would give their sequence numbers to new records.
	if err := s.closeLogLocked(); err != nil {
		s.mu.err = fmt.Errorf("closing its idle log failed, records may be lost: %w", err)
	}
}

// closeLogLocked closes the open log, keeping its last Stats.
// REQUIRES: s.mu is held.
func (s *Stream) closeLogLocked() error {
	l := s.cur.Load()
	if l == nil {
		return nil
	}
	s.cur.Store(nil)
	err := l.Close()
	st := l.Stats()
	s.mu.closedBytes += st.Appended
	s.mu.last = st
	s.mu.first = l.FirstSeq()
	return err
}

// shut closes the stream's groups and log for good; later calls return
// why (ErrClosed or ErrNotFound).
func (s *Stream) shut(why error) error {
	s.mu.Lock()
	if s.mu.err != nil {
		s.mu.Unlock()
		return nil
	}
	s.mu.err = why
	groups := make([]*Group, 0, len(s.mu.groups))
	for _, g := range s.mu.groups {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	var errs []error
	for _, g := range groups {
		errs = append(errs, g.close(why))
	}
	s.mu.Lock()
	errs = append(errs, s.closeLogLocked())
	s.mu.Unlock()
	return errors.Join(errs...)
}

// unshut makes usable again a stream that shut(errDeleted) closed for a
// Delete that then failed, its directory still in place: its log opens
// again on next use. The groups shut closed stay closed, and say that a
// Delete that failed closed them; they are no longer listed as open (a
// shut stream keeps them listed), and each opens again. closeErr is shut's:
// a log that failed to close stays failed, as an idle one does (see
// closeIdle), and unshut returns why, as it does the error of a stream
// that had failed before the Delete (which shut left as it was).
func (s *Stream) unshut(closeErr error) error {
	s.mu.Lock()
	if err := s.mu.err; err != errDeleted {
		s.mu.Unlock()
		return err // failed or shut before the Delete, and still so
	}
	s.mu.err = nil
	if closeErr != nil {
		s.mu.err = fmt.Errorf("closing its log for a Delete failed, records may be lost: %w", closeErr)
	}
	err := s.mu.err
	groups := make([]*Group, 0, len(s.mu.groups))
	for name, g := range s.mu.groups {
		groups = append(groups, g)
		delete(s.mu.groups, name) // closed: Stats, DeleteGroup and closeIdle see none open
	}
	s.mu.Unlock()
	// Under each group's mu, without the stream's: a group holding its mu
	// takes the stream's (mapErr).
	for _, g := range groups {
		g.mu.Lock()
		g.mu.closed = fmt.Errorf("stream %q: group %q: %w by a Delete of the stream that failed; the stream is still there: open the group again", s.name, g.name, ErrClosed)
		g.mu.Unlock()
	}
	return err
}

// StreamStats is a snapshot of a stream's counters.
type StreamStats struct {
	// FirstSeq is the first record the stream holds, NextSeq the one the
	// next Publish gets, DurableSeq the last durable one.
	FirstSeq, NextSeq, DurableSeq uint64
	// Published and PublishedBytes count the records and bytes (frames
	// included) published since the Store opened.
	Published, PublishedBytes uint64
	// DiskBytes is the size of the stream's segment files.
	DiskBytes int64
	// Groups is the number of open groups.
	Groups int
	// Open is true while the stream's log is open (it is not idle).
	Open bool
	// Log is the open log's own Stats (zero while idle).
	Log wal.Stats
}

// Stats returns the stream's counters. It does not open an idle stream.
func (s *Stream) Stats() StreamStats {
	s.mu.Lock()
	var out StreamStats
	out.Groups = len(s.mu.groups)
	l := s.cur.Load()
	base, closedBytes, last, first := s.mu.baseNext, s.mu.closedBytes, s.mu.last, s.mu.first
	s.mu.Unlock()
	if l != nil {
		// The durable end first: read after NextSeq (as wal.Log.Stats
		// reads them), it may be past it, records made durable between
		// the two reads.
		durable := l.DurableSeq()
		ls := l.Stats()
		out.Open = true
		out.Log = ls
		out.FirstSeq, out.NextSeq, out.DurableSeq = l.FirstSeq(), ls.NextSeq, durable
		out.PublishedBytes = closedBytes + ls.Appended
	} else {
		out.FirstSeq, out.NextSeq, out.DurableSeq = first, last.NextSeq, last.DurableSeq
		out.PublishedBytes = closedBytes
	}
	if base != 0 && out.NextSeq >= base {
		out.Published = out.NextSeq - base
	}
	out.DiskBytes = s.diskBytes()
	return out
}

// GroupStats returns the Stats of each group open on the stream, by name.
func (s *Stream) GroupStats() map[string]GroupStats {
	s.mu.Lock()
	groups := make([]*Group, 0, len(s.mu.groups))
	for _, g := range s.mu.groups {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	out := make(map[string]GroupStats, len(groups))
	for _, g := range groups {
		out[g.name] = g.Stats()
	}
	return out
}

// diskBytes sums the sizes of the stream's segment files.
func (s *Stream) diskBytes() int64 {
	dir := filepath.Join(s.dir, _logDir)
	names, err := s.st.fsys.List(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, name := range names {
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		if fi, err := s.st.fsys.Stat(filepath.Join(dir, name)); err == nil {
			n += fi.Size()
		}
	}
	return n
}
