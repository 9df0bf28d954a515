package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// Cursor files.
//
// A log's cursors live in the subdirectory cursors of the log directory,
// one file per cursor, named by the cursor's name:
//
//	+---------------------+-------------+----------------+---------------+-------+--------------+
//	| magic "APNDCUR\x00" | version (4) | committed (8)  | name len (2)  | name  | CRC-32C (4)  |
//	+---------------------+-------------+----------------+---------------+-------+--------------+
//
// Integers are little-endian; the CRC-32C (Castagnoli) covers every byte
// before it; committed is the lowest unacked sequence number (at least 1).
// A checkpoint replaces the file atomically: it is written to the cursor's
// own temporary file cursors/.NAME.tmp, fdatasynced, renamed over the
// cursor's file, and the directory is fsynced. A power cut leaves the old
// checkpoint or the new one, never a mix. While a cursor is open its
// holder keeps an exclusive lock (flock) on cursors/.NAME.lock, so one
// position has one owner across processes too. Names starting with '.'
// are never cursors: a reader of the directory skips them.
//
// The lock file cursors/..floor.lock (no cursor's side file starts with
// "..") orders the creation of a cursor by OpenCursor, in any process,
// against the writer's deletions (retention, TruncateFront): OpenCursor
// (and Seek of a cursor from it) holds it (flock, exclusive) from before
// it reads where the log starts until the new checkpoint is in the
// directory, and a deletion that would delete something holds it from
// before it reads the cursors' checkpoints until the segments are
// removed. So a new cursor either is counted by the deletion or starts
// after it. Both only try the lock: a background retention pass that
// finds it held is skipped (the next one does its work), the others try
// again for at most _floorWait. The kernel releases the lock of a process
// that dies.
//
// These constants are part of the file format; they must not change.
const (
	cursorDir    = "cursors"
	_floorLock   = "..floor.lock"
	_cursorMagic = "APNDCUR\x00"
	// _cursorVersion is the version written: 2 records the log's ID.
	// Version 1 files (no log ID) are read as belonging to any log.
	_cursorVersion = 2
	// _cursorFixed1 and _cursorFixed are the sizes of a version 1 and a
	// version 2 cursor file without its name: magic, version u32,
	// committed u64, (version 2: log ID [16]byte,) name length u16, then
	// the name and a CRC-32C u32 of everything before it.
	_cursorFixed1 = len(_cursorMagic) + 4 + 8 + 2 + 4
	_cursorFixed  = _cursorFixed1 + len(frame.LogID{})
)

// cursorAux returns the name of the cursor's side file of kind ("tmp" or
// "lock"): ".NAME.kind", or for a name too long for that to fit in a
// directory entry, its first 200 bytes and a hash of the whole name.
func cursorAux(name, kind string) string {
	if s := "." + name + "." + kind; len(s) <= 255 {
		return s
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf(".%s~%016x.%s", name[:200], h.Sum64(), kind)
}

// MaxCursorName bounds a cursor name's length in bytes.
const MaxCursorName = 255

// DefaultAckWindow is the default CursorOptions.AckWindow.
const DefaultAckWindow = 1 << 13

// _maxAckWindow bounds CursorOptions.AckWindow (128 MiB of slots).
const _maxAckWindow = 1 << 24

// CursorOptions configures a Cursor (see Log.CursorWith).
type CursorOptions struct {
	// AckWindow is how far above the committed position an ack may be,
	// in records. The cursor holds 8 bytes per record of window, so a
	// process with many cursors whose consumers bound their unacked
	// records (as stream groups do) sizes it to that bound. Rounded up to
	// a power of two, at most 1<<24; 0 means DefaultAckWindow.
	AckWindow int
}

var _cursorCRC = crc32.MakeTable(crc32.Castagnoli)

// These errors are returned by Log.Cursor and Cursor methods.
var (
	// ErrCursorName is returned (wrapped, with the name quoted) by
	// Log.Cursor for a name that is not 1 to MaxCursorName bytes of ASCII
	// letters, digits, '.', '_' and '-' not starting with '.'.
	ErrCursorName = errors.New("wal: invalid cursor name")
	// ErrCursorOpen is returned by Log.Cursor and OpenCursor for a cursor
	// already open on the log, in this process or another (the error then
	// names the holder): one consumer position has one owner.
	ErrCursorOpen = errors.New("wal: cursor already open")
	// ErrBadCursorFile is wrapped by the *CursorFileError of a cursor file
	// that is damaged, truncated, of another version, or not a cursor file.
	ErrBadCursorFile = errors.New("wal: bad cursor file")
	// ErrAckRange is returned (wrapped) by Ack for a sequence number that
	// was not appended, or that is too far (more than the ack window)
	// above the committed position.
	ErrAckRange = errors.New("wal: ack out of range")
	// ErrFloorBusy is returned (wrapped, naming the holder) by OpenCursor,
	// a follower's Seek and TruncateFront when the lock that orders the
	// creation of cursors against deletions (cursors/..floor.lock) stayed
	// held by someone else for as long as they wait for it (seconds: a
	// holder keeps it for a few file operations, so a process stopped
	// while it held it, for example).
	ErrFloorBusy = errors.New("wal: cursors' floor lock is busy")
)

// CursorFileError reports a cursor file that cannot be used: Path is the
// file and Problem says what is wrong with it. errors.Is(err,
// ErrBadCursorFile) matches it, and errors.Is(err, ErrForeign) too for
// the checkpoint of a cursor of another log.
type CursorFileError struct {
	Path    string
	Problem string
	foreign bool
}

func (e *CursorFileError) Error() string {
	return fmt.Sprintf("wal: bad cursor file %s: %s", e.Path, e.Problem)
}

// Is reports whether target is ErrBadCursorFile, or ErrForeign for a
// cursor file of another log.
func (e *CursorFileError) Is(target error) bool {
	return target == ErrBadCursorFile || e.foreign && target == ErrForeign
}

// checkCursorName reports why name cannot name a cursor, or nil.
func checkCursorName(name string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrCursorName, name, why) }
	switch {
	case name == "":
		return bad("empty")
	case len(name) > MaxCursorName:
		return bad(fmt.Sprintf("%d bytes (max %d)", len(name), MaxCursorName))
	case name[0] == '.':
		return bad("starts with '.'")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return bad(fmt.Sprintf("byte %d is 0x%02x (want ASCII letters, digits, '.', '_' or '-')", i, c))
		}
	}
	return nil
}

