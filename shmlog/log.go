package shmlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
)

// Defaults for zero Options fields.
const (
	// DefaultMaxFileSize is the size of each file, header page included.
	DefaultMaxFileSize = 64 << 20
	// DefaultCommitTimeout is how long a frame may stay unfinished before
	// a reader checks whether its writer is gone.
	DefaultCommitTimeout = time.Second
)

// Options configure Open and OpenReader. The zero Options are the
// defaults.
type Options struct {
	// MaxFileSize is the size of each file of a new log, its 4096-byte
	// header page included: a multiple of 8 from 8192 to 4 GiB. A log that
	// exists keeps the size it was created with. 0 means
	// DefaultMaxFileSize.
	MaxFileSize int64
	// CommitTimeout is how long a reader waits for an unfinished frame
	// before padding it over if its writer is gone. 0 means
	// DefaultCommitTimeout.
	CommitTimeout time.Duration
	// LiveTimeout, if not 0, lets a reader pad over a frame in progress
	// for that long even though its writer lives (its Commit then fails
	// with ErrPadded). 0 never pads over a live writer.
	LiveTimeout time.Duration
	// Perm is the permission of files Open creates; 0 means 0o644. It
	// must let the owner read and write (every process maps the files
	// read-write).
	Perm os.FileMode
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxFileSize == 0 {
		c.MaxFileSize = DefaultMaxFileSize
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.Perm == 0 {
		c.Perm = 0o644
	}
	capacity := c.MaxFileSize - _hdrSize
	if capacity < minCapacity || capacity > maxCapacity || capacity%_align != 0 {
		return c, fmt.Errorf("shmlog: MaxFileSize %d: want a multiple of %d from %d to %d", c.MaxFileSize, _align, minCapacity+_hdrSize, maxCapacity+_hdrSize)
	}
	if c.CommitTimeout < 0 || c.LiveTimeout < 0 {
		return c, errors.New("shmlog: negative timeout")
	}
	return c, nil
}

// Log is one process's handle on a shared log. See the package doc.
type Log struct {
	path     string
	o        Options
	capacity uint64
	id       uint32                           // the log's id (file 0's), 0 if unknown
	alive    func(pid int, start uint64) bool // test seam
	// beforeHeader, if not nil, runs between a claim and its header CAS
	// (test seam).
	beforeHeader func()
	// beforeCreate, if not nil, runs in a roll that found no next file,
	// before it creates it (test seam).
	beforeCreate func()
	fdatasync    func(*os.File) error // sys.Fdatasync (test seam)

	lockf *os.File // path.lock: exclusive while joining, rolling, closing
	f0    *os.File // file 0: shared flock for the Log's lifetime
	hdr   header   // file 0's header page, mapped

	slot    int
	marker  uint64         // low 32 bits of this Log's in-progress words
	entered *atomic.Uint64 // this slot's count of claims entered
	left    *atomic.Uint64 // this slot's count of claims left

	recovery  Recovery // what Open recovered; read-only after Open
	cur       atomic.Pointer[mfile]
	closed    atomic.Bool
	dirSynced atomic.Bool // Sync made the directory durable once

	mu struct {
		sync.Mutex
		synced uint64 // files below this index are synced; Protected by mu.
		// activeSynced: a Sync made file 0 durable with active at least
		// this. Protected by mu.
		activeSynced uint64
		files        []*mfile
	}
}

// mfile is one mapped file. Appenders hold a reference while they touch
// the mapping; it is unmapped once retired and unreferenced.
type mfile struct {
	hdr0     header // file 0's header page, for waking readers
	idx      uint64
	name     string
	m        []byte
	tail     *atomic.Uint64
	refs     atomic.Int64
	retired  atomic.Bool
	unmapped atomic.Bool
	trimmed  bool // the file was shorter than full when mapped: a clean Close cut it
	// size is how many bytes of the mapping the file backs: full, or for
	// a Reader's mapping of a trimmed file its size, which file (kept
	// open) tells again if a Log extends it. Only a Reader reads the
	// mapping near it and calls backed; touching a page past the file's
	// end would be a SIGBUS.
	size int64
	file *os.File
	id   os.FileInfo // the file mapped: Sync checks that its name still names it

	// gone holds the data offsets of the Reservations whose Commit found
	// them padded over and dropped their reference, so that a second
	// Commit does not drop it again (and unmap the file under another
	// Reservation).
	gone struct {
		sync.Mutex
		offs map[uint64]struct{} // Protected by gone.Mutex.
	}
}

// backed reports whether the file backs the data bytes of f below end,
// looking at the file's size again if f's mapping may have grown.
// REQUIRES: only one goroutine (a Reader's) calls it.
func (f *mfile) backed(end uint64) bool {
	if int64(_hdrSize+end) <= f.size {
		return true
	}
	if f.file != nil {
		if fi, err := f.file.Stat(); err == nil {
			f.size = min(fi.Size(), int64(len(f.m)))
		}
	}
	return int64(_hdrSize+end) <= f.size
}

// pastEnd is the error for n bytes at data offset off that f's file does
// not hold: it was cut shorter than its frames say.
func (f *mfile) pastEnd(off, n uint64) error {
	return corrupt(f.name, int64(_hdrSize+off), fmt.Errorf("%w: the file ends at byte %d, but the %d bytes of frames from here run past it", ErrTruncated, f.size, n))
}

// _dead is refs of a file a roll retired and unmapped: no reference is
// taken again (tryRef).
const _dead = math.MinInt64 / 2

// tryRef takes a reference to f unless f is dead: retired, unreferenced
// and unmapped by a roll. A reference keeps f mapped, except through the
// Log's Close.
func (f *mfile) tryRef() bool {
	for {
		n := f.refs.Load()
		if n < 0 {
			return false
		}
		if f.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (f *mfile) release() { f.releaseN(1) }

// releaseN drops n references; the last one of a retired file unmaps it.
func (f *mfile) releaseN(n int64) {
	if f.refs.Add(-n) == 0 && f.retired.Load() {
		f.kill()
	}
}

// kill unmaps f if it has no reference, and makes it dead: the swap from
// 0 orders it against tryRef, so that a reference taken is never to an
// unmapped file.
func (f *mfile) kill() {
	if f.refs.CompareAndSwap(0, _dead) {
		f.unmap()
	}
}

// releasePadded releases the reference of the Reservation at data offset
// off, which was padded over, unless an earlier Commit of it did.
func (f *mfile) releasePadded(off uint64) {
	f.gone.Lock()
	_, done := f.gone.offs[off]
	if !done {
		if f.gone.offs == nil {
			f.gone.offs = make(map[uint64]struct{})
		}
		f.gone.offs[off] = struct{}{}
	}
	f.gone.Unlock()
	if !done {
		f.release()
	}
}

func (f *mfile) retire() {
	f.retired.Store(true)
	f.kill()
}

func (f *mfile) unmap() {
	if f.unmapped.CompareAndSwap(false, true) {
		sys.Munmap(f.m)
		if f.file != nil {
			f.file.Close()
		}
	}
}

// Open opens the log at path, creating it if it does not exist, and
// registers this process in a slot. It waits (with no timeout) for other
// processes opening, rolling or closing the log.
func Open(path string, o *Options) (*Log, error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Perm&^os.ModePerm != 0 || opts.Perm&0o600 != 0o600 {
		// Every process maps the files read-write, their creator too.
		return nil, fmt.Errorf("shmlog: Perm %v: want permission bits that let the owner read and write", opts.Perm)
	}
	path, err = logName(path)
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, o: opts, alive: processAlive, fdatasync: sys.Fdatasync}
	if err := l.open(); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	// Refuse a path that is not a log before creating PATH.lock beside
	// it. File 0 is created whole (linked into place) and its header
	// page never changes, so what this finds holds under the lock too.
	// (O_RDWR, as joinFile0 opens it: opening a FIFO so does not block.)
	if f, err := os.OpenFile(l.path, os.O_RDWR, 0); err == nil {
		_, err := checkFile0(f, l.path)
		f.Close()
		if err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("shmlog: open: %w", err)
	}
	if err := l.lockLog(); err != nil {
		return fmt.Errorf("shmlog: open: %w", err)
	}
	defer sys.Unlock(l.lockf)
	if _, err := os.Stat(l.path); errors.Is(err, fs.ErrNotExist) {
		// A later file with no file 0 is the rest of a log whose file 0 was
		// removed: the new log would roll into it, taking its records, or
		// share it with that log's Logs still appending to it.
		if name, err := laterFile(l.path); err != nil {
			return fmt.Errorf("shmlog: open: %w", err)
		} else if name != "" {
			return fmt.Errorf("shmlog: open: %s does not exist but %s does: it is left of a log whose file 0 was removed; remove the log's other files to make a new log at %s", l.path, name, l.path)
		}
		if err := createFile(l.path, params{capacity: uint64(l.o.MaxFileSize - _hdrSize), id: newLogID()}, l.o.Perm, l.fdatasync); err != nil {
			return err
		}
	}
	f0, hdr, p, alone, err := joinFile0(l.path, true)
	l.f0, l.hdr = f0, hdr
	if err != nil {
		return err
	}
	l.capacity, l.id = p.capacity, p.id
	var lost error
	if alone {
		lost = l.lostActive()
	}
	f, err := mapFile(l.path, l.hdr.active().Load(), l.capacity, l.id, true)
	if err != nil {
		return err
	}
	if alone {
		// No other Log or Reader has the log open: whoever had it is gone.
		l.recovery = recoverFile(f, l.capacity)
		last, err := l.recoverLater(f.idx)
		if err != nil {
			f.unmap()
			return err
		}
		if last > f.idx {
			if f, err = l.moveActive(f, last); err != nil {
				return err
			}
		}
		if l.recovery.Damage == nil {
			l.recovery.Damage = lost
		}
		removeTemps(l.path, l.capacity, l.id)
		l.hdr.waiters().Store(0)
		// Recovery may move the tail back, so a slot's first word stored
		// before it can lie past claims made since: a process of a binary
		// that predates the word takes a slot without storing it, and
		// readers would take its live claims for an earlier owner's. With
		// the words cleared here, every first word is at or before the
		// tail (tails only grow until the next recovery).
		for s := range _slots {
			l.hdr.slot(s, _slotFirst).Store(0)
		}
		if err := sys.Lock(f0, false); err != nil {
			f.unmap()
			return fmt.Errorf("shmlog: open: %w", err)
		}
	}
	f.hdr0 = l.hdr
	l.mu.files = append(l.mu.files, f)
	l.cur.Store(f)
	return l.register()
}

// lostActive moves active back to the file before it if the file active
// names is missing while that one is there, and then returns the damage
// to report: a power cut can keep file 0's move of active to a new file
// but lose the new file's directory entry (a roll leaves both to the next
// Sync, and file 0's page may be written back first), and nothing of that
// file is left. Appends go on in the file before it, which was full.
// REQUIRES: no other process has the log open; the exclusive lock of
// path.lock.
func (l *Log) lostActive() error {
	a := l.hdr.active().Load()
	if a == 0 {
		return nil
	}
	name := fileName(l.path, a)
	if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(fileName(l.path, a-1)); err != nil {
		return nil // mapping file a fails, naming it
	}
	l.hdr.active().Store(a - 1)
	return corrupt(name, 0, fmt.Errorf("%w: the active file is missing (a power cut lost its directory entry): appends go on in file %d", ErrTruncated, a-1))
}

// removeTemps removes the temporary files (createFile's) that creators
// killed before they linked them left beside the log at path: each is as
// large as a whole file. No process is creating a file while the log is
// open by no other: rolls are made by Logs with the log open, and an Open
// makes file 0 only where there is none. A file is removed only if it
// holds what such a creator leaves (staleTemp): a name alone does not
// tell, as P.tmp may be another log's file 0, or a copy someone is making.
// Errors are ignored: a file left is only space.
// REQUIRES: no other process has the log open; the exclusive lock of
// path.lock.
func removeTemps(path string, capacity uint64, id uint32) {
	dir, base := filepath.Dir(path), filepath.Base(path)+"."
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if !ok {
			continue
		}
		if idx, ok := isTemp(rest); ok {
			name := filepath.Join(dir, e.Name())
			if staleTemp(name, fileName(path, idx), idx, capacity, id) {
				os.Remove(name)
			}
		}
	}
}

// isTemp reports whether rest, a name after "P.", is that of a temporary
// file of createFile, and for which file: [8 digits "."] pid "-" n ".tmp",
// or [8 digits "."] "tmp", the one name each file had before, which a
// creator truncated and reused then.
func isTemp(rest string) (idx uint64, ok bool) {
	rest, ok = strings.CutSuffix(rest, "tmp")
	if !ok {
		return 0, false
	}
	if len(rest) > 8 && rest[8] == '.' && digits(rest[:8]) {
		idx, _ = strconv.ParseUint(rest[:8], 10, 64)
		rest = rest[9:]
	}
	if rest == "" {
		return idx, true
	}
	rest, ok = strings.CutSuffix(rest, ".")
	pid, n, cut := strings.Cut(rest, "-")
	return idx, ok && cut && digits(pid) && digits(n)
}

// staleTemp reports whether name, a temporary file's name for file idx
// (named final once linked), holds what a creator killed before linking
// it leaves: no more than a whole file, with a first page of zeros (killed
// before writing the header) or with the header of this log's file idx
// and nothing after it on the page (never mapped: no tail, no slot
// taken); or is final itself, a creator killed between the link and the
// removal of the temporary name.
func staleTemp(name, final string, idx, capacity uint64, id uint32) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if ffi, err := os.Stat(final); err == nil && os.SameFile(fi, ffi) {
		return true
	}
	if fi.Size() > int64(_hdrSize+capacity) {
		return false
	}
	b := make([]byte, _hdrSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	zero := func(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }
	if zero(b[:n]) {
		return true
	}
	p, err := decodeHeader(name, b[:n])
	return err == nil && p.index == idx && p.capacity == capacity && sameLog(p.id, id) && zero(b[_offParCRC+4:])
}

func digits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// recoverLater recovers the files after the active file a, if there are
// any: a power cut can lose file 0's move of active to a file that then
// took records (Sync makes the move durable; page writeback keeps no
// order), whose tail word may lag its frames and whose last frame may be
// torn. A roll keeps such a file and appends at its tail: recovered, it
// appends after its last valid frame, not over its records. No process
// maps a file after the active one, so this is safe alone.
// REQUIRES: no other process has the log open; the exclusive lock of
// path.lock.
func (l *Log) recoverLater(a uint64) (last uint64, err error) {
	last = a
	for i := a + 1; i < 1<<31; i++ {
		if _, err := os.Stat(fileName(l.path, i)); errors.Is(err, fs.ErrNotExist) {
			return last, nil
		}
		f, err := mapFile(l.path, i, l.capacity, l.id, true)
		if err != nil {
			return 0, fmt.Errorf("shmlog: open: recover file %d after the active file %d: %w", i, a, err)
		}
		rec := recoverFile(f, l.capacity)
		if f.tail.Load() > 0 {
			last = i
		}
		f.unmap()
		l.recovery.Padded += rec.Padded
		l.recovery.Cut += rec.Cut
		if l.recovery.Damage == nil {
			l.recovery.Damage = rec.Damage
		}
	}
	return last, nil
}

// moveActive moves appends on from the recovered active file f to file
// last after it, the last that recoverLater found records in, and returns
// last's mapping (f is unmapped): appends after those records keep the
// file order the claim order. The space left in f and in the files
// between (lost to the power cut) is padded over, their tails moved to
// the end.
// REQUIRES: as recoverLater; files f.idx+1 to last recovered.
func (l *Log) moveActive(f *mfile, last uint64) (*mfile, error) {
	for i := f.idx; i < last; i++ {
		m := f
		if i > f.idx {
			var err error
			if m, err = mapFile(l.path, i, l.capacity, l.id, true); err != nil {
				f.unmap()
				return nil, fmt.Errorf("shmlog: open: recover file %d: %w", i, err)
			}
		}
		for off := min(m.tail.Load(), l.capacity); l.capacity-off >= frame.HeaderSize; {
			size := padFrame(l.capacity - off)
			padOver(m, off, 0, size-frame.HeaderSize)
			off += size
		}
		m.tail.Store(l.capacity)
		if m != f {
			m.unmap()
		}
	}
	f.unmap()
	l.hdr.active().Store(last)
	m, err := mapFile(l.path, last, l.capacity, l.id, true)
	if err != nil {
		return nil, fmt.Errorf("shmlog: open: %w", err)
	}
	return m, nil
}

// lockLog takes the exclusive flock of path.lock, which serialises Open's
// join, rolls and Close across processes. A flock locks an inode, not a
// name: were path.lock removed or replaced while l holds a descriptor of
// it, a process opening the log now would lock a new file of that name,
// and the two locks would not exclude each other (two rolls could each
// create the next file). So once it holds the lock, lockLog checks that
// path.lock still names the file it locked, and if not it opens the name
// again (creating it) and retries, so every process locks the file the
// name holds when it locks. A removal while the lock is held is not seen
// until the next lockLog; no process of the log removes path.lock.
// REQUIRES: no other call on l runs lockLog at once (l.mu, or Open or
// Close, which run alone).
func (l *Log) lockLog() error {
	name := l.path + ".lock"
	for {
		if l.lockf == nil {
			f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, l.o.Perm)
			if err != nil {
				return err
			}
			if err := checkLockFile(f, l.path); err != nil {
				f.Close()
				return err
			}
			l.lockf = f
		}
		if err := sys.Lock(l.lockf, true); err != nil {
			return err
		}
		held, err := l.lockf.Stat()
		if err != nil {
			sys.Unlock(l.lockf)
			return err
		}
		fi, err := os.Stat(name)
		if err == nil && os.SameFile(fi, held) {
			return nil
		}
		sys.Unlock(l.lockf)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		l.lockf.Close()
		l.lockf = nil
	}
}

