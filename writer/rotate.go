package writer

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// MinRotateBytes is the smallest Rotate.MaxBytes.
const MinRotateBytes = 16 << 10

// BackupTimeFormat is the time layout in the names of rotated files, as in
// lumberjack: app.log is rotated to app-2006-01-02T15-04-05.000.log.
const BackupTimeFormat = "2006-01-02T15-04-05.000"

// Rotate configures the rotation of the file of a Ring opened by OpenFile
// (RingOptions.Rotate). The file is renamed to a backup and a new, empty
// file takes its name when it has grown to about MaxBytes; backups are
// then compressed and pruned by a background goroutine. Zero fields other
// than MaxBytes mean no limit.
//
// Rotation happens only between two records: a record is never split
// across files. See the package doc for the mechanism.
type Rotate struct {
	// MaxBytes bounds the size of each file: a file is cut at the start of
	// the record that holds the first multiple of 4 KiB of the log at
	// least MaxBytes - 4 KiB into it, and that record starts the next
	// file (unless it is the file's first: the cut then comes after it).
	// A file is thus at most MaxBytes long, unless one record is longer
	// than that, and at least MaxBytes minus 4 KiB minus one record. At
	// least MinRotateBytes.
	MaxBytes int64
	// MaxBackups is the number of backups to keep; older ones are
	// deleted. Zero keeps them all.
	MaxBackups int
	// MaxAge deletes backups whose name says they were rotated longer ago.
	// Zero keeps them whatever their age. Backups are pruned when the file
	// is rotated and when OpenFile opens it, not on a timer: a Ring that
	// writes nothing keeps its backups past MaxAge until the next
	// rotation (Every rotates only files that got a record).
	MaxAge time.Duration
	// MaxTotalBytes deletes the oldest backups while the backups together
	// take more bytes (compressed size for compressed ones), down to none:
	// a newest backup larger than MaxTotalBytes on its own is deleted too.
	// Zero sets no bound.
	MaxTotalBytes int64
	// Compression compresses each backup once it is rotated, on the
	// janitor goroutine: Gzip (name-<time>.log.gz) or Zstd
	// (name-<time>.log.zst). Zero leaves backups as they are, unless
	// Compress is set.
	Compression Compression
	// Compress gzips each backup; it is Compression: Gzip, kept for
	// lumberjack's users.
	Compress bool
	// LocalTime names backups by local time; default UTC.
	LocalTime bool
	// Every rotates on a schedule as well: at each multiple of Every of
	// the wall clock (counted in UTC from the zero time, so 24 * time.Hour
	// cuts at UTC midnight and time.Hour on the hour). Records claimed
	// before the boundary end the old file and those claimed after start
	// the next; a file that got no record since the last cut is not
	// rotated. At least one second; zero rotates by size only. With Every
	// set, MaxBytes may be zero (no size limit).
	Every time.Duration
}

// Compression says how rotated files are compressed.
type Compression int

// Compressions of rotated files.
const (
	NoCompression Compression = iota
	Gzip                      // compress/gzip, default level; suffix .gz
	Zstd                      // github.com/klauspost/compress/zstd, default level; suffix .zst
)

// codec returns the compression in effect: Compression, or Gzip for
// Compress.
func (r *Rotate) codec() Compression {
	if r.Compression == NoCompression && r.Compress {
		return Gzip
	}
	return r.Compression
}

// compressedExts are the suffixes of compressed backups.
var compressedExts = [...]string{Gzip: ".gz", Zstd: ".zst"}

// isCompressed reports whether name is a compressed backup's.
func isCompressed(name string) bool {
	_, ok := trimCompressed(name)
	return ok
}

// compressedExt returns the suffix of a backup compressed by c.
func compressedExt(c Compression) string { return compressedExts[c] }

// trimCompressed returns name without a compressed backup's suffix, and
// whether it had one.
func trimCompressed(name string) (string, bool) {
	for _, ext := range compressedExts {
		if ext != "" && strings.HasSuffix(name, ext) {
			return strings.TrimSuffix(name, ext), true
		}
	}
	return name, false
}

// validate reports whether r is usable.
func (r *Rotate) validate() error {
	if r.MaxBytes < MinRotateBytes && !(r.MaxBytes == 0 && r.Every > 0) {
		return fmt.Errorf("writer: Rotate.MaxBytes %d is below %d", r.MaxBytes, MinRotateBytes)
	}
	if r.Every != 0 && r.Every < time.Second {
		return fmt.Errorf("writer: Rotate.Every %v is below one second", r.Every)
	}
	if r.MaxBackups < 0 || r.MaxAge < 0 || r.MaxTotalBytes < 0 {
		return errors.New("writer: negative limit in Rotate")
	}
	if r.Compression < NoCompression || r.Compression > Zstd {
		return fmt.Errorf("writer: unknown Rotate.Compression %d", r.Compression)
	}
	return nil
}

