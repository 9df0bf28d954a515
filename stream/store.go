package stream

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/wal"
)

// These errors are returned by Store, Stream and Group methods, wrapped
// with the name concerned.
var (
	// ErrName is returned for a stream or group name that is not 1 to
	// MaxName (a group: MaxGroupName) bytes of ASCII letters, digits,
	// '.', '_' and '-' not starting with '.'.
	ErrName = errors.New("stream: invalid name")
	// ErrExists is returned by Create for a stream that exists.
	ErrExists = errors.New("stream: stream exists")
	// ErrNotFound is returned for a stream that does not exist (or was
	// deleted).
	ErrNotFound = errors.New("stream: no such stream")
	// ErrClosed is returned by every call on a closed Store, Stream or
	// Group.
	ErrClosed = errors.New("stream: closed")
	// ErrNotStore is returned by Open for a directory that holds files but
	// no store.
	ErrNotStore = errors.New("stream: not a stream store")
	// ErrInUse is returned by Open when another Store, in this process or
	// another, has the directory open.
	ErrInUse = errors.New("stream: store is in use")
	// ErrBadMeta is matched by the *MetaError of a damaged or foreign
	// metadata file.
	ErrBadMeta = errors.New("stream: bad metadata file")
	// ErrNotDelivered is returned by Ack and Nack for a sequence number
	// the group has not delivered.
	ErrNotDelivered = errors.New("stream: not delivered")
	// ErrNoGroup is returned by DeleteGroup for a group that does not
	// exist.
	ErrNoGroup = errors.New("stream: no such group")
	// ErrGroupOpen is returned by DeleteGroup for a group that is open,
	// in this Store or (its position) in another process.
	ErrGroupOpen = errors.New("stream: group is open")
)

// Defaults.
const (
	// DefaultBufferSize is the default Options.BufferSize.
	DefaultBufferSize = 256 << 10
	// DefaultIdleTimeout is the default Options.IdleTimeout.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultSegmentSize is the default Config.SegmentSize.
	DefaultSegmentSize = 8 << 20
)

// Options configures a Store. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// BufferSize is the in-memory claim/commit buffer of each open stream
	// (wal.Options.BufferSize), a power of two of at least 64 KiB, or the
	// least power of two at least twice the stream's
	// Config.MaxRecordSize if that is larger. The
	// store's write-path memory is at most the number of open streams
	// times BufferSize. By default it follows the number of streams in
	// the store when a stream's log opens: DefaultBufferSize up to 256
	// streams, then the power of two that keeps all of them within
	// _autoBudget (64 MiB), at least 64 KiB (from 1,024 streams on).
	BufferSize int
	// ReaderWindow bounds the bytes of a stream's mapped segment each
	// group keeps resident behind its position (wal.Options.ReaderWindow):
	// with many streams read at once, the process's RSS grows by about
	// that much per group. By default wal.DefaultReaderWindow up to 64
	// streams, then sized as BufferSize is, down to 64 KiB.
	ReaderWindow int64
	// IdleTimeout closes the files and mappings of a stream that nothing
	// published to and no group was open on for about that long; the next
	// use opens them again. A log that failed (a write or sync error) is
	// not opened again: the stream returns that error until the store is
	// reopened, as the log itself would. Negative keeps every used stream
	// open until Close. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Default is the Config of a stream created with a nil *Config.
	Default *Config
	// DirectSync makes the store's syncs block in the system call instead
	// of parking (see wal.Options.ParkedSync, which a store otherwise
	// sets for every stream, since many streams sync at once, and for
	// what parking does to the scheduling of the kernel's sync workers). A store
	// with one busy stream, whose syncs never overlap, confirms faster
	// with it (BENCHMARKS.md).
	DirectSync bool

	// fsys is the file system: vfs.OSParked(), or vfs.OS() with
	// DirectSync, when nil (tests set it). It is every stream's too.
	fsys vfs.FS
}