// encodeCursor returns the file content of cursor name at committed, of
// the log whose ID is id.
func encodeCursor(name string, committed uint64, id frame.LogID) []byte {
	b := make([]byte, _cursorFixed+len(name))
	copy(b, _cursorMagic)
	o := len(_cursorMagic)
	binary.LittleEndian.PutUint32(b[o:], _cursorVersion)
	binary.LittleEndian.PutUint64(b[o+4:], committed)
	copy(b[o+12:], id[:])
	binary.LittleEndian.PutUint16(b[o+28:], uint16(len(name)))
	copy(b[o+30:], name)
	n := len(b) - 4
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], _cursorCRC))
	return b
}

// decodeCursor decodes a cursor file's content, of version 1 or 2. It
// returns the name recorded in it, the committed position and the log ID
// (zero in a version 1 file), or a description of what is wrong.
func decodeCursor(b []byte) (name string, committed uint64, id frame.LogID, problem string) {
	o := len(_cursorMagic)
	fail := func(p string) (string, uint64, frame.LogID, string) { return "", 0, frame.LogID{}, p }
	switch {
	case len(b) == 0:
		return fail("empty file")
	case len(b) < o || string(b[:o]) != _cursorMagic:
		return fail("not a cursor file (no cursor magic)")
	case len(b) < o+4:
		return fail(fmt.Sprintf("truncated: %d bytes, a cursor file has at least %d", len(b), _cursorFixed1))
	}
	fixed, nameOff := _cursorFixed, o+30
	switch v := binary.LittleEndian.Uint32(b[o:]); v {
	case _cursorVersion:
	case 1:
		fixed, nameOff = _cursorFixed1, o+14
	default:
		return fail(fmt.Sprintf("version %d, this build reads versions 1 and %d", v, _cursorVersion))
	}
	if len(b) < fixed {
		return fail(fmt.Sprintf("truncated: %d bytes, a cursor file of this version has at least %d", len(b), fixed))
	}
	nl := int(binary.LittleEndian.Uint16(b[nameOff-2:]))
	if want := fixed + nl; len(b) != want {
		return fail(fmt.Sprintf("%d bytes, but its name length %d makes %d", len(b), nl, want))
	}
	n := len(b) - 4
	if got, want := crc32.Checksum(b[:n], _cursorCRC), binary.LittleEndian.Uint32(b[n:]); got != want {
		return fail(fmt.Sprintf("checksum mismatch (stored %#08x, computed %#08x)", want, got))
	}
	committed = binary.LittleEndian.Uint64(b[o+4:])
	if fixed == _cursorFixed {
		copy(id[:], b[o+12:])
	}
	name = string(b[nameOff:n])
	if err := checkCursorName(name); err != nil {
		return fail(fmt.Sprintf("records an invalid name: %v", err))
	}
	if committed == 0 {
		return fail("committed position 0 (sequence numbers start at 1)")
	}
	return name, committed, id, ""
}

// readCursorFile reads and checks the cursor file of name in dir's cursors
// directory, of the log whose ID is id: a file that names another log is
// a *CursorFileError matching ErrForeign. A missing file is returned as an
// error wrapping fs.ErrNotExist.
func readCursorFile(fsys vfs.FS, dir, name string, id frame.LogID) (uint64, error) {
	path := filepath.Join(dir, cursorDir, name)
	f, err := fsys.OpenRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, fmt.Errorf("wal: read cursor file %s: %w", path, err)
	}
	if size > int64(_cursorFixed+MaxCursorName) {
		return 0, &CursorFileError{Path: path, Problem: fmt.Sprintf("%d bytes, a cursor file has at most %d", size, _cursorFixed+MaxCursorName)}
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, fmt.Errorf("wal: read cursor file %s: %w", path, err)
	}
	got, committed, gotID, problem := decodeCursor(b)
	if problem == "" && got != name {
		problem = fmt.Sprintf("records cursor %q, not %q", got, name)
	}
	if problem == "" && !gotID.Matches(id) {
		return 0, &CursorFileError{Path: path, foreign: true,
			Problem: fmt.Sprintf("of another log: it has log id %s, the log's files have log id %s (copied from another log?)", gotID, id)}
	}
	if problem != "" {
		return 0, &CursorFileError{Path: path, Problem: problem}
	}
	return committed, nil
}

// cursorSet is a log's registry of open cursors and their checkpointer. Its
// zero value has no cursors and no goroutine.
type cursorSet struct {
	mu struct {
		sync.Mutex
		open    map[string]*Cursor // Protected by mu.
		started bool               // the checkpointer runs. Protected by mu.
		closed  bool               // Log.Close stopped the set. Protected by mu.
	}
	stopc chan struct{} // closed to stop the checkpointer
	done  chan struct{} // closed when the checkpointer exits

	// write serialises checkpoint writes, and the reads of cursor files
	// retention makes.
	write sync.Mutex
	// writes counts checkpoint files written since Open.
	writes atomic.Int64
}

// stop stops the checkpointer and waits for it. Called by Log.Close before
// the engine stops; later Cursor calls fail with ErrClosed.
func (s *cursorSet) stop() {
	s.mu.Lock()
	s.mu.closed = true
	started := s.mu.started
	s.mu.Unlock()
	if started {
		close(s.stopc)
		<-s.done
	}
}

// close writes the last checkpoint of every open cursor, clamped to the
// durable records (seqs below durable+1), and closes them. Called by
// Log.Close after the final sync.
func (s *cursorSet) close(durable uint64) error {
	s.mu.Lock()
	open := s.mu.open
	s.mu.open = nil
	s.mu.Unlock()
	var errs []error
	for _, c := range open {
		c.closing.Store(true)
		errs = append(errs, c.checkpoint(durable+1))
		c.closed.Store(true)
		errs = append(errs, c.unlock())
	}
	return errors.Join(errs...)
}