// _markShift is log2 of the spacing of the marks that producers leave for
// rotation (4 KiB).
const _markShift = 12

// marks tells the flusher where records start, at least once every 4 KiB
// of the log: for every position that is a multiple of 4 KiB (a mark),
// the producer whose claim holds it stores the claim's start (plus one,
// so that zero means unset) in the mark's slot before it commits. A claim
// is a record (with its drop marker, if any), so every stored value is a
// record boundary. Producers compute their marks from their own claim with
// two shifts and do no more unless the claim holds one: two stores (ends,
// below, and the start) per 4 KiB of records, no lock, no allocation.
//
// The slots form a ring indexed by mark number. Producers run at most the
// ring's Size ahead of the flusher, and the slot count covers twice that,
// so a slot the flusher reads holds either the value for the mark it asks
// about or a value from a mark at least 2×Size earlier, which the flusher
// recognises as stale (the start of the claim holding mark j lies within
// one claim below it).
//
// ends holds, in the same way, the end of the claim that holds each mark
// (plus one), stored before the start so that a flusher that reads the
// start reads the end too: a rotation whose file begins with a record
// that holds the cut's mark ends the file right after that record.
type marks struct {
	slots []atomic.Uint64
	ends  []atomic.Uint64
	mask  uint64
}

func newMarks(ringSize int) *marks {
	n := 1
	for n < 2*ringSize>>_markShift+2 {
		n <<= 1
	}
	return &marks{slots: make([]atomic.Uint64, n), ends: make([]atomic.Uint64, n), mask: uint64(n - 1)}
}

// mark records the claim [pos, pos+n) in the slot of each mark it holds.
// It runs on the producer's path, before Commit.
func (m *marks) mark(pos uint64, n int) {
	end := pos + uint64(n)
	if (pos-1)>>_markShift != (end-1)>>_markShift { // pos-1 wraps at 0: mark 0
		m.set(pos, end)
	}
}

func (m *marks) set(pos, end uint64) {
	for j := (pos + 1<<_markShift - 1) >> _markShift; j <= (end-1)>>_markShift; j++ {
		m.ends[j&m.mask].Store(end + 1)
		m.slots[j&m.mask].Store(pos + 1)
	}
}

// end returns the end of the claim that holds mark j, if that claim was
// committed, as start does its start. Flusher only.
func (m *marks) end(j uint64, maxClaim int) (end uint64, ok bool) {
	v := m.ends[j&m.mask].Load()
	if v == 0 {
		return 0, false
	}
	end, at := v-1, j<<_markShift
	if end <= at || end-at > uint64(maxClaim) {
		return 0, false // stale: left by an earlier mark of this slot
	}
	return end, true
}

// start returns the start of the claim that holds mark j, if that claim
// was committed (ok is false otherwise). maxClaim bounds a claim's length.
// Flusher only.
func (m *marks) start(j uint64, maxClaim int) (pos uint64, ok bool) {
	v := m.slots[j&m.mask].Load()
	if v == 0 {
		return 0, false
	}
	pos, at := v-1, j<<_markShift
	if pos > at || at-pos >= uint64(maxClaim) {
		return 0, false // stale: left by an earlier mark of this slot
	}
	return pos, true
}

// rotSink is the sink of an OpenFile Ring with rotation: a fileSink for
// the current file that it replaces, between two records, once the file
// holds about MaxBytes. Its Write and Sync run on the flusher goroutine;
// the rotated files are synced and closed by a closer goroutine and
// compressed and pruned by a janitor goroutine, so the flusher never
// waits for them (Sync waits for the closer, see Sync).
//
// Log positions and file offsets: the current file began at log position
// start; the cut comes at the start of the claim holding mark cutMark, the
// first mark at least MaxBytes - 4 KiB past start.
type rotSink struct {
	fsys     vfs.FS
	path     string
	perm     os.FileMode
	lockFile func(string, os.FileMode) (io.Closer, error)
	now      func() time.Time
	rot      Rotate
	marks    *marks // nil without rotation
	maxClaim int
	onError  func(error)

	// mu is held by Write and by Reopen, which switches files while the
	// flusher is not writing. The fields below are protected by mu.
	mu      sync.Mutex
	cur     *fileSink
	lock    io.Closer
	start   uint64 // log position of the current file's first byte
	pos     uint64 // log position of the next byte to write
	cutMark uint64
	last    time.Time // the time in the newest backup's name, as nameTime gives it
	gen     uint64    // files handed to the closer
	// reopenAt, if not 0, is one more than the log position (a record
	// boundary) at which Reopen asked for a new file.
	reopenAt uint64
	// reopenReq numbers Reopen's requests (a Reopen made while one is
	// pending joins it), and reopenDone is the number of the last one
	// switched for; reopenErr is that switch's error, if it failed (the
	// Ring wrote on to the file it had).
	reopenReq, reopenDone uint64
	reopenErr             error
	// closed is set by close: no file is opened after it.
	closed  bool
	reopens atomic.Uint64
	// rotateAt, if not 0, is one more than the log position (a record
	// boundary) at which the schedule (Rotate.Every) asked for a cut.
	rotateAt uint64
	// sched is the goroutine that asks for the scheduled cuts; nil
	// without Rotate.Every. clk is the Ring's clock.
	sched *schedule
	clk   clock.Clock

	rotations atomic.Uint64
	errs      atomic.Uint64

	closer  *worker[rotated]
	janitor *worker[string]
	zw      *gzip.Writer // reused by compress. Janitor only.
	// closed counts the rotations whose file the closer has synced and
	// closed; closeErr is the first error it met (sticky). Protected by
	// cmu; ccond is signalled when they change.
	cmu      sync.Mutex
	ccond    *sync.Cond
	closedN  uint64
	closeErr error
	// closeFailed is set once closeErr is: Write then fails the Ring with
	// it, as a failed fdatasync of the current file does, and every call
	// of the Ring's returns it (Ring.sinkFailed). Producers read it on
	// every Write, so it has a cache line of its own: cmu, above, is
	// taken on every Sync.
	_           [64]byte
	closeFailed atomic.Bool
	_           [63]byte
}