// logName returns the name by which the log's files are found: path, or
// if path is a symlink, the name it leads to. Later files and path.lock
// are named after file 0, so processes opening one log by a symlink and
// by the name it leads to would otherwise roll into different files and
// lock different lock files.
func logName(path string) (string, error) {
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil // a missing path is made; other errors are the open's
	}
	name, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("shmlog: open: %s is a symlink that leads to no file: %w", path, err)
	}
	return name, nil
}

// checkLockFile refuses a lock file f (path.lock, opened) that is not a
// regular file, or that is the log's file 0 at path through a link: every
// Log and Reader holds file 0's flock shared for its lifetime, so an
// exclusive flock of it would wait for all of them, and Open for its own.
func checkLockFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (mode %v), so not a lock file", f.Name(), fi.Mode())
	}
	if p0, err := os.Stat(path); err == nil && os.SameFile(fi, p0) {
		return fmt.Errorf("%s is the log's file 0, %s (a link to it), not a lock file of its own", f.Name(), path)
	}
	return nil
}

// laterFile returns the name of a file i ≥ 1 of a log at path (path.%08d)
// if there is one, or "".
func laterFile(path string) (string, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)+"."
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if ok && len(rest) == 8 && strings.Trim(rest, "0123456789") == "" {
			return filepath.Join(dir, e.Name()), nil
		}
	}
	return "", nil
}