// _autoBudget is what the default BufferSize, and apart from it the
// default ReaderWindow, of all the streams of a store add up to at most
// (see Options).
const _autoBudget = 64 << 20

// _minAuto is the least default BufferSize and ReaderWindow.
const _minAuto = 64 << 10

// sizes returns the BufferSize and ReaderWindow of a stream's log opened
// now: the Options', or sized by the number of streams.
func (st *Store) sizes() (buffer int, window int64) {
	n := max(st.count.Load(), 1)
	auto := int64(_autoBudget)
	if n > 1 {
		auto = int64(1) << (bits.Len64(uint64(_autoBudget/n)) - 1) // a power of two
	}
	auto = max(auto, _minAuto)
	buffer, window = st.opts.BufferSize, st.opts.ReaderWindow
	if buffer == 0 {
		buffer = int(min(auto, DefaultBufferSize))
	}
	if window == 0 {
		window = min(auto, wal.DefaultReaderWindow)
	}
	return buffer, window
}

// Store holds many named streams in one directory, each a wal.Log in its
// own subdirectory. Its methods are safe for concurrent use.
type Store struct {
	dir  string
	opts Options
	fsys vfs.FS
	lock io.Closer

	mu struct {
		sync.Mutex
		streams map[string]*Stream // every stream on disk. Protected by mu.
		closed  bool               // Protected by mu.
		// failed is set when an fsync of the streams directory failed
		// (Create, Delete): never retried, it is what Create, Stream and
		// Delete return from then on, and Close too. Protected by mu.
		failed error
	}
	// count is len(mu.streams), for sizing a stream's buffers without mu.
	count atomic.Int64
	stop  chan struct{} // closed by Close to stop the janitor
	done  chan struct{} // closed when the janitor exits
	// closed is closed when Close has finished: a Close called meanwhile
	// waits for it.
	closed chan struct{}

	// timers tracks the groups' timer goroutines, which Close joins: one
	// closed by a Delete, or by the janitor, may still be calling OnDead.
	timers struct {
		sync.Mutex
		n int // running. Protected by timers.
		// calling counts the timers calling OnDead by goroutine id (see
		// goid), for a Close made from OnDead; inCall is their sum.
		// Protected by timers.
		calling map[uint64]int
		inCall  int
		// exited is broadcast when n drops. Its L is the Mutex.
		exited sync.Cond
	}
}

// Open opens the store in dir, creating dir and the store if they do not
// exist. A directory that holds other files but no store is ErrNotStore
// (wrapped, naming the directory); one that another Store has open is
// ErrInUse. A damaged metadata file is a *MetaError naming the file. Open
// reads only metadata: a stream's log is opened on first use.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.fsys == nil {
		o.fsys = vfs.OSParked()
		if o.DirectSync {
			o.fsys = vfs.OS()
		}
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Default != nil {
		if err := o.Default.validate(); err != nil {
			return nil, fmt.Errorf("stream: open %s: Options.Default: %w", dir, err)
		}
		d := *o.Default
		o.Default = &d
	}
	wo := wal.Options{BufferSize: o.BufferSize, ReaderWindow: o.ReaderWindow}
	if err := wo.Validate(); err != nil {
		return nil, fmt.Errorf("stream: open %s: Options: %w", dir, err)
	}
	fsys := o.fsys
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("stream: open %s: %w", dir, err)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("stream: open %s: %w", dir, err)
	}
	marker := filepath.Join(dir, _storeFile)
	if err := checkUnmade(fsys, dir, names); err != nil {
		return nil, err
	}
	holder := fmt.Sprintf("pid %d", os.Getpid())
	lock, err := fsys.Lock(filepath.Join(dir, _lockFile), holder)
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: %v", ErrInUse, err)
		}
		return nil, fmt.Errorf("stream: open %s: lock: %w", dir, err)
	}
	// Again under the lock: another Store may have made the store, or
	// streams in it, since the first look.
	names, err = fsys.List(dir)
	if err == nil {
		err = checkUnmade(fsys, dir, names)
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	st := &Store{dir: dir, opts: o, fsys: fsys, lock: lock}
	st.timers.exited.L = &st.timers.Mutex
	st.timers.calling = make(map[uint64]int)
	if err := st.load(marker, slices.Contains(names, _storeFile)); err != nil {
		lock.Close()
		return nil, err
	}
	st.stop, st.done, st.closed = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go st.janitor()
	return st, nil
}