// rotated is a file the flusher has rotated away from.
type rotated struct {
	f    vfs.File
	lock io.Closer
	name string // the backup's path; "" after Reopen (not ours to tidy)
}

// openRotSink opens the sink of an OpenFile Ring (not Direct); m is nil
// without rotation.
func openRotSink(path string, o *RingOptions, m *marks, maxClaim int) (*rotSink, error) {
	s := &rotSink{
		fsys:     o.fsys,
		path:     path,
		perm:     o.Perm,
		lockFile: o.lockFile,
		now:      time.Now,
		marks:    m,
		maxClaim: maxClaim,
		onError:  o.OnError,
	}
	if o.Rotate != nil {
		s.rot = *o.Rotate
	}
	s.clk = clock.Real()
	if o.clock != nil {
		s.now = o.clock.Now
		s.clk = o.clock
	}
	s.ccond = sync.NewCond(&s.cmu)
	if m != nil {
		// Rotation renames the file and creates the next one at its
		// path: a link there is followed once, now, so that it is the
		// file that rotates, in its own directory, and the link goes on
		// naming the live log.
		p, err := followLinks(path)
		if err != nil {
			return nil, err
		}
		name := path
		if p != path {
			name = p + " (linked from " + path + ")"
		}
		path, s.path = p, p
		// Rotation renames the file and deletes old ones beside it: never
		// a device's.
		if st, err := s.fsys.Stat(path); err == nil && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("writer: open %s: not a regular file, so it cannot be rotated", name)
		}
	}
	// The lock first: a second writer of the file is refused before it
	// touches the directory, where the first may be compressing.
	cur, lock, err := lockedOpen(s.lockFile, path, s.perm, func() (*fileSink, error) {
		if m != nil {
			if err := s.recover(); err != nil {
				return nil, err
			}
		}
		return openFileSink(s.fsys, path, s.perm)
	})
	if err != nil {
		return nil, err
	}
	s.cur, s.lock = cur, lock
	s.closer = newWorker(s.closeRotated)
	// Log positions start at the file's size: they are the file's
	// offsets, its first byte at position 0. So the bytes a previous run
	// left count toward MaxBytes.
	s.pos = uint64(s.cur.off)
	if m == nil {
		return s, nil
	}
	s.janitor = newWorker(s.tidy)
	if c := s.markAfter(0); c != noMark && s.pos >= c<<_markShift {
		// The file is full already, or past where it would be cut:
		// start a new one at once.
		if err := s.rotate(); err != nil {
			s.close()
			return nil, err
		}
		s.pos = 0
	}
	s.cutMark = s.markAfter(0)
	s.janitor.push("") // compress backups left uncompressed, and prune
	return s, nil
}

// _maxLinks bounds the symbolic links followLinks follows, as the kernel
// bounds those it follows in one path (MAXSYMLINKS on Linux).
const _maxLinks = 40