// joinFile0 opens file 0, takes its shared flock, checks its header and
// maps its header page. With tryAlone, it first tries the exclusive flock:
// alone reports that it got it (no other Log or Reader has the log open),
// and the caller converts it to shared once it has recovered the log.
func joinFile0(path string, tryAlone bool) (f *os.File, h header, p params, alone bool, err error) {
	h, p, err = func() (header, params, error) {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return header{}, params{}, fmt.Errorf("shmlog: open: %w", err)
		}
		if tryAlone && sys.TryLock(f) == nil {
			alone = true
		} else if err := sys.Lock(f, false); err != nil {
			return header{}, params{}, fmt.Errorf("shmlog: open: %w", err)
		}
		return readFile0(f, path)
	}()
	return f, h, p, alone, err
}

// checkFile0 checks that f, opened at path, is a regular file whose header
// page is that of file 0 of a log.
func checkFile0(f *os.File, path string) (params, error) {
	fi, err := f.Stat()
	if err != nil {
		return params{}, fmt.Errorf("shmlog: open: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return params{}, fmt.Errorf("shmlog: %s: not a regular file (mode %v), so not a shared-memory log", path, fi.Mode())
	}
	b := make([]byte, _hdrSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return params{}, fmt.Errorf("shmlog: read header: %w", err)
	}
	p, err := decodeHeader(path, b[:n])
	if err != nil {
		return params{}, err
	}
	if p.index != 0 {
		if log, ok := strings.CutSuffix(path, fmt.Sprintf(".%08d", p.index)); ok {
			return params{}, fmt.Errorf("shmlog: %s is file %d of the log %s: open the log by the name of its file 0, %s", path, p.index, log, log)
		}
		return params{}, corrupt(path, _offIndex, fmt.Errorf("%w: file 0 says it is file %d", ErrHeader, p.index))
	}
	return p, nil
}

// readFile0 checks file 0's header and maps its header page.
func readFile0(f *os.File, path string) (header, params, error) {
	p, err := checkFile0(f, path)
	if err != nil {
		return header{}, params{}, err
	}
	m, err := sys.Mmap(f, 0, _hdrSize, true)
	if err != nil {
		return header{}, params{}, err
	}
	return header{m}, p, nil
}

// mapFile opens and maps file idx of the log at path whole. With extend,
// it first preallocates the file again if the last Close trimmed it;
// without, it maps a trimmed file as it is, after checking that its tail
// lies within it (callers then read nothing at or past the tail).
// REQUIRES: the exclusive lock of path.lock is held if extend.
func mapFile(path string, idx, capacity uint64, id uint32, extend bool) (*mfile, error) {
	name := fileName(path, idx)
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shmlog: open file %d: %w", idx, err)
	}
	keep := false // the mapping outlives the descriptor, unless kept to tell the size
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	full := int64(_hdrSize + capacity)
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size() // before any preallocation: the tail must lie within it
	if size < _hdrSize {
		return nil, corrupt(name, size, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header page", ErrTruncated, size, _hdrSize))
	}
	var tb [8]byte
	if _, err := f.ReadAt(tb[:], _offTail); err != nil {
		return nil, fmt.Errorf("shmlog: read %s: %w", name, err)
	}
	if t := min(binary.LittleEndian.Uint64(tb[:]), capacity); int64(_hdrSize+t) > size {
		return nil, corrupt(name, size, fmt.Errorf("%w: %d bytes, but %d bytes of data were claimed", ErrTruncated, size, t))
	}
	// The header is checked before the file is preallocated: a file
	// refused (another log's, or of another size) is left as it was.
	page := make([]byte, _hdrSize)
	if _, err := f.ReadAt(page, 0); err != nil {
		return nil, fmt.Errorf("shmlog: read %s: %w", name, err)
	}
	p, err := decodeHeader(name, page)
	if err == nil && (p.index != idx || p.capacity != capacity) {
		err = corrupt(name, _offIndex, fmt.Errorf("%w: file %d of %d data bytes where file %d of %d was due", ErrHeader, p.index, p.capacity, idx, capacity))
	}
	if err == nil && !sameLog(p.id, id) {
		err = corrupt(name, _offLogID, fmt.Errorf("%w: a file of another log (log id %#x; file 0's is %#x)", ErrHeader, p.id, id))
	}
	if err != nil {
		return nil, err
	}
	backed := min(size, full)
	if size < full && extend {
		if err := sys.Fallocate(f, 0, full); err != nil {
			return nil, fmt.Errorf("shmlog: preallocate %s: %w", name, err)
		}
		backed = full
	}
	m, err := sys.Mmap(f, 0, int(full), true)
	if err != nil {
		return nil, err
	}
	mf := &mfile{idx: idx, name: name, m: m, tail: sys.Uint64At(m, _offTail), trimmed: size < full, size: backed, id: fi}
	if backed < full {
		mf.file, keep = f, true
	}
	return mf, nil
}

// register takes a free slot, or one whose process is gone.
// REQUIRES: the exclusive lock of path.lock.
func (l *Log) register() error {
	pid := os.Getpid()
	start, _ := sys.ProcStart(pid)
	for s := range _slots {
		state := l.hdr.slot(s, _slotState)
		st := state.Load()
		if uint32(st) != 0 && l.alive(int(uint32(st)), l.hdr.slot(s, _slotStart).Load()) {
			continue
		}
		gen := st>>32 + 1
		if !state.CompareAndSwap(st, gen<<32|uint64(uint32(pid))) {
			continue
		}
		l.hdr.slot(s, _slotStart).Store(start)
		l.hdr.slot(s, _slotEnter).Store(0)
		l.hdr.slot(s, _slotLeave).Store(0)
		// Every claim of this Log is at or after where appends stand now
		// (rolls wait for the lock held here, and tails only grow while
		// the log is open): readers tell by it an earlier owner's claim
		// from this Log's when the generation's low 16 bits have wrapped.
		cur := l.cur.Load()
		l.hdr.slot(s, _slotFirst).Store(cur.idx<<32 | min(cur.tail.Load(), l.capacity))
		l.slot = s
		l.marker = (gen&0xffff)<<16 | uint64(s+1)
		l.entered = l.hdr.slot(s, _slotEnter)
		l.left = l.hdr.slot(s, _slotLeave)
		return nil
	}
	return fmt.Errorf("%w in %s (%d processes)", ErrNoSlot, l.path, _slots)
}

// Reservation is a claim of space for one record, from Reserve. Fill Bytes
// and Commit it exactly once.
type Reservation struct {
	f   *mfile
	off uint64 // data offset of the frame
	n   int
	w   uint64 // the in-progress word
}

// Bytes returns the record's payload space in the shared mapping. It is
// valid until Commit or the Log's Close; after Close it is nil.
func (r Reservation) Bytes() []byte {
	if r.f == nil || r.f.unmapped.Load() {
		return nil
	}
	return r.payload()
}

func (r Reservation) payload() []byte {
	at := _hdrSize + int(r.off) + frame.HeaderSize
	return r.f.m[at : at+r.n : at+r.n]
}

// Pos returns the record's position. A zero Reservation (the one Reserve
// returns with an error) is no claim: its Pos is 0, its Bytes nil, and its
// Commit fails.
func (r Reservation) Pos() uint64 {
	if r.f == nil {
		return 0
	}
	return r.f.idx<<32 | r.off
}

// Commit publishes the record. It returns an error wrapping ErrPadded if
// another process padded the claim over first: the record is then not in
// the log. Commit each Reservation exactly once, before the Log's Close
// (after it, Commit returns ErrClosed and the record is not in the log); a
// second Commit of a committed record, or of one padded over, returns an
// error and changes nothing.
func (r Reservation) Commit() error {
	if r.f == nil {
		return errors.New("shmlog: Commit of a zero Reservation")
	}
	// The Reservation's reference keeps its file mapped until this Commit
	// releases it, except through Close; a second Commit has none, and a
	// roll may unmap the file at any moment. So Commit takes a reference
	// of its own for as long as it touches the mapping: refused for a
	// file a roll unmapped, and unmapped tells of Close (which must not
	// run concurrently with Commit).
	if !r.f.tryRef() {
		return fmt.Errorf("shmlog: commit at %#x: its file is unmapped (this Reservation was committed before): %w", r.Pos(), ErrClosed)
	}
	if r.f.unmapped.Load() {
		r.f.release()
		return fmt.Errorf("shmlog: commit at %#x: its file is unmapped (the Log was closed, or this Reservation committed before): %w", r.Pos(), ErrClosed)
	}
	hdr := _hdrSize + int(r.off)
	word := recordWord(r.payload(), r.Pos())
	hw := sys.Uint64At(r.f.m, hdr)
	if !hw.CompareAndSwap(r.w, word) {
		var err error
		if hw.Load() == word {
			err = corrupt(r.f.name, int64(hdr), errors.New("shmlog: record committed twice"))
		} else {
			err = corrupt(r.f.name, int64(hdr), ErrPadded)
			r.f.releasePadded(r.off)
		}
		r.f.release()
		return err
	}
	if r.f.hdr0.waiters().Load() != 0 {
		r.f.hdr0.wake().Add(1)
		sys.FutexWake(r.f.hdr0.b, _offWake)
	}
	r.f.releaseN(2) // Commit's reference and the Reservation's
	return nil
}

// Append appends p as one record and returns its position. It does not
// allocate.
func (l *Log) Append(p []byte) (uint64, error) {
	r, err := l.Reserve(len(p))
	if err != nil {
		return 0, err
	}
	copy(r.payload(), p)
	return r.Pos(), r.Commit()
}

// acquire returns the current file with a reference held, or nil after
// Close.
func (l *Log) acquire() *mfile {
	for {
		f := l.cur.Load()
		if f == nil {
			return nil
		}
		if !f.tryRef() {
			continue // retired and unmapped since the load: cur has moved on
		}
		if !f.retired.Load() {
			return f
		}
		f.release()
	}
}

// Reserve claims space for an n-byte record. The caller fills
// Reservation.Bytes and calls Commit; until then readers wait at the
// record (a reader pads it over only if this process dies, or after
// LiveTimeout). It does not allocate.
func (l *Log) Reserve(n int) (Reservation, error) {
	if n < 0 || uint64(n)+frame.HeaderSize > l.capacity || n > frame.MaxPayload {
		if l.capacity == 0 {
			// A zero Log, not made by Open: no size fits, but that is not
			// the cause to name.
			return Reservation{}, fmt.Errorf("shmlog: Reserve on a Log not made by Open: %w", ErrClosed)
		}
		return Reservation{}, fmt.Errorf("%w: %d bytes (a file holds %d)", ErrTooLarge, n, l.capacity-frame.HeaderSize)
	}
	size := frameSize(n)
	for {
		if l.closed.Load() {
			return Reservation{}, ErrClosed
		}
		f := l.acquire()
		if f == nil {
			return Reservation{}, ErrClosed
		}
		l.entered.Add(1)
		off := f.tail.Add(size) - size
		if off+size <= l.capacity {
			if l.beforeHeader != nil {
				l.beforeHeader()
			}
			w := uint64(n)<<32 | l.marker
			hw := sys.Uint64At(f.m, _hdrSize+int(off))
			ok := hw.CompareAndSwap(0, w)
			l.left.Add(1)
			if !ok {
				f.release()
				return Reservation{}, corrupt(f.name, int64(_hdrSize+off), ErrPadded)
			}
			binary.LittleEndian.PutUint64(f.m[_hdrSize+int(off)+8:], f.idx<<32|off)
			return Reservation{f: f, off: off, n: n, w: w}, nil
		}
		if off < l.capacity && l.capacity-off >= frame.HeaderSize {
			pos := f.idx<<32 | off
			binary.LittleEndian.PutUint64(f.m[_hdrSize+int(off)+8:], pos)
			sys.Uint64At(f.m, _hdrSize+int(off)).CompareAndSwap(0, paddingWord(l.capacity-off-frame.HeaderSize, pos))
		}
		l.left.Add(1)
		idx := f.idx
		f.release()
		if err := l.roll(idx); err != nil {
			return Reservation{}, err
		}
	}
}

// roll moves this Log past full file idx: it creates file idx+1 if no
// process has, and maps the active file.
func (l *Log) roll(idx uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.cur.Load(); cur == nil || cur.idx > idx {
		return nil
	}
	if err := l.lockLog(); err != nil {
		return fmt.Errorf("shmlog: roll: %w", err)
	}
	defer sys.Unlock(l.lockf)
	// Make or map no file by name for a log that is no longer at the path:
	// a new log there has files of the same names.
	if err := l.checkPath(); err != nil {
		return fmt.Errorf("shmlog: roll: %w", err)
	}
	active := l.hdr.active()
	var f *mfile
	if a := active.Load(); a == idx {
		// A file idx+1 there is this log's (Open refuses a path whose file
		// 0 is missing while later files are there): one a roll that died
		// before moving active made, or one holding records whose move of
		// active a power cut lost. It is kept, if its header says it is
		// this log's file idx+1.
		if _, err := os.Stat(fileName(l.path, idx+1)); errors.Is(err, fs.ErrNotExist) {
			if l.beforeCreate != nil {
				l.beforeCreate()
			}
			if err := createFile(l.path, params{capacity: l.capacity, index: idx + 1, id: l.id}, l.o.Perm, l.fdatasync); err != nil {
				return fmt.Errorf("shmlog: roll to file %d: %w", idx+1, err)
			}
		}
		// Mapped before active moves: a file refused leaves active at
		// this file, not naming a file no one can map.
		m, err := mapFile(l.path, idx+1, l.capacity, l.id, true)
		if err != nil {
			return fmt.Errorf("shmlog: roll to file %d: %w", idx+1, err)
		}
		active.CompareAndSwap(idx, idx+1)
		f = m
	}
	if a := active.Load(); f == nil || f.idx != a {
		if f != nil {
			f.unmap()
		}
		var err error
		if f, err = mapFile(l.path, a, l.capacity, l.id, true); err != nil {
			return err
		}
	}
	f.hdr0 = l.hdr
	l.mu.files = slices.DeleteFunc(l.mu.files, func(f *mfile) bool { return f.unmapped.Load() })
	l.mu.files = append(l.mu.files, f)
	l.cur.Swap(f).retire()
	return nil
}

// Sync makes every record committed before it durable: it fdatasyncs each
// file this Log appended to since the last Sync, then the directory when
// files may have been created since, then file 0 when appends have moved
// to a later file since (its header holds active). ctx is checked between
// files. It fails
// if a file's name no longer names the file this Log mapped (removed or
// replaced under it).
func (l *Log) Sync(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	cur := l.cur.Load()
	if cur == nil {
		return ErrClosed
	}
	// A file still mapped may take commits after this Sync syncs it: a
	// Reservation in a file appends rolled past holds it mapped until its
	// Commit. The next Sync starts from the lowest such file, so it covers
	// them; a file unmapped now took its last commit before.
	l.mu.Lock()
	from, low, rolled := l.mu.synced, cur.idx, l.mu.activeSynced < cur.idx
	for _, f := range l.mu.files {
		if !f.unmapped.Load() {
			low = min(low, f.idx)
		}
	}
	l.mu.Unlock()
	for i := from; i <= cur.idx; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.syncFile(i); err != nil {
			return err
		}
	}
	if !l.dirSynced.Load() || from < cur.idx {
		if err := sys.SyncDir(filepath.Dir(l.path)); err != nil {
			return fmt.Errorf("shmlog: sync: %w", err)
		}
		l.dirSynced.Store(true)
	}
	if rolled {
		// File 0's header page holds active, which rolls moved: make it
		// durable last, once the files it names and their directory
		// entries are. A power cut must not leave it naming a file before
		// the records synced here (Open appends to and recovers the file
		// it names).
		if err := l.syncFile(0); err != nil {
			return err
		}
	}
	l.mu.Lock()
	if l.mu.synced < low {
		l.mu.synced = low
	}
	l.mu.activeSynced = max(l.mu.activeSynced, cur.idx)
	l.mu.Unlock()
	return nil
}