// loop is the checkpointer: every period it checkpoints each open cursor
// whose committed position moved, as far as the durable records allow.
func (s *cursorSet) loop(l *Log, clk clock.Clock) {
	defer close(s.done)
	period := l.opts.CheckpointEvery
	t := clk.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-s.stopc:
			return
		case <-t.C():
		}
		limit := l.DurableSeq() + 1
		for _, c := range s.snapshot() {
			// A failed write is kept in c.err and returned by Commit and
			// Close; the next period tries again.
			_ = c.periodic(limit)
		}
		t.Reset(period)
	}
}

// snapshot returns the open cursors.
func (s *cursorSet) snapshot() []*Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Cursor, 0, len(s.mu.open))
	for _, c := range s.mu.open {
		out = append(out, c)
	}
	return out
}

// Cursor is a named, durable consumer position in a log: the broker
// pattern of acks in memory and offsets checkpointed.
//
// Its committed position is the lowest sequence number not yet acked:
// every record below it was acked, in whatever order. Ack records an ack in
// memory only. The committed position is checkpointed to the cursor's file
// every Options.CheckpointEvery (by one goroutine per log, joined by Close)
// when it moved, on Commit, and on Close. A checkpoint never points past
// what is durable in the log: it covers only records that survived
// fdatasync. After a crash a cursor resumes from its last checkpoint: the
// records from there on may be delivered again (at least once), none
// before it are.
//
// Open one with Log.Cursor. Ack may be called from many goroutines at
// once; Next from one goroutine at a time. A cursor is the file
// cursors/NAME in the log directory (magic, version, committed position,
// name, CRC-32C), replaced atomically by each checkpoint (temporary file,
// fdatasync, rename, directory fsync): a power cut leaves the old
// checkpoint or the new one, never a broken one. While open it holds an
// exclusive lock on cursors/.NAME.lock (one file descriptor), so that a
// cursor has one owner across processes too (see OpenCursor).
type Cursor struct {
	l    *Log // nil for a cursor from OpenCursor (see fol)
	name string
	path string
	fsys vfs.FS
	dir  string // the log directory
	// logID is the log's ID, written into each checkpoint; a checkpoint
	// found naming another log is ErrForeign. Set before start.
	logID frame.LogID
	// wmu serialises the cursor's checkpoint writes (the Log's
	// cursors.write for a cursor on an open Log), and writes counts them.
	wmu    *sync.Mutex
	writes *atomic.Int64
	// lock is the cursor's lock file, held while it is open.
	lock io.Closer
	// fol is the state of a cursor from OpenCursor, nil for one on an
	// open Log.
	fol *cursorFollower

	// floor is the committed position: the lowest unacked sequence number.
	floor atomic.Uint64
	// slots is the ack window, a power of two long: slot seq&mask holds
	// seq once seq was acked (for seq in [floor, floor+len(slots))). A
	// slot only grows, so a late duplicate ack never overwrites a newer
	// one.
	slots []atomic.Uint64
	mask  uint64
	// appended caches a NextSeq of the log: acks below it need no check.
	appended atomic.Uint64
	// gapAt is the first sequence number of the oldest recorded gap Next
	// delivered that the committed position has not passed, 0 if none:
	// the committed position jumps over a gap (its records will never
	// come) however long it is. gaps lists those gaps, oldest first.
	gapAt atomic.Uint64
	gapMu sync.Mutex
	gaps  []GapError // Protected by gapMu.

	// written is the committed position of the last checkpoint written.
	// Protected by wmu.
	written uint64
	// err is the error of the last checkpoint write, nil once one
	// succeeds. Protected by wmu.
	err error
	// clampedFrom is the checkpoint found past the log's end when the
	// cursor was opened, 0 if none.
	clampedFrom uint64

	closed atomic.Bool
	// closing is set by every close before it reads the committed
	// position for the last checkpoint: an Ack that finds it set returns
	// ErrClosed (see Ack).
	closing atomic.Bool
	// caughtUp is when Next last found no record to deliver and began to
	// wait (Unix ns), 0 if it never did.
	caughtUp atomic.Int64
	// next is the sequence number Next delivers next, and r the live
	// Reader it reads with (nil until the first Next). Next's goroutine
	// only.
	next uint64
	r    *Reader
}

// Cursor opens the durable cursor name on the log, creating it at the
// log's first record if it does not exist. The name is 1 to MaxCursorName
// bytes of ASCII letters, digits, '.', '_' and '-', not starting with '.'
// (ErrCursorName otherwise); a cursor may be open once per log
// (ErrCursorOpen). A damaged or foreign cursor file is a *CursorFileError
// naming the file and the problem. A checkpoint past the log's end (the log
// was cut, by Repair for example) is clamped to the end and reported by
// Clamped, never reset to the start.
func (l *Log) Cursor(name string) (*Cursor, error) {
	return l.CursorWith(name, nil)
}

// CursorWith is Cursor with options; nil opts means the defaults.
func (l *Log) CursorWith(name string, opts *CursorOptions) (*Cursor, error) {
	if err := checkCursorName(name); err != nil {
		return nil, err
	}
	window, err := ackWindow(name, opts)
	if err != nil {
		return nil, err
	}
	s := &l.cursors
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	if err := l.mapErr(l.eng.Err()); err != nil {
		return nil, err
	}
	if _, ok := s.mu.open[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrCursorOpen, name)
	}
	fsys := l.opts.fsys
	if err := makeCursorDir(fsys, l.dir); err != nil {
		return nil, err
	}
	c := newCursor(fsys, l.dir, name, window, &s.write, &s.writes)
	c.l = l
	// Under retention's lock: a deletion under way, whose floor could not
	// count this cursor, ends before a new cursor starts at FirstSeq.
	l.ret.Lock()
	c.logID = l.w.id
	err = c.start(func() (uint64, uint64, error) { return l.FirstSeq(), l.NextSeq(), nil })
	l.ret.Unlock()
	if err != nil {
		return nil, err
	}
	if s.mu.open == nil {
		s.mu.open = make(map[string]*Cursor)
	}
	s.mu.open[name] = c
	if !s.mu.started {
		s.mu.started = true
		s.stopc, s.done = make(chan struct{}), make(chan struct{})
		clk := l.opts.clock
		if clk == nil {
			clk = clock.Real()
		}
		go s.loop(l, clk)
	}
	return c, nil
}