// followLinks returns the path of the file that path names, following the
// symbolic links at its last element (a chain of them, each target read
// relative to its link's directory), with the directory resolved to the
// one the file is in; a path that is not a link is returned as it is. A
// link to a file that does not exist yet gives that file's path, where
// OpenFile then creates it, as open(2) through the link would. It asks the
// operating system's file system: a vfs.FS has no links.
func followLinks(path string) (string, error) {
	p := path
	for n := 0; ; n++ {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			break // missing (created at p) or not a link; OpenFile reports any other error
		}
		if n == _maxLinks {
			return "", fmt.Errorf("writer: open %s: more than %d symbolic links", path, _maxLinks)
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("writer: open %s: %w", path, err)
		}
		if !filepath.IsAbs(t) {
			// Not cleaned: ".." after a directory that is itself a link
			// leads where the kernel says, not where the text does.
			dir, _ := filepath.Split(p)
			t = dir + t
		}
		p = t
	}
	if p == path {
		return path, nil
	}
	dir, base := filepath.Split(p)
	if dir == "" {
		dir = "."
	}
	rdir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("writer: open %s: a symbolic link to %s: %w", path, p, err)
	}
	return filepath.Join(rdir, base), nil
}

// markAfter returns the first mark at least MaxBytes - 4 KiB past a file
// that starts at start.
func (s *rotSink) markAfter(start uint64) uint64 {
	if s.rot.MaxBytes == 0 {
		return noMark
	}
	at := start + uint64(s.rot.MaxBytes) - 1<<_markShift
	return (at + 1<<_markShift - 1) >> _markShift
}

// noMark is the cutMark of a file with no size limit.
const noMark = math.MaxUint64

// startPos is the log position of the first byte the Ring claims: the
// size of the file it appends to, so that the first file's offsets and
// log positions agree.
func (s *rotSink) startPos() uint64 { return s.pos }

func (s *rotSink) Write(pos uint64, a, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeFailed.Load() {
		// A rotated file's fdatasync (or its directory's) failed on the
		// closer: the page cache may have dropped its records, so the
		// Ring stops now rather than at its next Sync.
		return s.awaitClosed(0)
	}
	for {
		end := pos + uint64(len(a)+len(b))
		var (
			c      uint64
			ok     bool
			reopen bool
		)
		if s.marks != nil && s.cutMark != noMark {
			c, ok = s.marks.start(s.cutMark, s.maxClaim)
			if ok && c <= s.start {
				// One record spans the file from its start past the
				// mark: the file ends right after it.
				c, ok = s.marks.end(s.cutMark, s.maxClaim)
				if !ok {
					// Its end was overwritten by a later mark of
					// the slot: cut at the next mark's claim.
					s.cutMark++
					continue
				}
			}
		}
		if s.rotateAt != 0 && s.rotateAt-1 <= s.start {
			s.rotateAt = 0 // nothing was written to this file since
		}
		if s.rotateAt != 0 && (!ok || s.rotateAt-1 < c) {
			c, ok = s.rotateAt-1, true
		}
		if s.reopenAt != 0 && (!ok || s.reopenAt-1 <= c) {
			c, ok, reopen = s.reopenAt-1, true, true
		}
		if !ok || c >= end {
			if err := s.cur.Write(pos, a, b); err != nil {
				return err
			}
			s.pos = end
			return nil
		}
		// c is a record boundary in [pos, end): the bytes before it end
		// the current file. (c >= pos: an earlier Write either found
		// the mark's claim uncommitted, so that it wrote only bytes
		// below c, or found c at or past its end.)
		k := int(c - pos)
		ha, hb, ta, tb := splitAt(a, b, k)
		if len(ha) > 0 {
			if err := s.cur.Write(pos, ha, hb); err != nil {
				return err
			}
			s.pos = c
		}
		if err := s.switchAt(c, reopen); err != nil {
			return err
		}
		pos, a, b = c, ta, tb
		if len(a) == 0 {
			if len(b) == 0 {
				return nil
			}
			a, b = b, nil
		}
	}
}

// splitAt splits the concatenation of a and b at k into the head (ha, hb)
// and the tail (ta, tb), the tail's b part empty unless the split falls in
// a.
func splitAt(a, b []byte, k int) (ha, hb, ta, tb []byte) {
	if k <= len(a) {
		return a[:k], nil, a[k:], b
	}
	k -= len(a)
	return a, b[:k], b[k:], nil
}

// switchAt starts a new file at log position c, everything before it
// written: for Reopen (the file was renamed by someone else, or not) or
// for rotation. REQUIRES: s.mu held.
func (s *rotSink) switchAt(c uint64, reopen bool) error {
	if reopen {
		s.reopenAt = 0
		s.reopenDone = s.reopenReq
		switched, err := s.reopen()
		s.reopenErr = err
		if err != nil {
			// Nothing changed: the Ring writes on to the file it
			// has, and Reopen returns the error (finishReopen).
			return nil
		}
		if !switched {
			// Nothing was renamed: the file goes on, and so does its
			// count toward MaxBytes, from where it began.
			return nil
		}
	} else if err := s.rotate(); err != nil {
		return err
	}
	s.start = c
	if s.marks != nil {
		s.cutMark = s.markAfter(c)
	}
	if s.rotateAt != 0 && s.rotateAt-1 <= c {
		s.rotateAt = 0 // this switch made the scheduled cut, or a later one
	}
	return nil
}