// syncFile fdatasyncs file idx, opened by its name.
func (l *Log) syncFile(idx uint64) error {
	f, err := os.OpenFile(fileName(l.path, idx), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("shmlog: sync: %w", err)
	}
	if err := l.checkSame(f, idx); err != nil {
		f.Close()
		return fmt.Errorf("shmlog: sync: %w", err)
	}
	err = l.fdatasync(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("shmlog: sync: %w", err)
	}
	return nil
}

// checkSame checks that f, file idx opened by its name, is the file this
// Log mapped as file idx, if it did: one renamed over it (or a new log made
// where this one was removed) does not hold this Log's records.
func (l *Log) checkSame(f *os.File, idx uint64) error {
	var id os.FileInfo
	l.mu.Lock()
	for _, m := range l.mu.files {
		if m.idx == idx && !m.unmapped.Load() {
			id = m.id
		}
	}
	l.mu.Unlock()
	if idx == 0 && id == nil {
		fi, err := l.f0.Stat()
		if err != nil {
			return err
		}
		id = fi
	}
	if id == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(fi, id) {
		return fmt.Errorf("%s is not the file this Log opened: it was replaced, or removed and made again", f.Name())
	}
	return nil
}

// Path returns the name of file 0 (the name a symlink given to Open leads
// to).
func (l *Log) Path() string { return l.path }