// checkUnmade checks a store directory dir holding names but no STORE
// file: it may hold only what an Open killed before it wrote STORE left,
// the lock, an empty streams directory and STORE's temporary file (which
// creating the store again overwrites). Anything else, a file in streams
// among them, is not the store's: ErrNotStore, before Open writes or
// removes anything. With a STORE file it checks nothing.
func checkUnmade(fsys vfs.FS, dir string, names []string) error {
	if slices.Contains(names, _storeFile) {
		return nil
	}
	for _, n := range names {
		if n != _lockFile && n != _streamsDir && n != _storeFile+_tmpSuffix {
			return fmt.Errorf("%w: %s holds %q and no %s file", ErrNotStore, dir, n, _storeFile)
		}
	}
	if !slices.Contains(names, _streamsDir) {
		return nil
	}
	sdir := filepath.Join(dir, _streamsDir)
	ents, err := fsys.List(sdir)
	if err != nil {
		return fmt.Errorf("stream: open %s: %w", dir, err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w: %s holds %q and no %s file", ErrNotStore, dir, filepath.Join(_streamsDir, ents[0]), _storeFile)
	}
	return nil
}

// load creates the store's files (new is false) or reads them, and
// removes what a crash in Create or Delete left behind.
func (st *Store) load(marker string, exists bool) error {
	fsys := st.fsys
	sdir := filepath.Join(st.dir, _streamsDir)
	if !exists {
		if err := fsys.MkdirAll(sdir, 0o755); err != nil {
			return fmt.Errorf("stream: create %s: %w", sdir, err)
		}
		// Open made the store's directory, and any missing above it,
		// durable (vfs.MkdirAllDurable).
		if err := writeJSON(fsys, marker, storeMarker{Format: _storeFormat, Version: _storeVer}); err != nil {
			return err
		}
	} else if err := readMarker(fsys, marker); err != nil {
		return err
	}
	names, unfinished, err := listStreams(fsys, st.dir, "open")
	if err != nil {
		return err
	}
	for _, n := range unfinished {
		// A Create or Delete that did not finish: the stream was never
		// there, or is gone.
		p := filepath.Join(sdir, n)
		if err := removeAll(fsys, p); err != nil {
			return fmt.Errorf("stream: open %s: remove %s: %w", st.dir, p, err)
		}
	}
	st.mu.streams = make(map[string]*Stream, len(names))
	for _, n := range names {
		s, err := st.loadStream(n)
		if err != nil {
			return err
		}
		st.mu.streams[n] = s
		st.count.Add(1)
	}
	if len(unfinished) > 0 {
		if err := fsys.SyncDir(sdir); err != nil {
			return fmt.Errorf("stream: open %s: sync %s: %w", st.dir, sdir, err)
		}
	}
	return nil
}

// readMarker checks the store marker file at path.
func readMarker(fsys vfs.FS, path string) error {
	var m storeMarker
	if err := readJSON(fsys, path, &m); err != nil {
		return err
	}
	if m.Format != _storeFormat || m.Version != _storeVer {
		return &MetaError{Path: path, Problem: fmt.Sprintf("format %q version %d, this build reads %q version %d", m.Format, m.Version, _storeFormat, _storeVer)}
	}
	return nil
}

// listStreams lists the streams directory of the store in dir: the streams'
// names, sorted, and the entries a Create or Delete that did not finish
// left. Any other entry is an error; op names the caller in errors.
func listStreams(fsys vfs.FS, dir, op string) (names, unfinished []string, err error) {
	sdir := filepath.Join(dir, _streamsDir)
	all, err := fsys.List(sdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("stream: %s %s: its %s directory is missing", op, dir, _streamsDir)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("stream: %s %s: %w", op, dir, err)
	}
	for _, n := range all {
		if strings.HasPrefix(n, _newPrefix) || strings.HasPrefix(n, _delPrefix) {
			unfinished = append(unfinished, n)
			continue
		}
		if err := checkName("stream", n); err != nil {
			return nil, nil, fmt.Errorf("stream: %s %s: unexpected entry %s: %w", op, dir, filepath.Join(sdir, n), err)
		}
		names = append(names, n)
	}
	return names, unfinished, nil
}

// readStreamConfig reads and checks the configuration of the stream name
// whose directory is dir.
func readStreamConfig(fsys vfs.FS, dir, name string) (Config, error) {
	var cf configFile
	path := filepath.Join(dir, _streamFile)
	if err := readJSON(fsys, path, &cf); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Config{}, &MetaError{Path: path, Problem: "missing: the stream's directory has no configuration"}
		}
		return Config{}, err
	}
	cfg, problem := cf.config()
	if problem == "" && cf.Name != name {
		problem = fmt.Sprintf("records stream %q, not %q", cf.Name, name)
	}
	if problem != "" {
		return Config{}, &MetaError{Path: path, Problem: problem}
	}
	return cfg, nil
}