// requestRotate asks for a scheduled cut at the log position tail returns
// (the claim tail, a record boundary), as requestReopen does for Reopen.
func (s *rotSink) requestRotate(tail func() uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rotateAt == 0 {
		s.rotateAt = tail() + 1
	}
}

// schedule is the goroutine that asks for a cut at each multiple of
// Rotate.Every; stop joins it.
type schedule struct {
	quit chan struct{}
	exit chan struct{}
}

// startSchedule starts the schedule if Rotate.Every is set; tail returns
// the Ring's claim tail. Close stops it (close).
func (s *rotSink) startSchedule(tail func() uint64) {
	if s.marks == nil || s.rot.Every <= 0 {
		return
	}
	s.sched = &schedule{quit: make(chan struct{}), exit: make(chan struct{})}
	go s.runSchedule(tail)
}

func (s *rotSink) runSchedule(tail func() uint64) {
	defer close(s.sched.exit)
	every := s.rot.Every
	for {
		now := s.clk.Now()
		next := now.Truncate(every).Add(every)
		t := s.clk.NewTimer(next.Sub(now))
		select {
		case <-t.C():
		case <-s.sched.quit:
			t.Stop()
			return
		}
		s.requestRotate(tail)
	}
}

// reopen closes the file under its old name, wherever it is now, and opens
// the file's name again: logrotate's rename-and-create. The new file is
// locked before the old one's lock is released (by the closer, after the
// old file's sync and close). If the path still names the current file
// (nothing was renamed), the file is kept: switched is false.
// REQUIRES: s.mu held.
func (s *rotSink) reopen() (switched bool, err error) {
	if l, ok := s.lock.(*fileLock); ok && l.holds(s.path) {
		return false, nil
	}
	cur, lock, err := s.openLocked()
	if err != nil {
		return false, &opError{op: "reopen", err: err}
	}
	old := rotated{f: s.cur.f, lock: s.lock}
	s.cur, s.lock = cur, lock
	s.gen++
	s.reopens.Add(1)
	s.closer.push(old)
	return true, nil
}

// openLocked locks the file at path and opens it for writing (see
// lockedOpen): the file of a rotation or a Reopen.
func (s *rotSink) openLocked() (*fileSink, io.Closer, error) {
	return lockedOpen(s.lockFile, s.path, s.perm, func() (*fileSink, error) { return openFileSink(s.fsys, s.path, s.perm) })
}

// rotate renames the current file to a backup, opens a new file under the
// file's name, and hands the old one to the closer. REQUIRES: s.mu held,
// or openRotSink before the flusher starts.
func (s *rotSink) rotate() error {
	t := s.now()
	if !s.rot.LocalTime {
		t = t.UTC()
	}
	// Names are compared as the wall clocks they show: local time goes
	// back an hour when daylight saving time ends, and a name already
	// used must not come again.
	t = nameTime(t).Truncate(time.Millisecond)
	if !t.After(s.last) {
		t = s.last.Add(time.Millisecond) // names are unique and sort by age
	}
	name := backupName(s.path, t)
	for s.taken(name) {
		// A file that someone else put there since OpenFile: never
		// replace it.
		t = t.Add(time.Millisecond)
		name = backupName(s.path, t)
	}
	var err error
	foreign := false // another file is at the path
	if l, ok := s.lock.(*fileLock); ok && l.f != nil && !l.holds(s.path) {
		// The path names no file, or another one: logrotate's create
		// mode renamed ours and made a new file there, which is not
		// ours to rename into a backup.
		err = fs.ErrNotExist
		_, serr := s.fsys.Stat(s.path)
		foreign = serr == nil
	} else {
		err = s.fsys.Rename(s.path, name)
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Another program deleted the file, or renamed it away: its
		// records are wherever it went, and the log goes on in the
		// file at the path (a new one if none is there), as after
		// Reopen.
		s.report(fmt.Errorf("writer: rotate %s: the file was deleted or renamed by another program: %w", s.path, err))
		name = "" // not a backup of ours to tidy
	} else if err != nil {
		return fmt.Errorf("writer: rotate %s: %w", s.path, err)
	} else {
		s.last = t
	}
	cur, lock, err := s.openLocked()
	if err != nil && foreign {
		// Nothing was renamed or created: as after a Reopen that cannot
		// open the file, the Ring writes on to the file it has, whole
		// records, and the next cut tries again.
		s.report(&opError{op: "rotate", err: err})
		return nil
	}
	if err != nil {
		return &opError{op: "rotate", err: err}
	}
	old := rotated{f: s.cur.f, lock: s.lock, name: name}
	s.cur, s.lock = cur, lock
	s.gen++
	s.rotations.Add(1)
	s.closer.push(old)
	return nil
}

// nameTime returns the wall clock t shows in its location, as a UTC time:
// the time a backup name shows, in a form that compares as names do.
func nameTime(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	return time.Date(y, mo, d, h, mi, sec, t.Nanosecond(), time.UTC)
}