// LogStats is a snapshot of a Log's counters. Claims is this Log's own;
// the others describe the shared log, whichever process moved them.
type LogStats struct {
	// Claims counts the claims this Log entered (Append and Reserve),
	// including those that found the active file full and moved on to the
	// next one.
	Claims uint64
	// ActiveFile is the index of the file appends go to; ActiveBytes the
	// bytes claimed in it (at most Capacity, which bounds each file), also
	// when another process moved appends to a file this Log has not
	// appended to yet.
	ActiveFile, ActiveBytes, Capacity uint64
	// Padded counts the frames readers padded over because their writer
	// died before committing them.
	Padded uint64
}

// Stats returns a snapshot of the counters: a few atomic loads, and, when
// another process moved appends to a file this Log has not mapped, a
// mapping of that file's header page to load its tail. Like the other
// methods it must not run concurrently with Close; after Close it returns
// the zero LogStats.
func (l *Log) Stats() LogStats {
	if l.closed.Load() || l.entered == nil {
		return LogStats{}
	}
	s := LogStats{
		Claims:     l.entered.Load(),
		ActiveFile: l.hdr.active().Load(),
		Capacity:   l.capacity,
		Padded:     l.hdr.padded().Load(),
	}
	if f := l.cur.Load(); f != nil && f.idx == s.ActiveFile {
		s.ActiveBytes = min(f.tail.Load(), l.capacity)
	} else {
		s.ActiveBytes = min(l.tailOf(s.ActiveFile), l.capacity)
	}
	return s
}