// loadStream reads the metadata of the existing stream name.
func (st *Store) loadStream(name string) (*Stream, error) {
	dir := filepath.Join(st.dir, _streamsDir, name)
	cfg, err := readStreamConfig(st.fsys, dir, name)
	if err != nil {
		return nil, err
	}
	if cfg.MaxRecordSize == 0 {
		// Created before the bound was recorded: it then followed the
		// buffer, which was at most DefaultBufferSize by default.
		cfg.MaxRecordSize = max(_legacyMaxRecord, st.opts.BufferSize/4)
	}
	if err := removeStaleTemps(st.fsys, dir); err != nil {
		return nil, err
	}
	return newStream(st, name, dir, cfg), nil
}

// removeStaleTemps removes the temporary files of metadata writes (see
// writeJSON) that a crash left in the stream directory dir and its groups
// directory: a power cut may keep a temporary file's creation without the
// rename after it. Nothing writes them before the stream is loaded, and
// the store's lock keeps other processes out.
func removeStaleTemps(fsys vfs.FS, dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, _groupsDir)} {
		names, err := fsys.List(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stream: list %s: %w", d, err)
		}
		for _, n := range names {
			if !strings.HasSuffix(n, ".json"+_tmpSuffix) {
				continue
			}
			if err := fsys.Remove(filepath.Join(d, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("stream: remove %s, left by a crash: %w", filepath.Join(d, n), err)
			}
		}
	}
	return nil
}

// Dir returns the store's directory.
func (st *Store) Dir() string { return st.dir }