// taken reports whether the backup name, or its compressed copy, exists.
func (s *rotSink) taken(name string) bool {
	for _, ext := range compressedExts { // "" (NoCompression): name itself
		if _, err := s.fsys.Stat(name + ext); err == nil {
			return true
		}
	}
	return false
}

// opError is an error of this package's (its message starts "writer: ")
// met during op, a step of the Ring's work: its message names the package
// once.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string {
	return "writer: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "writer: ")
}

func (e *opError) Unwrap() error { return e.err }

// backupName returns the name of the backup of path rotated at t.
func backupName(path string, t time.Time) string {
	dir, base := filepath.Split(path)
	ext := filepath.Ext(base)
	return filepath.Join(dir, strings.TrimSuffix(base, ext)+"-"+t.Format(BackupTimeFormat)+ext)
}

// backupTime parses the time out of the base name of a backup of path
// (compressed or not); ok is false for any other name.
func backupTime(path, name string, local bool) (t time.Time, ok bool) {
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "-"
	name, _ = trimCompressed(name)
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ext) || len(name) != len(prefix)+len(BackupTimeFormat)+len(ext) {
		return time.Time{}, false
	}
	loc := time.UTC
	if local {
		loc = time.Local
	}
	stamp := name[len(prefix) : len(prefix)+len(BackupTimeFormat)]
	t, err := time.ParseInLocation(BackupTimeFormat, stamp, loc)
	// Parse also takes what Format never writes (a comma before the
	// milliseconds, a time that does not exist in loc): such a name is
	// not one of our backups, and retention must not delete it.
	return t, err == nil && t.Format(BackupTimeFormat) == stamp
}

// Sync makes every byte written so far durable: it syncs the current
// file, then waits until the closer has synced and closed every file
// switched away from before it and synced their directory. The current
// file is synced under mu: Reopen switches files off the flusher, and the
// file it switches away from goes to the closer, which closes it; a sync
// of a closed file would fail the Ring. Flusher only.
func (s *rotSink) Sync() error {
	s.mu.Lock()
	err := s.cur.Sync()
	gen := s.gen
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.awaitClosed(gen)
}

// failure returns the closer's first error, or nil.
func (s *rotSink) failure() error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.closeErr
}

// awaitClosed waits until the closer has handled the first gen files
// handed to it, and returns its first error.
func (s *rotSink) awaitClosed(gen uint64) error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	for s.closedN < gen && s.closeErr == nil {
		s.ccond.Wait()
	}
	return s.closeErr
}

// requestReopen asks for a new file from the log position tail returns
// on (the claim tail, a record boundary): the flusher's Write switches
// files when it reaches it. The tail is read under mu, so that no Write
// has gone past it. An earlier request still pending stands, and the
// call joins it. It returns the number of the request (see finishReopen).
func (s *rotSink) requestReopen(tail func() uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := tail(); s.reopenAt == 0 {
		s.reopenReq++
		s.reopenAt = c + 1
	}
	return s.reopenReq
}

// finishReopen makes the switch of request req (requestReopen's number)
// if the flusher has not: once every byte before the cut was written, a
// Write that would make it may never come. It returns the number of files
// handed to the closer, and the error of the last switch Reopen asked
// for, if it failed (the Ring then wrote on to the file it had): that
// switch is req's or, when other Reopens ran meanwhile, a later one's,
// which decided the file the Ring writes now. Another Reopen's request
// made since req's was switched for is not req's to make, nor to fail
// for: its bytes need not all be written yet.
func (s *rotSink) finishReopen(req uint64) (gen uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		// Close won the race with Reopen: the Ring's last file is
		// closed and the closer stopped. Opening another would leak it
		// and its lock.
		return s.gen, ErrClosed
	}
	if s.reopenDone < req {
		if c := s.reopenAt - 1; s.reopenAt == 0 || s.pos != c {
			return s.gen, fmt.Errorf("writer: reopen at %d, written to %d", c, s.pos)
		}
		if err := s.switchAt(s.pos, true); err != nil {
			return s.gen, err
		}
	}
	return s.gen, s.reopenErr
}

// closeRotated syncs, closes and unlocks a rotated file, syncs the
// directory (the rename and the new file), and hands the backup to the
// janitor. Closer goroutine.
func (s *rotSink) closeRotated(r rotated) {
	name := r.name
	if name == "" {
		name = r.f.Name()
	}
	err := r.f.Sync()
	if err != nil {
		err = fmt.Errorf("writer: %w", namePath("fdatasync", name, err))
	}
	if cerr := r.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("writer: close %s: %w", name, cerr)
	}
	if lerr := r.lock.Close(); lerr != nil && err == nil {
		err = lerr
	}
	if err == nil {
		if derr := s.fsys.SyncDir(filepath.Dir(s.path)); derr != nil {
			err = fmt.Errorf("writer: rotate: %w", derr)
		}
	}
	s.cmu.Lock()
	s.closedN++
	if err != nil && s.closeErr == nil {
		s.closeErr = err
		s.closeFailed.Store(true)
	}
	s.ccond.Broadcast()
	s.cmu.Unlock()
	if err != nil {
		s.report(err)
		return
	}
	if r.name != "" && s.janitor != nil {
		s.janitor.push(r.name)
	}
}