// tailOf loads the tail of file idx, which this Log has not mapped, from
// its header page; 0 if the file cannot be read.
func (l *Log) tailOf(idx uint64) uint64 {
	f, err := os.Open(fileName(l.path, idx))
	if err != nil {
		return 0
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < _hdrSize {
		return 0 // not whole: loading from the mapping would fault
	}
	m, err := sys.Mmap(f, 0, _hdrSize, false)
	if err != nil {
		return 0
	}
	defer sys.Munmap(m)
	return sys.Uint64At(m, _offTail).Load()
}

// Close frees this process's slot and unmaps the log. The last process to
// close (no other Log or Reader open) trims the active file after its
// tail, under the lock of path.lock: if it cannot take it, it trims
// nothing and returns why. Close must not run concurrently with other
// calls on l.
func (l *Log) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if l.entered != nil {
		state := l.hdr.slot(l.slot, _slotState)
		st := state.Load()
		state.CompareAndSwap(st, (st>>32+1)<<32)
	}
	// Lock even if lockf is nil: a roll whose lockLog failed after it
	// closed the lock file it held leaves it so. Without the lock, trim
	// nothing.
	var err error
	cur := l.cur.Swap(nil)
	if cur != nil {
		if err = l.lockLog(); err != nil {
			err = fmt.Errorf("shmlog: close: %w (the active file is not trimmed)", err)
		}
	}
	l.release()
	if err == nil && cur != nil {
		err = l.trimIfLast()
	}
	if l.f0 != nil {
		if cerr := l.f0.Close(); err == nil {
			err = cerr
		}
	}
	if l.lockf != nil {
		sys.Unlock(l.lockf)
		if cerr := l.lockf.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// release unmaps everything (Open's failure path and Close).
func (l *Log) release() {
	l.mu.Lock()
	files := l.mu.files
	l.mu.files = nil
	l.mu.Unlock()
	for _, f := range files {
		f.unmap()
	}
	if l.hdr.b != nil {
		sys.Munmap(l.hdr.b)
		l.hdr.b = nil
	}
	if l.closed.CompareAndSwap(false, true) { // Open failed
		if l.f0 != nil {
			l.f0.Close()
		}
		if l.lockf != nil {
			l.lockf.Close()
		}
	}
}

// checkPath checks that the log's path still names the file 0 this Log
// opened: the later files are found by name, and if the log was removed
// (or replaced) they may be another log's.
func (l *Log) checkPath() error { return checkPath(l.path, l.f0, "Log") }

// checkPath checks that path still names f0, the file 0 that a Log or
// Reader (who) opened.
func checkPath(path string, f0 *os.File, who string) error {
	id, err := f0.Stat()
	if err != nil {
		return err
	}
	if fi, err := os.Stat(path); err != nil {
		return fmt.Errorf("the file this %s opened is gone: %w", who, err)
	} else if !os.SameFile(fi, id) {
		return fmt.Errorf("%s is not the file this %s opened: it was replaced, or removed and made again", path, who)
	}
	return nil
}

// trimIfLast cuts the active file after its tail if no other process has
// the log open. REQUIRES: the exclusive lock of path.lock; nothing mapped.
func (l *Log) trimIfLast() error {
	if sys.TryLock(l.f0) != nil {
		return nil // another Log or Reader holds its shared lock
	}
	// The files are found by name: cut nothing if the name no longer
	// names this Log's file 0 (a new log may be there, in use).
	if err := l.checkPath(); err != nil {
		return fmt.Errorf("shmlog: close: %w", err)
	}
	var b [8]byte
	if _, err := l.f0.ReadAt(b[:], _offActive); err != nil {
		return fmt.Errorf("shmlog: trim: %w", err)
	}
	name := fileName(l.path, binary.LittleEndian.Uint64(b[:]))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("shmlog: trim: %w", err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b[:], _offTail); err != nil {
		return fmt.Errorf("shmlog: trim: %w", err)
	}
	tail := binary.LittleEndian.Uint64(b[:])
	if tail >= l.capacity {
		return nil
	}
	// Keep whole pages, but nothing past the file's full size: the data
	// size need not be a multiple of the page.
	keep := int64(_hdrSize + min((tail+4095)&^4095, l.capacity))
	if err := f.Truncate(keep); err != nil {
		return fmt.Errorf("shmlog: trim %s: %w", name, err)
	}
	return nil
}