// ackWindow returns the ack window opts ask for cursor name, rounded up
// to a power of two.
func ackWindow(name string, opts *CursorOptions) (int, error) {
	if opts == nil || opts.AckWindow == 0 {
		return DefaultAckWindow, nil
	}
	if opts.AckWindow < 0 || opts.AckWindow > _maxAckWindow {
		return 0, fmt.Errorf("wal: cursor %q: CursorOptions.AckWindow %d is outside 1..%d", name, opts.AckWindow, _maxAckWindow)
	}
	return 1 << bits.Len(uint(opts.AckWindow-1)), nil
}

// makeCursorDir creates the cursors directory of the log in dir, durably,
// if it is missing.
func makeCursorDir(fsys vfs.FS, dir string) error {
	cdir := filepath.Join(dir, cursorDir)
	if err := vfs.MkdirAllDurable(fsys, cdir); err != nil {
		return fmt.Errorf("wal: create cursor directory %s: %w", cdir, err)
	}
	return nil
}

// newCursor returns cursor name of the log in dir, with an ack window of
// window (a power of two) slots, not started.
func newCursor(fsys vfs.FS, dir, name string, window int, wmu *sync.Mutex, writes *atomic.Int64) *Cursor {
	return &Cursor{
		name: name, path: filepath.Join(dir, cursorDir, name), fsys: fsys, dir: dir,
		wmu: wmu, writes: writes,
		slots: make([]atomic.Uint64, window), mask: uint64(window - 1),
	}
}

// lockCursor takes the lock file of cursor name of the log in dir, for
// op. A lock held by someone else is ErrCursorOpen naming the holder.
func lockCursor(fsys vfs.FS, dir, name, op string) (io.Closer, error) {
	lockPath := filepath.Join(dir, cursorDir, cursorAux(name, "lock"))
	lock, err := fsys.Lock(lockPath, fmt.Sprintf("pid %d", os.Getpid()))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %q: lock file %s is held by %s", ErrCursorOpen, name, lockPath, lockHolder(fsys, lockPath))
	}
	if err != nil {
		return nil, fmt.Errorf("wal: %s %q: take lock: %w", op, name, err)
	}
	return lock, nil
}

// start takes the cursor's lock, then asks bounds for the log's records
// (they run from first to before end) and reads its checkpoint: a missing
// cursor starts at first, a checkpoint past end is clamped to end. A new
// or clamped position is checkpointed at once, before start returns. On
// error the lock is released.
func (c *Cursor) start(bounds func() (first, end uint64, err error)) (err error) {
	if c.lock, err = lockCursor(c.fsys, c.dir, c.name, "cursor"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.unlock()
		}
	}()
	// After the lock: the checkpoint a previous holder wrote as it closed
	// is within the bounds read now.
	first, end, err := bounds()
	if err != nil {
		return err
	}
	committed, err := readCursorFile(c.fsys, c.dir, c.name, c.logID)
	fresh := errors.Is(err, fs.ErrNotExist)
	switch {
	case fresh:
		committed = first
	case err != nil:
		return err
	case committed > end:
		// The log was cut below the checkpoint: resume at its end.
		c.clampedFrom = committed
		committed = end
	}
	c.floor.Store(committed)
	c.next = committed
	c.appended.Store(end)
	if !fresh && c.clampedFrom == 0 {
		c.written = committed
		return nil
	}
	// Make the cursor (or its clamped position) durable now. A cursor of
	// an open Log clamps the checkpoint to the durable records, as every
	// checkpoint is (the log's end may hold records not synced yet); the
	// checkpointer writes the rest once they are.
	if c.fol == nil {
		committed = min(committed, c.l.DurableSeq()+1)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeDurable(committed)
}

// _floorWait bounds how long OpenCursor, a follower's Seek and
// TruncateFront wait for the floor lock (see the cursor files); _floorPoll
// bounds the pause between two tries.
const (
	_floorWait = 10 * time.Second
	_floorPoll = 50 * time.Millisecond
)

// tryFloorLock takes the floor lock of the log in dir (see the cursor
// files) without waiting, for holder ("retention", "OpenCursor"). A lock
// held by someone else is an error wrapping ErrFloorBusy, naming the
// holder. REQUIRES: the cursors directory exists.
func tryFloorLock(fsys vfs.FS, dir, holder string) (io.Closer, error) {
	path := filepath.Join(dir, cursorDir, _floorLock)
	lock, err := fsys.Lock(path, fmt.Sprintf("pid %d (%s)", os.Getpid(), holder))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is held by %s", ErrFloorBusy, path, lockHolder(fsys, path))
	}
	if err != nil {
		return nil, fmt.Errorf("wal: take lock %s: %w", path, err)
	}
	return lock, nil
}

// whileBusy calls try until it returns anything but an error wrapping
// ErrFloorBusy, pausing between calls on clk (the system clock if nil),
// for at most _floorWait of pauses in all; then it returns try's last
// error, saying so.
func whileBusy(clk clock.Clock, try func() error) error {
	if clk == nil {
		clk = clock.Real()
	}
	pause, waited := time.Millisecond, time.Duration(0)
	for {
		err := try()
		if !errors.Is(err, ErrFloorBusy) {
			return err
		}
		if waited >= _floorWait {
			return fmt.Errorf("%w (tried for %v)", err, waited)
		}
		t := clk.NewTimer(pause)
		<-t.C()
		waited += pause
		pause = min(2*pause, _floorPoll)
	}
}

// firstInFiles returns the first sequence number of the log in dir as its
// files say now: the first segment's (1 with no segment).
func firstInFiles(fsys vfs.FS, dir string) (uint64, error) {
	segs, _, _, err := listSegments(fsys, dir)
	if err != nil {
		return 0, err
	}
	if len(segs) == 0 {
		return 1, nil
	}
	return segs[0].firstSeq, nil
}

// unlock releases the cursor's lock file.
func (c *Cursor) unlock() error {
	if c.lock == nil {
		return nil
	}
	err := c.lock.Close()
	c.lock = nil
	if err != nil {
		return fmt.Errorf("wal: cursor %q: release lock: %w", c.name, err)
	}
	return nil
}