// report counts and passes on an error met off the flusher.
func (s *rotSink) report(err error) {
	s.errs.Add(1)
	if s.onError != nil {
		s.onError(err)
	}
}

// tidy compresses the backup name (if Compress; "" compresses every
// backup left uncompressed) and prunes the backups. Janitor goroutine.
func (s *rotSink) tidy(name string) {
	if s.rot.codec() != NoCompression {
		if name != "" {
			if err := s.compress(name); err != nil {
				s.report(err)
			}
		} else {
			bs, err := s.backups()
			if err != nil {
				s.report(fmt.Errorf("writer: compress: %w", err))
			}
			for _, b := range bs {
				if _, done := trimCompressed(b.name); !done {
					if err := s.compress(b.name); err != nil {
						s.report(err)
					}
				}
			}
		}
	}
	if err := s.prune(); err != nil {
		s.report(err)
	}
}

// compress compresses the backup name into name.gz (or .zst): it writes
// name.gz.tmp, syncs it, renames it to name.gz, syncs the directory, and
// only then removes name. On any error name is left as it was, and the temporary
// file is removed.
func (s *rotSink) compress(name string) error {
	src, err := s.fsys.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // pruned before its turn
	}
	if err != nil {
		return fmt.Errorf("writer: compress: %w", err)
	}
	defer src.Close()
	size, err := src.Size()
	if err != nil {
		return fmt.Errorf("writer: compress: %w", err)
	}
	ext := compressedExt(s.rot.codec())
	tmp := name + ext + ".tmp"
	// Never through a link: a file of someone else's under the temporary
	// name would be truncated and overwritten, and the link renamed into
	// the compressed copy's place.
	dst, err := s.fsys.OpenRegular(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, s.perm)
	if err != nil {
		return fmt.Errorf("writer: compress %s: %w", name, err)
	}
	err = func() error {
		var zw io.WriteCloser
		switch s.rot.codec() {
		case Zstd:
			// One encoder per file, without goroutines of its own, so that
			// nothing outlives the janitor.
			enc, err := zstd.NewWriter(&offsetWriter{f: dst}, zstd.WithEncoderConcurrency(1))
			if err != nil {
				return err
			}
			zw = enc
		default:
			if s.zw == nil {
				s.zw = gzip.NewWriter(&offsetWriter{f: dst})
			} else {
				s.zw.Reset(&offsetWriter{f: dst})
			}
			zw = s.zw
		}
		if _, err := io.Copy(zw, io.NewSectionReader(src, 0, size)); err != nil {
			zw.Close()
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		return dst.Sync()
	}()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	dir := filepath.Dir(s.path)
	if err == nil {
		err = s.fsys.Rename(tmp, name+ext)
	}
	if err != nil {
		s.fsys.Remove(tmp)
		return fmt.Errorf("writer: compress %s: %w", name, err)
	}
	if err := s.fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("writer: compress %s: %w", name, err)
	}
	if err := s.fsys.Remove(name); err != nil {
		return fmt.Errorf("writer: compress %s: %w", name, err)
	}
	if err := s.fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("writer: compress %s: %w", name, err)
	}
	return nil
}

// offsetWriter writes to a vfs.File sequentially.
type offsetWriter struct {
	f   vfs.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// backup is a rotated file.
type backup struct {
	name string // path
	t    time.Time
}

// backups lists the backups of the file, newest first: regular files
// under a backup's name. Names of files being compressed (.gz.tmp,
// .zst.tmp) are not backups. The error is the listing's: a directory
// that cannot be read.
func (s *rotSink) backups() ([]backup, error) {
	dir := filepath.Dir(s.path)
	ents, err := s.fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the backups of %s: %w", s.path, err)
	}
	var bs []backup
	for _, e := range ents {
		// Rotation makes regular files only: a directory or a symbolic
		// link under a backup's name is someone else's, never to be
		// compressed (through the link) or deleted.
		if !e.Type().IsRegular() {
			continue
		}
		if t, ok := backupTime(s.path, e.Name(), s.rot.LocalTime); ok {
			bs = append(bs, backup{name: filepath.Join(dir, e.Name()), t: t})
		}
	}
	slices.SortFunc(bs, func(x, y backup) int { return -x.t.Compare(y.t) })
	return bs, nil
}