// Create creates the stream name with cfg (nil: Options.Default, or the
// zero Config) and returns it. The stream is created whole or not at all,
// even across a crash. ErrExists if it exists.
func (st *Store) Create(name string, cfg *Config) (*Stream, error) {
	if err := checkName("stream", name); err != nil {
		return nil, err
	}
	var c Config
	switch {
	case cfg != nil:
		c = *cfg
	case st.opts.Default != nil:
		c = *st.opts.Default
	}
	if c.MaxRecordSize == 0 {
		c.MaxRecordSize = DefaultMaxRecordSize
		if st.opts.BufferSize != 0 {
			c.MaxRecordSize = st.opts.BufferSize / 4
		}
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("stream: create %q: %w", name, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.closed {
		return nil, ErrClosed
	}
	if st.mu.failed != nil {
		return nil, st.mu.failed
	}
	if _, ok := st.mu.streams[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrExists, name)
	}
	fsys := st.fsys
	sdir := filepath.Join(st.dir, _streamsDir)
	final := filepath.Join(sdir, name)
	tmp := filepath.Join(sdir, _newPrefix+randSuffix())
	fail := func(err error) (*Stream, error) {
		_ = removeAll(fsys, tmp)
		return nil, fmt.Errorf("stream: create %q: %w", name, err)
	}
	if err := fsys.MkdirAll(filepath.Join(tmp, _logDir), 0o755); err != nil {
		return fail(err)
	}
	if err := fsys.MkdirAll(filepath.Join(tmp, _groupsDir), 0o755); err != nil {
		return fail(err)
	}
	// writeJSON fsyncs tmp last, after its rename of stream.json: that
	// makes every entry of tmp (log, groups, stream.json) durable before
	// tmp is renamed into place.
	if err := writeJSON(fsys, filepath.Join(tmp, _streamFile), c.file(name)); err != nil {
		return fail(err)
	}
	if err := fsys.Rename(tmp, final); err != nil {
		return fail(err)
	}
	s := newStream(st, name, final, c)
	st.mu.streams[name] = s
	st.count.Add(1)
	if err := fsys.SyncDir(sdir); err != nil {
		// The rename may or may not survive a crash; the stream is whole
		// either way, and there until then, but the caller must not rely
		// on it. The sync is never retried: the store is failed.
		st.failSync(sdir, err)
		return nil, fmt.Errorf("stream: create %q: sync %s: %w", name, sdir, err)
	}
	return s, nil
}

// Stream returns the existing stream name, ErrNotFound if there is none.
func (st *Store) Stream(name string) (*Stream, error) {
	if err := checkName("stream", name); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.closed {
		return nil, ErrClosed
	}
	if st.mu.failed != nil {
		return nil, st.mu.failed
	}
	s, ok := st.mu.streams[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return s, nil
}

// Delete closes the stream name, its groups included, and deletes it with
// all its records and group positions, whole: a crash leaves it whole or
// absent. Calls on a *Stream or *Group of it return ErrNotFound after.
// A stream whose directory was removed outside the store is only
// forgotten. A Delete that fails says whether the stream was deleted: if
// its directory could not be renamed out of the way, the stream is still
// there, listed and usable (the groups open on it were closed and return
// ErrClosed; each may be opened again); once it was, the stream is gone,
// and the error says what is left to happen (a sync, or removing its
// files, which the store's next Open finishes). Calls on the stream and
// its groups that would find it deleted while Delete runs wait until it
// knows whether the stream goes.
func (st *Store) Delete(name string) error {
	if err := checkName("stream", name); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.closed {
		return ErrClosed
	}
	if st.mu.failed != nil {
		return st.mu.failed
	}
	s, ok := st.mu.streams[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	// Calls on the stream wait from here until it is known whether it
	// goes: a rename that fails leaves it there, and must not have
	// them find it deleted meanwhile.
	decided := s.beginDelete()
	defer decided()
	closeErr := s.shut(errDeleted)
	fsys := st.fsys
	sdir := filepath.Join(st.dir, _streamsDir)
	gone := filepath.Join(sdir, _delPrefix+randSuffix())
	if err := fsys.Rename(s.dir, gone); err != nil {
		if _, serr := fsys.Stat(s.dir); errors.Is(serr, fs.ErrNotExist) {
			// Its directory was removed outside the store: it is gone
			// already, and must not stay listed, unusable, under a name
			// that Create would refuse.
			delete(st.mu.streams, name)
			st.count.Add(-1)
			return nil
		}
		// Still there, whole: it stays listed, and usable again.
		uerr := s.unshut(closeErr)
		decided()
		if uerr != nil {
			return fmt.Errorf("stream: delete %q: not deleted, %s is still there, but %w; the rename failed: %w", name, s.dir, uerr, err)
		}
		return fmt.Errorf("stream: delete %q: not deleted, %s is still there and usable (the groups open on it were closed): %w", name, s.dir, errors.Join(err, closeErr))
	}
	delete(st.mu.streams, name)
	st.count.Add(-1)
	decided()
	// From here on the stream is gone from this Store; what fails is
	// only whether the deletion is durable, or its records' space freed.
	if err := fsys.SyncDir(sdir); err != nil {
		st.failSync(sdir, err)
		return fmt.Errorf("stream: delete %q: deleted (%s renamed to %s), but a crash may bring it back: sync %s: %w", name, s.dir, gone, sdir, err)
	}
	if err := removeAll(fsys, gone); err != nil {
		return fmt.Errorf("stream: delete %q: deleted (%s renamed to %s), but its files are left until the store is next opened: remove %s: %w", name, s.dir, gone, gone, err)
	}
	if err := fsys.SyncDir(sdir); err != nil {
		st.failSync(sdir, err)
		return fmt.Errorf("stream: delete %q: deleted (%s renamed to %s and removed), but a crash may leave its files until the store is next opened: sync %s: %w", name, s.dir, gone, sdir, err)
	}
	// The records are gone; an error closing the log does not matter.
	return nil
}

// failSync fails the store after an fsync of the streams directory sdir
// failed: the page cache may have dropped the entries it was to make
// durable, and a later sync that succeeded would say nothing of them.
// REQUIRES: st.mu is held.
func (st *Store) failSync(sdir string, err error) {
	if st.mu.failed == nil {
		st.mu.failed = fmt.Errorf("stream: store %s failed: a sync of %s failed, and is never retried (streams created or deleted since the last sync may not survive a crash): %w", st.dir, sdir, err)
	}
}

// List returns the names of the store's streams, sorted.
func (st *Store) List() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]string, 0, len(st.mu.streams))
	for n := range st.mu.streams {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Close closes every stream and group (groups write their last
// checkpoint, logs flush and sync) and releases the directory. It waits
// for the OnDead calls in progress, unless it is called from one (see
// GroupOptions.OnDead). Later calls return nil, once the first has
// finished, except a call from OnDead, which returns at once: the first
// may be waiting for that OnDead to return. Other methods return
// ErrClosed. The first returns the store's failure, if a sync of the
// streams directory failed (see Create and Delete).
func (st *Store) Close() error {
	st.mu.Lock()
	if st.mu.closed {
		st.mu.Unlock()
		if st.inOnDead() {
			return nil
		}
		<-st.closed
		return nil
	}
	defer close(st.closed)
	st.mu.closed = true
	failed := st.mu.failed
	streams := make([]*Stream, 0, len(st.mu.streams))
	for _, s := range st.mu.streams {
		streams = append(streams, s)
	}
	st.mu.Unlock()
	close(st.stop)
	<-st.done
	var errs []error
	for _, s := range streams {
		errs = append(errs, s.shut(ErrClosed))
	}
	st.joinTimers()
	errs = append(errs, st.lock.Close(), failed)
	return errors.Join(errs...)
}

// timerStarted counts a group's timer goroutine about to start.
func (st *Store) timerStarted() {
	st.timers.Lock()
	st.timers.n++
	st.timers.Unlock()
}

// timerExited counts a group's timer goroutine out, as it exits.
func (st *Store) timerExited() {
	st.timers.Lock()
	st.timers.n--
	st.timers.exited.Broadcast()
	st.timers.Unlock()
}

// onDeadBegin records that the timer goroutine id calls OnDead, until
// onDeadEnd.
func (st *Store) onDeadBegin(id uint64) {
	st.timers.Lock()
	st.timers.calling[id]++
	st.timers.inCall++
	st.timers.Unlock()
}

// onDeadEnd is the end of onDeadBegin.
func (st *Store) onDeadEnd(id uint64) {
	st.timers.Lock()
	if st.timers.calling[id]--; st.timers.calling[id] == 0 {
		delete(st.timers.calling, id)
	}
	st.timers.inCall--
	st.timers.Unlock()
}

// inOnDead reports whether the caller is a group timer calling OnDead (or
// may be: one whose goroutine id could not be read).
func (st *Store) inOnDead() bool {
	st.timers.Lock()
	n := len(st.timers.calling)
	st.timers.Unlock()
	if n == 0 {
		return false // the usual case: no goroutine id to read
	}
	id := goid()
	st.timers.Lock()
	defer st.timers.Unlock()
	return st.timers.calling[id] > 0 || st.timers.calling[_unknownG] > 0
}

// joinTimers waits for every group's timer goroutine, stopped by then, to
// exit. A caller that is a timer calling OnDead waits only for those not
// calling OnDead, which run no user code: one that is may be waiting for
// the caller (a Close of the caller's group from its OnDead), and each
// exits when its call returns.
func (st *Store) joinTimers() {
	fromOnDead := st.inOnDead()
	st.timers.Lock()
	for st.timers.n > 0 && (!fromOnDead || st.timers.n > st.timers.inCall) {
		st.timers.exited.Wait()
	}
	st.timers.Unlock()
}

// janitor closes idle streams' logs every IdleTimeout/2: a stream not used
// for two periods in a row, with no group open, is closed (see
// Stream.closeIdle). It shuts a stream whose directory was removed
// outside the store (see Stream.checkDir).
func (st *Store) janitor() {
	defer close(st.done)
	if st.opts.IdleTimeout < 0 {
		<-st.stop
		return
	}
	t := time.NewTicker(max(st.opts.IdleTimeout/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-st.stop:
			return
		case <-t.C:
		}
		st.mu.Lock()
		streams := make([]*Stream, 0, len(st.mu.streams))
		for _, s := range st.mu.streams {
			streams = append(streams, s)
		}
		st.mu.Unlock()
		for _, s := range streams {
			s.checkDir()
			s.closeIdle()
		}
	}
}

// randSuffix returns a short random hex string for temporary names.
func randSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// StreamInfo describes a stream of a store on disk.
type StreamInfo struct {
	Name   string
	Config Config
	// LogDir is the directory of the stream's wal.Log; its cursors are
	// the positions of the stream's groups.
	LogDir string
}

// Describe reads the metadata of the store in dir, sorted by name, without
// opening the store or taking its lock: for tools that inspect a store
// another process may be using, as `appendlog stat` does. It changes
// nothing. What a crash left of a Create or Delete is skipped, as Open
// would remove it, and so is a stream deleted while Describe reads (by
// the process using the store). ErrNotStore if dir holds no store; a
// damaged metadata file is a *MetaError naming it.
func Describe(dir string) ([]StreamInfo, error) { return describe(vfs.OS(), dir) }

// describe is Describe on fsys.
func describe(fsys vfs.FS, dir string) ([]StreamInfo, error) {
	marker := filepath.Join(dir, _storeFile)
	if err := readMarker(fsys, marker); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no %s file", ErrNotStore, dir, _storeFile)
		}
		return nil, err
	}
	names, _, err := listStreams(fsys, dir, "describe")
	if err != nil {
		return nil, err
	}
	out := make([]StreamInfo, 0, len(names))
	for _, n := range names {
		sdir := filepath.Join(dir, _streamsDir, n)
		cfg, err := readStreamConfig(fsys, sdir, n)
		if err != nil {
			if _, serr := fsys.Stat(sdir); errors.Is(serr, fs.ErrNotExist) {
				continue // deleted since it was listed, by the store's owner
			}
			return nil, err
		}
		out = append(out, StreamInfo{Name: n, Config: cfg, LogDir: filepath.Join(sdir, _logDir)})
	}
	return out, nil
}