// Name returns the cursor's name.
func (c *Cursor) Name() string { return c.name }

// CaughtUp returns when Next last had delivered every record visible to
// it and began to wait for more; the zero time if it never did. A consumer
// that keeps up sets it all the time; one that falls behind stops setting
// it, so time.Since(CaughtUp()) bounds from below how long the records
// after its position have waited.
func (c *Cursor) CaughtUp() time.Time {
	if ns := c.caughtUp.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Committed returns the committed position: the lowest sequence number not
// yet acked. It may be ahead of the last checkpoint.
func (c *Cursor) Committed() uint64 { return c.floor.Load() }

// Clamped reports a checkpoint found past the log's end when the cursor
// was opened (the log was cut below it): from is the checkpointed position,
// and the cursor resumed at the log's end instead.
func (c *Cursor) Clamped() (from uint64, ok bool) { return c.clampedFrom, c.clampedFrom != 0 }

// Ack records that record seq was consumed. It does no I/O and does not
// allocate. Acks may come in any order and more than once; the committed
// position moves to the lowest sequence number not yet acked. An ack below
// the committed position does nothing. A sequence number not appended yet,
// or an ack window (CursorOptions.AckWindow) or more above the committed
// position, is ErrAckRange; after Close, ErrClosed. An Ack that returns
// nil counts in the checkpoint a Close (or Log.Close) writes; one racing
// the close returns ErrClosed, and its record may then be delivered again
// after a restart.
func (c *Cursor) Ack(seq uint64) error {
	if c.closing.Load() {
		return ErrClosed
	}
	if f := c.floor.Load(); seq >= f {
		if seq-f > c.mask || seq >= c.appended.Load() {
			if err := c.checkAck(seq, f); err != nil {
				return err
			}
		}
		c.mark(seq)
	}
	if c.closing.Load() {
		// A close began, and may have read the committed position for
		// its last checkpoint before this ack reached it. Loaded after
		// the mark (and closing stored before that read), a false here
		// means the close reads a position that holds this ack.
		return ErrClosed
	}
	return nil
}

// mark marks seq acked and moves the floor over every acked slot.
// REQUIRES: seq-floor < len(c.slots).
func (c *Cursor) mark(seq uint64) {
	s := &c.slots[seq&c.mask]
	for {
		old := s.Load()
		if old >= seq || s.CompareAndSwap(old, seq) {
			break
		}
	}
	c.advance()
}

// advance moves the floor over every acked slot and every recorded gap it
// reaches.
func (c *Cursor) advance() {
	for {
		f := c.floor.Load()
		if c.slots[f&c.mask].Load() != f {
			if g := c.gapAt.Load(); g == 0 || f < g || !c.passGap(f) {
				return
			}
			continue
		}
		c.floor.CompareAndSwap(f, f+1)
	}
}

// passGap moves the floor f, which reached the oldest recorded gap, past
// it, and reports whether the floor moved (or another goroutine moved it).
func (c *Cursor) passGap(f uint64) bool {
	c.gapMu.Lock()
	defer c.gapMu.Unlock()
	for len(c.gaps) > 0 && c.gaps[0].End <= f {
		c.gaps = c.gaps[1:] // passed already
	}
	moved := false
	if len(c.gaps) > 0 && c.gaps[0].First <= f {
		if c.floor.CompareAndSwap(f, c.gaps[0].End) {
			c.gaps = c.gaps[1:]
		}
		moved = true // by us, or by another goroutine: look again
	}
	var next uint64
	if len(c.gaps) > 0 {
		next = c.gaps[0].First
	}
	c.gapAt.Store(next)
	return moved
}

// checkAck is Ack's slow path: it refreshes the cached end of the log and
// says why seq cannot be acked, if it cannot.
func (c *Cursor) checkAck(seq, floor uint64) error {
	if c.fol != nil {
		// Another process appends: the records this cursor read bound
		// what may be acked.
		if end := c.appended.Load(); seq >= end {
			return fmt.Errorf("%w: cursor %q: seq %d is not in the log's files yet (as far as the cursor read, next is %d)", ErrAckRange, c.name, seq, end)
		}
	} else if end := c.l.NextSeq(); seq >= end {
		return fmt.Errorf("%w: cursor %q: seq %d was not appended (next is %d)", ErrAckRange, c.name, seq, end)
	} else {
		c.appended.Store(end)
	}
	if seq-floor > c.mask {
		return fmt.Errorf("%w: cursor %q: seq %d is %d records above the committed position %d (the ack window is %d): ack the records below it first",
			ErrAckRange, c.name, seq, seq-floor, floor, len(c.slots))
	}
	return nil
}

// Next waits for the next record from the committed position on (at the
// first call) or after the last one delivered, and returns it. rec is valid
// until the next call to Next. Records are delivered once each, in order,
// as they become visible (see NewReader); a consumer acks each when done
// with it. After a restart, every record from the last checkpoint on is
// delivered again.
//
// A gap a forced Repair recorded (records lost to damage) is returned as a
// *GapError; the cursor acks its sequence numbers, which will never be
// delivered, and the next call goes on after it. A committed position that
// retention deleted (Retention.IgnoreCursors) is a *TruncatedError naming
// the first record available, returned again by every call until Seek
// moves the cursor. Cancelling ctx abandons the wait; a nil ctx
// is ErrNilContext. Next is for one goroutine at a time, and must not run
// concurrently with Close.
func (c *Cursor) Next(ctx context.Context) (seq uint64, rec []byte, err error) {
	if ctx == nil {
		return 0, nil, fmt.Errorf("%w: Next", ErrNilContext)
	}
	return c.next1(ctx, nil)
}

// NextOrWake is Next that also returns ErrWoken, with no record, when it
// would wait and wake can be received from (it receives one value) or is
// closed. A consumer that must also react to events of its own (a
// redelivery, a shutdown) waits on both without a goroutine or a context
// per wait. A nil wake never fires. A record already visible is returned
// first, whatever wake holds.
func (c *Cursor) NextOrWake(ctx context.Context, wake <-chan struct{}) (seq uint64, rec []byte, err error) {
	if ctx == nil {
		return 0, nil, fmt.Errorf("%w: NextOrWake", ErrNilContext)
	}
	return c.next1(ctx, wake)
}

// Poll is Next without the wait: it returns the next record if one is
// visible now, with ok true, and ok false with no error if Next would
// wait. Errors and gaps are as Next returns them. Like Next, it is for
// one goroutine at a time (the one that may call Next), and the record is
// valid until the next call of Poll, Next or NextOrWake.
func (c *Cursor) Poll() (seq uint64, rec []byte, ok bool, err error) {
	if c.closed.Load() {
		return 0, nil, false, ErrClosed
	}
	return c.poll()
}

// poll is Poll on an open Cursor.
func (c *Cursor) poll() (seq uint64, rec []byte, ok bool, err error) {
	if c.r == nil {
		var r *Reader
		var err error
		if c.fol != nil {
			r, err = OpenReader(c.dir, c.next, &c.fol.opts)
			if err == nil {
				// Only what a checkpoint can make durable: syncBelow
				// syncs named segments, and the name of a rotation's new
				// segment is its writer's to make durable.
				r.spare = false
			}
		} else {
			r, err = c.l.NewReader(c.next, nil)
		}
		if err != nil {
			return 0, nil, false, fmt.Errorf("wal: cursor %q: %w", c.name, err)
		}
		c.r = r
	}
	if c.r.Next() {
		seq = c.r.Seq()
		c.next = seq + 1
		if c.fol != nil && c.appended.Load() <= seq {
			c.appended.Store(seq + 1) // Next's goroutine is the only writer
		}
		return seq, c.r.Record(), true, nil
	}
	if err := c.r.Err(); err != nil {
		var g *GapError
		if errors.As(err, &g) {
			c.ackGap(g)
			c.next = g.End
		}
		return 0, nil, false, err
	}
	return 0, nil, false, nil
}

// next1 is Next and NextOrWake.
func (c *Cursor) next1(ctx context.Context, wake <-chan struct{}) (seq uint64, rec []byte, err error) {
	if c.closed.Load() {
		return 0, nil, ErrClosed
	}
	for {
		seq, rec, ok, err := c.poll()
		if ok || err != nil {
			return seq, rec, err
		}
		c.caughtUp.Store(time.Now().UnixNano())
		if c.fol != nil && wake != nil {
			// A follower waits in its watcher, not on channels: wake is
			// looked at between the watcher's events and polls.
			select {
			case <-wake:
				return 0, nil, ErrWoken
			default:
			}
		}
		if err := c.r.wait(ctx, wake); err != nil {
			return 0, nil, err
		}
	}
}

// Seek moves the cursor to seq and checkpoints it: Next delivers record
// seq next, and the committed position is seq, as if every record below
// seq was acked and none from seq on. Forward, it skips records; backward,
// it delivers them again. It is how a consumer goes on after Next
// returned a *TruncatedError (its position was deleted, by retention with
// Retention.IgnoreCursors or by TruncateFront):
//
//	_, _, err := c.Next(ctx)
//	var te *wal.TruncatedError
//	if errors.As(err, &te) {
//		err = c.Seek(te.First) // skip what was deleted, knowingly
//	}
//
// seq below FirstSeq is a *TruncatedError naming the first record
// available, and seq past NextSeq is ErrNotAppended; the cursor is then
// unchanged. Seek writes the checkpoint before it returns (clamped, as
// every checkpoint is, to the durable records), ordered against the
// writer's deletions as a new cursor is (see OpenCursor): a deletion
// either counts the new position and keeps seq, or ends before Seek reads
// FirstSeq, and seq below it is then the *TruncatedError. For a cursor
// from OpenCursor that order waits for the floor lock, for seconds at
// most (then an error wrapping ErrFloorBusy, the cursor unchanged). Acks
// of records from seq on made before Seek are forgotten. Seek must not run
// concurrently with Next, Ack or Close.
func (c *Cursor) Seek(seq uint64) error {
	if c.closed.Load() {
		return ErrClosed
	}
	var first, next uint64
	if c.l != nil {
		if err := c.l.mapErr(c.l.eng.Err()); err != nil {
			return err
		}
		// Before wmu, in deleteFront's order (cursorFloor takes wmu).
		c.l.ret.Lock()
		defer c.l.ret.Unlock()
		first, next = c.l.FirstSeq(), c.l.NextSeq()
	} else {
		var floor io.Closer
		var err error
		first, next, _, floor, err = followBounds(c.dir, &c.fol.opts, "Seek")
		if err != nil {
			return fmt.Errorf("wal: cursor %q: seek: %w", c.name, err)
		}
		// Closing the lock's file releases it, whatever the unlock says.
		defer floor.Close()
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if seq < first {
		return fmt.Errorf("wal: cursor %q: seek: %w", c.name, &TruncatedError{Seq: seq, First: first})
	}
	if seq > next {
		return fmt.Errorf("%w: cursor %q: seek to %d (next is %d)", ErrNotAppended, c.name, seq, next)
	}
	if c.r != nil {
		c.r.Close()
		c.r = nil
	}
	for i := range c.slots {
		c.slots[i].Store(0)
	}
	c.gapMu.Lock()
	c.gaps = nil
	c.gapAt.Store(0)
	c.gapMu.Unlock()
	c.floor.Store(seq)
	c.next = seq
	c.appended.Store(next)
	if c.fol == nil {
		seq = min(seq, c.l.DurableSeq()+1) // a follower's syncBelow makes them durable
	}
	c.err = c.writeDurable(seq)
	return c.err
}

// ackGap acks the sequence numbers of a recorded gap: the committed
// position jumps over it once it gets there.
func (c *Cursor) ackGap(g *GapError) {
	if g.End <= c.floor.Load() {
		return
	}
	c.gapMu.Lock()
	c.gaps = append(c.gaps, *g)
	if c.gapAt.Load() == 0 {
		c.gapAt.Store(c.gaps[0].First)
	}
	c.gapMu.Unlock()
	c.advance()
}

// Commit waits until every acked record below the committed position is
// durable in the log and writes a checkpoint of it. Cancelling ctx abandons
// the wait. A nil ctx is ErrNilContext.
func (c *Cursor) Commit(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Commit", ErrNilContext)
	}
	if c.closed.Load() {
		return ErrClosed
	}
	if c.fol != nil {
		return c.checkpoint(math.MaxUint64)
	}
	f := c.floor.Load()
	if f > 1 {
		if err := c.l.WaitDurable(ctx, f-1); err != nil {
			return err
		}
	}
	return c.checkpoint(f)
}

// Close writes a last checkpoint (after waiting for the acked records to
// be durable) and closes the cursor; it may then be opened again. Later
// calls to Close return nil, other methods ErrClosed. Log.Close closes
// every open cursor, writing its last checkpoint; Close is still needed
// after it to release the Reader Next reads with. Close must not run
// concurrently with Next.
func (c *Cursor) Close() error {
	if c.r != nil {
		c.r.Close()
		c.r = nil
	}
	if c.fol != nil {
		return c.closeFollow()
	}
	s := &c.l.cursors
	s.mu.Lock()
	if s.mu.open[c.name] != c {
		s.mu.Unlock()
		return nil // closed already, by Close or Log.Close
	}
	s.mu.Unlock()
	c.closing.Store(true)
	err := c.Commit(context.Background())
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	s.mu.Lock()
	owner := s.mu.open[c.name] == c
	if owner {
		delete(s.mu.open, c.name)
	}
	c.closed.Store(true)
	s.mu.Unlock()
	if !owner {
		return err // a Log.Close took it meanwhile, and releases its lock
	}
	return errors.Join(err, c.unlock())
}

// checkpoint writes the committed position, clamped below limit (the
// sequence number after the last durable record; a cursor from OpenCursor
// passes math.MaxUint64 and makes them durable itself), if it moved since
// the last checkpoint.
func (c *Cursor) checkpoint(limit uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.checkpointLocked(limit)
}

// periodic is checkpoint for the checkpointer's pass, which skips a
// closed cursor: its list of open cursors can be older than a Close
// (whose closer writes the last checkpoint) and a DeleteCursor after it,
// and a write then would bring the deleted file back.
func (c *Cursor) periodic(limit uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() {
		return c.err
	}
	return c.checkpointLocked(limit)
}

// checkpointLocked is checkpoint. REQUIRES: c.wmu is held.
func (c *Cursor) checkpointLocked(limit uint64) error {
	// Read under wmu: a position read before a Seek back took wmu would
	// overwrite the Seek's checkpoint.
	v := min(c.floor.Load(), limit)
	if v <= c.written {
		return c.err
	}
	c.err = c.writeDurable(v)
	return c.err
}

// writeDurable writes a checkpoint of v; a cursor from OpenCursor first
// fdatasyncs the segments holding the records below it (syncBelow).
// REQUIRES: c.wmu is held.
func (c *Cursor) writeDurable(v uint64) error {
	if c.fol != nil {
		if err := c.syncBelow(v); err != nil {
			return err
		}
	}
	return c.writeCheckpoint(v)
}

// writeCheckpoint replaces the cursor's file with one recording committed.
// REQUIRES: c.wmu is held.
func (c *Cursor) writeCheckpoint(committed uint64) error {
	fsys := c.fsys
	cdir := filepath.Join(c.dir, cursorDir)
	tmp := filepath.Join(cdir, cursorAux(c.name, "tmp"))
	fail := func(what string, err error) error {
		return fmt.Errorf("wal: checkpoint cursor %q (%s): %s: %w", c.name, c.path, what, err)
	}
	f, err := fsys.OpenRegular(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fail("create "+tmp, err)
	}
	if _, err := f.WriteAt(encodeCursor(c.name, committed, c.logID), 0); err != nil {
		f.Close()
		return fail("write "+tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail("fdatasync "+tmp, err)
	}
	if err := f.Close(); err != nil {
		return fail("close "+tmp, err)
	}
	if err := fsys.Rename(tmp, c.path); err != nil {
		return fail("rename", err)
	}
	if err := fsys.SyncDir(cdir); err != nil {
		return fail("sync directory", err)
	}
	c.written = committed
	c.writes.Add(1)
	return nil
}

// CursorInfo describes a cursor of a log.
type CursorInfo struct {
	Name string
	// Committed is the checkpointed position: the lowest sequence number
	// not acked when the checkpoint was written. A consumer resumes there.
	Committed uint64
	// Acked is the committed position in memory for a cursor open on this
	// Log (it may be ahead of Committed), else Committed.
	Acked uint64
	// Open reports whether the cursor is open on this Log.
	Open bool
	// Lag counts the sequence numbers from Committed to the log's end, and
	// LagBytes the bytes of their frames in the segments (frame headers
	// included).
	Lag      uint64
	LagBytes int64
	// Err is set instead of the positions for a cursor file that cannot be
	// read (a *CursorFileError for a damaged or foreign one).
	Err error
}

// DeleteCursor removes the durable cursor name from the log, durably (its
// file, then a directory fsync), so that retention no longer keeps the
// records it had not passed: the way to drop a cursor nobody will read
// with again. A cursor open on this Log, or in another process
// (OpenCursor), is ErrCursorOpen; one that does not exist is an error
// wrapping fs.ErrNotExist. The cursor's lock file stays (a process that
// opened it must never find it replaced); opening the name again makes a
// new cursor at the log's first record.
func (l *Log) DeleteCursor(name string) error {
	if err := checkCursorName(name); err != nil {
		return err
	}
	s := &l.cursors
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	if err := l.mapErr(l.eng.Err()); err != nil {
		return err // a failed log changes nothing more
	}
	if _, ok := s.mu.open[name]; ok {
		return fmt.Errorf("%w: %q: close it before deleting it", ErrCursorOpen, name)
	}
	fsys := l.opts.fsys
	cdir := filepath.Join(l.dir, cursorDir)
	path := filepath.Join(cdir, name)
	if _, err := fsys.Stat(path); err != nil {
		return fmt.Errorf("wal: delete cursor %q: %w", name, err)
	}
	lock, err := lockCursor(fsys, l.dir, name, "delete cursor")
	if err != nil {
		return err
	}
	defer lock.Close()
	// Under the checkpoint lock: the retention floor reads cursor files.
	s.write.Lock()
	defer s.write.Unlock()
	if err := fsys.Remove(path); err != nil {
		return fmt.Errorf("wal: delete cursor %q: %w", name, err)
	}
	if err := fsys.SyncDir(cdir); err != nil {
		return fmt.Errorf("wal: delete cursor %q: sync %s: %w", name, cdir, err)
	}
	return nil
}

// Cursors lists the log's cursors, open or not, in name order, with their
// committed positions and lag.
func (l *Log) Cursors() ([]CursorInfo, error) {
	if err := l.mapErr(l.eng.Err()); err != nil {
		return nil, err
	}
	if err := l.Flush(context.Background()); err != nil {
		return nil, err
	}
	infos, err := readCursors(l.opts.fsys, l.dir, l.NextSeq(), l.opts.MaxRecordSize, l.w.id)
	if err != nil {
		return nil, err
	}
	s := &l.cursors
	s.mu.Lock()
	for i := range infos {
		if c, ok := s.mu.open[infos[i].Name]; ok {
			infos[i].Open, infos[i].Acked = true, c.floor.Load()
		}
	}
	s.mu.Unlock()
	return infos, nil
}

// ReadCursors lists the cursors of the log in dir without opening it (no
// lock, nothing written), with their committed positions and their lag
// behind the records in the segments. It works while another process
// writes the log. A directory that is not a log is a *NotLogError.
func ReadCursors(dir string, opts *Options) ([]CursorInfo, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if _, _, err := openDir(o.fsys, dir, "read cursors"); err != nil {
		return nil, err
	}
	_, next, id, err := readBounds(dir, &o)
	if err != nil {
		return nil, err
	}
	return readCursors(o.fsys, dir, next, o.MaxRecordSize, id)
}

// readBounds returns the first sequence number of the log in dir and the
// one after its last whole record, reading its last segment through (1
// and 1 for a log with no segments). It works while another process
// writes the log. What stops the read before the segment's end, other
// than a torn tail or a recorded gap (damage, a record longer than
// o.MaxRecordSize), is an error: the end is not known, and a cursor
// checkpointed past where the read stopped must not be clamped to it.
func readBounds(dir string, o *Options) (first, next uint64, id frame.LogID, err error) {
	r, err := OpenReader(dir, 0, o)
	if err != nil {
		return 0, 0, id, err
	}
	defer r.Close()
	r.spare = false // a follower's cursor reads named segments only (see poll)
	if len(r.segs) == 0 {
		return 1, 1, id, nil
	}
	r.i, r.expect = len(r.segs)-1, r.segs[len(r.segs)-1].firstSeq
	r.readThroughGaps()
	if err := r.Err(); err != nil {
		return 0, 0, id, err
	}
	return r.segs[0].firstSeq, r.expect, r.ids.id, nil
}

// readCursors lists the cursor files in dir's cursors directory, for a log
// whose records end before next and whose ID is id.
func readCursors(fsys vfs.FS, dir string, next uint64, maxRec int, id frame.LogID) ([]CursorInfo, error) {
	cdir := filepath.Join(dir, cursorDir)
	names, err := fsys.List(cdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: list cursors in %s: %w", cdir, err)
	}
	segs, _, _, err := listSegments(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []CursorInfo
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue // a checkpoint being written, or left by a crash
		}
		ci := CursorInfo{Name: n}
		if err := checkCursorName(n); err != nil {
			ci.Err = &CursorFileError{Path: filepath.Join(cdir, n), Problem: "not a cursor file name: " + err.Error()}
			out = append(out, ci)
			continue
		}
		committed, err := readCursorFile(fsys, dir, n, id)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			ci.Err = err
			out = append(out, ci)
			continue
		}
		ci.Committed, ci.Acked = committed, committed
		if committed < next {
			ci.Lag = next - committed
			if ci.LagBytes, err = bytesFrom(fsys, dir, segs, committed, maxRec); err != nil {
				ci.Err = err
			}
		}
		out = append(out, ci)
	}
	return out, nil
}