// prune deletes the backups beyond MaxBackups, older than MaxAge, or
// beyond MaxTotalBytes. A backup it cannot remove does not stop it: it
// goes on with the older ones and returns the first error. Janitor
// goroutine.
func (s *rotSink) prune() error {
	r := s.rot
	if r.MaxBackups == 0 && r.MaxAge == 0 && r.MaxTotalBytes == 0 {
		return nil
	}
	var total int64
	now := s.now()
	removed := false
	bs, err := s.backups()
	if err != nil {
		return fmt.Errorf("writer: prune: %w", err)
	}
	var first error
	for i, b := range bs {
		del := r.MaxBackups > 0 && i >= r.MaxBackups
		if r.MaxAge > 0 && now.Sub(b.t) > r.MaxAge {
			del = true
		}
		if r.MaxTotalBytes > 0 {
			if fi, err := s.fsys.Stat(b.name); err == nil {
				total += fi.Size()
			}
			if total > r.MaxTotalBytes {
				del = true
			}
		}
		if !del {
			continue
		}
		if err := s.fsys.Remove(b.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if first == nil {
				first = fmt.Errorf("writer: prune: %w", err)
			}
			continue
		}
		removed = true
	}
	if removed {
		if err := s.fsys.SyncDir(filepath.Dir(s.path)); err != nil && first == nil {
			first = fmt.Errorf("writer: prune: %w", err)
		}
	}
	return first
}

// recover finishes what a crash interrupted in the file's directory: a
// backup that has both its compressed copy (complete: it is renamed into
// place only after it was synced) and the original loses the original,
// and temporary compressed files are removed. Every record is then in
// exactly one file.
func (s *rotSink) recover() error {
	dir := filepath.Dir(s.path)
	ents, err := s.fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // OpenFile reports the missing directory
		}
		return fmt.Errorf("writer: rotate: %w", err)
	}
	// Rotation and compression make regular files only: a directory or a
	// symbolic link under a compressed copy's name is someone else's, so
	// it neither stands for a finished compression (the backup beside it
	// keeps its records) nor is removed as a leftover.
	var names []string
	have := make(map[string]bool, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
			have[e.Name()] = true
		}
	}
	changed := false
	for _, n := range names {
		full := filepath.Join(dir, n)
		// Parsed as UTC: s.last is a wall clock (see nameTime).
		switch t, ok := backupTime(s.path, n, false); {
		case strings.HasSuffix(n, ".tmp"):
			base, compressed := trimCompressed(strings.TrimSuffix(n, ".tmp"))
			if _, ok := backupTime(s.path, base, s.rot.LocalTime); !ok || !compressed {
				continue
			}
		case ok && !isCompressed(n) && (have[n+".gz"] || have[n+".zst"]):
		default:
			if ok && t.After(s.last) {
				s.last = t
			}
			continue
		}
		if err := s.fsys.Remove(full); err != nil {
			return fmt.Errorf("writer: rotate: %w", err)
		}
		changed = true
	}
	if changed {
		if err := s.fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("writer: rotate: %w", err)
		}
	}
	return nil
}

// close closes the current file, stops the closer and the janitor once
// they have done their work, and only then releases the file's lock. It
// is called after the flusher's last write and sync.
func (s *rotSink) close() error {
	if s.sched != nil {
		close(s.sched.quit)
		<-s.sched.exit
		s.sched = nil
	}
	s.mu.Lock()
	s.closed = true
	err := s.cur.close()
	lock := s.lock
	s.mu.Unlock()
	s.closer.stop()
	if s.janitor != nil {
		s.janitor.stop()
	}
	// Last: a writer that opens the file next tidies the directory, so
	// it must not get in while the janitor compresses and prunes there.
	if lerr := lock.Close(); err == nil {
		err = lerr
	}
	return err
}

// worker runs fn on each queued item on its own goroutine, in order.
// push never blocks: the queue grows instead (it holds one entry per
// rotation not yet handled). stop handles what is queued, then joins the
// goroutine.
type worker[T any] struct {
	fn   func(T)
	mu   sync.Mutex
	q    []T  // Protected by mu.
	done bool // Protected by mu.
	kick chan struct{}
	exit chan struct{}
}

func newWorker[T any](fn func(T)) *worker[T] {
	w := &worker[T]{fn: fn, kick: make(chan struct{}, 1), exit: make(chan struct{})}
	go w.run()
	return w
}

func (w *worker[T]) push(v T) {
	w.mu.Lock()
	w.q = append(w.q, v)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *worker[T]) run() {
	defer close(w.exit)
	for {
		w.mu.Lock()
		q, done := w.q, w.done
		w.q = nil
		w.mu.Unlock()
		for _, v := range q {
			w.fn(v)
		}
		if len(q) == 0 {
			if done {
				return
			}
			<-w.kick
		}
	}
}

func (w *worker[T]) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	<-w.exit
}