// bytesFrom returns the bytes of the frames from record seq to the end of
// the log: sealed segments after seq's are counted from their sizes, seq's
// segment and the last one are read.
func bytesFrom(fsys vfs.FS, dir string, segs []segInfo, seq uint64, maxRec int) (int64, error) {
	k := 0
	for i, s := range segs {
		if s.firstSeq <= seq {
			k = i
		}
	}
	var total int64
	for i := k; i < len(segs); i++ {
		if i > k && i < len(segs)-1 {
			st, err := fsys.Stat(filepath.Join(dir, segs[i].name))
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted by retention since the listing: no bytes left
			}
			if err != nil {
				return 0, fmt.Errorf("wal: stat %s: %w", segs[i].name, err)
			}
			total += max(st.Size()-headerPage-frame.FooterSize, 0)
			continue
		}
		from := segs[i].firstSeq
		if i == k {
			from = seq
		}
		r := &Reader{fsys: fsys, dir: dir, segs: segs[i : i+1], from: from, maxRec: maxRec, expect: segs[i].firstSeq, footerAt: -1}
		start := int64(-1)
		for r.Next() || r.gap != nil {
			if start < 0 && r.gap == nil {
				start = r.offset
			}
		}
		if start >= 0 {
			total += r.dataEnd - start
		}
		r.Close()
	}
	return total, nil
}

// cursorFloor returns the lowest checkpointed position of the log's
// cursors (ok false when it has none): retention must not delete records
// at or above it. A cursor file that cannot be read is an error: retention
// must then not guess.
func (l *Log) cursorFloor() (floor uint64, ok bool, err error) {
	cdir := filepath.Join(l.dir, cursorDir)
	names, err := l.opts.fsys.List(cdir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("wal: list cursors in %s: %w", cdir, err)
	}
	l.cursors.write.Lock()
	defer l.cursors.write.Unlock()
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue
		}
		c, err := readCursorFile(l.opts.fsys, l.dir, n, l.w.id)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the listing: it keeps nothing
		}
		if err != nil {
			return 0, false, err
		}
		if !ok || c < floor {
			floor, ok = c, true
		}
	}
	return floor, ok, nil
}
