package vfs

import (
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// _sectorSize is the granularity at which Crash tears a write: a torn write
// keeps some of its pieces between multiples of _sectorSize of the file.
const _sectorSize = 512

// MemFS is an in-memory FS that can simulate a power cut; see the package
// documentation for the crash model. It is safe for concurrent use. The
// zero value is an empty file system ready to use; NewMem returns one too.
type MemFS struct {
	mu struct {
		sync.Mutex
		// root is the root directory, created on first use.
		root *memNode
		// crashed is set by Crash; every later operation fails with
		// ErrCrashed.
		crashed bool
		// unsynced holds the entry changes (creates, removes, renames) not
		// yet made durable by SyncDir, in the order they were made; a
		// crash with an rng keeps a prefix of them, as a journal commits
		// them in order. SyncDir drops the changes to its directory.
		unsynced []entryChange
	}
}

// entryChange is one create, remove or rename: the entries it sets, all
// committed together.
type entryChange []entrySet

// entrySet sets dir's entry name to node, or removes it if node is nil.
type entrySet struct {
	dir  *memNode
	name string
	node *memNode
}

// record logs an entry change for Crash.
// REQUIRES: m.mu is held.
func (m *MemFS) record(sets ...entrySet) {
	m.mu.unsynced = append(m.mu.unsynced, sets)
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty MemFS holding only the root directory.
func NewMem() *MemFS {
	return &MemFS{}
}

// memNode is a file or a directory. All fields are protected by the owning
// MemFS's mu.
type memNode struct {
	isDir bool
	perm  fs.FileMode

	// Directory state.
	children map[string]*memNode // current entries
	durable  map[string]*memNode // entries as of the last SyncDir

	// File state.
	data    []byte     // current content
	synced  []byte     // durable content; never aliases data
	minSize int        // smallest len(data) since the last Sync
	log     []memWrite // writes since the last Sync, in order
	locked  bool       // held by Lock
}

// memWrite is one write or size change since the last Sync.
type memWrite struct {
	off  int64
	data []byte // a private copy; nil for a size change
	// size is what a size change sets (Truncate) or grows to (Preallocate,
	// with grow set); -1 for a write.
	size int64
	grow bool
}

func newDir(perm fs.FileMode) *memNode {
	return &memNode{
		isDir:    true,
		perm:     perm & fs.ModePerm,
		children: make(map[string]*memNode),
		durable:  make(map[string]*memNode),
	}
}

// root returns the root directory, creating it on first use.
// REQUIRES: m.mu is held.
func (m *MemFS) root() *memNode {
	if m.mu.root == nil {
		m.mu.root = newDir(0o755)
	}
	return m.mu.root
}

// lock takes m.mu and fails with ErrCrashed after a crash. On success the
// caller must unlock m.mu.
func (m *MemFS) lock(op, name string) error {
	m.mu.Lock()
	if m.mu.crashed {
		m.mu.Unlock()
		return &fs.PathError{Op: op, Path: name, Err: ErrCrashed}
	}
	return nil
}

// splitPath cleans name into its components below the root ("/a/b" and
// "a/b" both give ["a", "b"]; the root gives none).
func splitPath(name string) []string {
	sep := string(filepath.Separator)
	p := filepath.Clean(sep + filepath.FromSlash(name))
	p = strings.TrimPrefix(p, sep)
	if p == "" {
		return nil
	}
	return strings.Split(p, sep)
}

// walk returns the node at the components parts.
// REQUIRES: m.mu is held.
func (m *MemFS) walk(parts []string) (*memNode, error) {
	n := m.root()
	for _, p := range parts {
		if !n.isDir {
			return nil, errNotDir
		}
		c, ok := n.children[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parent returns the directory holding name and name's base; name must not
// be the root.
// REQUIRES: m.mu is held.
func (m *MemFS) parent(name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", errInvalid
	}
	dir, err := m.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", errNotDir
	}
	return dir, parts[len(parts)-1], nil
}

// OpenFile opens name. O_APPEND is not supported; directories cannot be
// opened.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := m.lock("open", name); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return m.openFileLocked(name, flag, perm)
}

// OpenRegular opens name as OpenFile does, refusing a directory with a
// *NotRegularError. MemFS has no symbolic links, named pipes, sockets or
// devices, so a directory is the only entry it refuses.
func (m *MemFS) OpenRegular(name string, flag int, perm os.FileMode) (File, error) {
	if err := m.lock("open", name); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if n, err := m.walk(splitPath(name)); err == nil && n.isDir {
		return nil, &NotRegularError{Path: name, Mode: fs.ModeDir}
	}
	return m.openFileLocked(name, flag, perm)
}

// openFileLocked is OpenFile.
// REQUIRES: m.mu is held.
func (m *MemFS) openFileLocked(name string, flag int, perm os.FileMode) (File, error) {
	n, err := m.openLocked(name, flag, perm)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	return &memFile{
		fs:       m,
		node:     n,
		name:     name,
		readable: acc != os.O_WRONLY,
		writable: acc != os.O_RDONLY,
	}, nil
}

// openLocked resolves, creates and truncates as flag says.
// REQUIRES: m.mu is held.
func (m *MemFS) openLocked(name string, flag int, perm os.FileMode) (*memNode, error) {
	if flag&os.O_APPEND != 0 {
		return nil, errInvalid
	}
	dir, base, err := m.parent(name)
	if err != nil {
		if err == errInvalid { // the root
			return nil, errIsDir
		}
		return nil, err
	}
	n, ok := dir.children[base]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, fs.ErrNotExist
	case !ok:
		n = &memNode{perm: perm & fs.ModePerm}
		dir.children[base] = n
		m.record(entrySet{dir, base, n})
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, fs.ErrExist
	case n.isDir:
		return nil, errIsDir
	}
	if flag&os.O_TRUNC != 0 {
		n.truncate(0)
	}
	return n, nil
}

// Remove removes a file or an empty directory. Until SyncDir on its parent,
// a crash brings it back with its durable content.
func (m *MemFS) Remove(name string) error {
	if err := m.lock("remove", name); err != nil {
		return err
	}
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err == nil {
		n, ok := dir.children[base]
		switch {
		case !ok:
			err = fs.ErrNotExist
		case n.isDir && len(n.children) > 0:
			err = errNotEmpty
		default:
			delete(dir.children, base)
			m.record(entrySet{dir, base, nil})
		}
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// Rename renames oldname to newname, replacing a file at newname. Like
// os.Rename, it refuses an existing directory at newname (fs.ErrExist).
// Until SyncDir on both parents, a crash may show the old name, the new
// one, both, or (when only the old parent was synced) neither.
func (m *MemFS) Rename(oldname, newname string) error {
	if err := m.lock("rename", oldname); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if err := m.renameLocked(oldname, newname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// REQUIRES: m.mu is held.
func (m *MemFS) renameLocked(oldname, newname string) error {
	odir, obase, err := m.parent(oldname)
	if err != nil {
		return err
	}
	n, ok := odir.children[obase]
	if !ok {
		return fs.ErrNotExist
	}
	ndir, nbase, err := m.parent(newname)
	if err != nil {
		return err
	}
	if odir == ndir && obase == nbase {
		return nil
	}
	if n.isDir {
		// A directory cannot move below itself.
		op, np := splitPath(oldname), splitPath(newname)
		if len(np) > len(op) && slices.Equal(np[:len(op)], op) {
			return errInvalid
		}
	}
	if dst, ok := ndir.children[nbase]; ok {
		switch {
		case dst.isDir:
			return fs.ErrExist // as os.Rename refuses it, even when empty
		case n.isDir:
			return errNotDir
		}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	m.record(entrySet{odir, obase, nil}, entrySet{ndir, nbase, n})
	return nil
}

// MkdirAll creates dir and any missing parents. New directories are
// entries like files: each becomes durable after SyncDir on its parent.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := m.lock("mkdir", dir); err != nil {
		return err
	}
	defer m.mu.Unlock()
	n := m.root()
	for _, p := range splitPath(dir) {
		c, ok := n.children[p]
		if !ok {
			c = newDir(perm)
			n.children[p] = c
			m.record(entrySet{n, p, c})
		} else if !c.isDir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errNotDir}
		}
		n = c
	}
	return nil
}

// List returns the sorted names of dir's current entries.
func (m *MemFS) List(dir string) ([]string, error) { return entryNames(m.ReadDir(dir)) }

// ReadDir returns dir's current entries sorted by name: files and
// directories, the only kinds of entry MemFS has.
func (m *MemFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := m.lock("readdir", dir); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	n, err := m.walk(splitPath(dir))
	if err == nil && !n.isDir {
		err = errNotDir
	}
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: err}
	}
	names := slices.Sorted(maps.Keys(n.children))
	entries := make([]fs.DirEntry, len(names))
	for i, name := range names {
		entries[i] = fs.FileInfoToDirEntry(n.children[name].info(name))
	}
	return entries, nil
}

// Stat describes name. ModTime is always the zero time.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	if err := m.lock("stat", name); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	n, err := m.walk(splitPath(name))
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return n.info(filepath.Base(filepath.Clean(string(filepath.Separator) + filepath.FromSlash(name)))), nil
}

// info describes n under the base name base.
// REQUIRES: the owning MemFS's mu is held.
func (n *memNode) info(base string) memInfo {
	info := memInfo{name: base, mode: n.perm}
	if n.isDir {
		info.mode |= fs.ModeDir
	} else {
		info.size = int64(len(n.data))
	}
	return info
}

// SyncDir makes dir's current entries durable.
func (m *MemFS) SyncDir(dir string) error {
	if err := m.lock("syncdir", dir); err != nil {
		return err
	}
	defer m.mu.Unlock()
	n, err := m.walk(splitPath(dir))
	if err == nil && !n.isDir {
		err = errNotDir
	}
	if err != nil {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: err}
	}
	n.durable = maps.Clone(n.children)
	kept := m.mu.unsynced[:0]
	for _, ch := range m.mu.unsynced {
		ch = slices.DeleteFunc(ch, func(s entrySet) bool { return s.dir == n })
		if len(ch) > 0 {
			kept = append(kept, ch)
		}
	}
	clear(m.mu.unsynced[len(kept):]) // drop references to removed nodes
	m.mu.unsynced = kept
	return nil
}

// Lock takes the lock file name (see FS.Lock). Writing holder into the file
// is an ordinary unsynced write.
func (m *MemFS) Lock(name string, holder string) (io.Closer, error) {
	if err := m.lock("lock", name); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if n, err := m.walk(splitPath(name)); err == nil && n.isDir {
		return nil, &NotRegularError{Path: name, Mode: fs.ModeDir}
	}
	n, err := m.openLocked(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	if n.locked {
		return nil, lockedError(name, string(n.data[:min(len(n.data), _maxHolderLen)]))
	}
	n.locked = true
	n.truncate(0)
	n.write([]byte(holder), 0)
	return &memLock{fs: m, node: n, name: name}, nil
}

// Crash simulates a power cut: it kills m (every later operation on m, its
// files and its locks fails with ErrCrashed) and returns a new MemFS holding
// only m's durable state. If rng is nil only synced content survives;
// otherwise each write since its file's last Sync is kept with probability
// 1/2, a kept write may be torn at 512-byte boundaries, and a random prefix
// of the size changes since the last Sync survives, and so does a random
// prefix of the entry changes not yet made durable by SyncDir, as described
// in the package documentation. The result is deterministic for a given
// sequence of operations and rng seed. Calling Crash again on the dead m
// returns another outcome of the same power cut.
func (m *MemFS) Crash(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.crashed = true
	c := &crasher{rng: rng, done: make(map[*memNode]*memNode)}
	if rng != nil && len(m.mu.unsynced) > 0 {
		c.entries = make(map[*memNode]map[string]*memNode)
		for _, ch := range m.mu.unsynced[:rng.IntN(len(m.mu.unsynced)+1)] {
			for _, s := range ch {
				e, ok := c.entries[s.dir]
				if !ok {
					e = maps.Clone(s.dir.durable)
					c.entries[s.dir] = e
				}
				if s.node == nil {
					delete(e, s.name)
				} else {
					e[s.name] = s.node
				}
			}
		}
	}
	n := NewMem()
	n.mu.root = c.node(m.root())
	return n
}

// crasher builds the post-crash copy of a tree of nodes.
type crasher struct {
	rng  *rand.Rand
	done map[*memNode]*memNode // old node -> its copy, so shared nodes stay shared
	// entries holds, for each directory with unsynced entry changes that
	// the crash keeps, its durable entries with those changes applied.
	entries map[*memNode]map[string]*memNode
}

func (c *crasher) node(old *memNode) *memNode {
	if n, ok := c.done[old]; ok {
		return n
	}
	if old.isDir {
		n := newDir(old.perm)
		c.done[old] = n
		entries := old.durable
		if e, ok := c.entries[old]; ok {
			entries = e
		}
		// Sorted, so that the rng is consumed in a deterministic order.
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			child := c.node(entries[name])
			n.children[name] = child
			n.durable[name] = child
		}
		return n
	}
	content := slices.Clone(old.synced)
	if c.rng != nil {
		// A journal commits size changes in order, so the first sizes of
		// them survive.
		sizes := 0
		for _, w := range old.log {
			if w.size >= 0 {
				sizes++
			}
		}
		sizes = c.rng.IntN(sizes + 1)
		for _, w := range old.log {
			if w.size >= 0 {
				if sizes > 0 && (!w.grow || int(w.size) > len(content)) {
					content = resize(content, int(w.size))
				}
				sizes--
				continue
			}
			if c.rng.IntN(2) == 0 {
				continue // lost
			}
			// A kept write may tear at the sector boundaries strictly inside
			// it: then each piece between them survives or not on its own.
			first := (w.off/_sectorSize + 1) * _sectorSize
			end := w.off + int64(len(w.data))
			if first >= end || c.rng.IntN(2) == 0 {
				content = writeAt(content, w.data, w.off)
				continue
			}
			for lo, hi := w.off, first; lo < end; lo, hi = hi, min(hi+_sectorSize, end) {
				if c.rng.IntN(2) == 0 {
					content = writeAt(content, w.data[lo-w.off:hi-w.off], lo)
				}
			}
		}
	}
	n := &memNode{perm: old.perm, data: content, synced: slices.Clone(content), minSize: len(content)}
	c.done[old] = n
	return n
}

// resize returns b with length size, zero-filling any growth (including
// bytes left in b's capacity by an earlier shrink).
func resize(b []byte, size int) []byte {
	if size <= len(b) {
		return b[:size]
	}
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		clear(b[old:])
		return b
	}
	return append(b, make([]byte, size-len(b))...)
}

// writeAt copies p into b at off, growing b as needed.
func writeAt(b, p []byte, off int64) []byte {
	if end := int(off) + len(p); end > len(b) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

// write applies a write to the current content and logs it for Crash.
// REQUIRES: the MemFS's mu is held.
func (n *memNode) write(p []byte, off int64) {
	if len(p) == 0 {
		return
	}
	n.data = writeAt(n.data, p, off)
	n.log = append(n.log, memWrite{off: off, data: slices.Clone(p), size: -1})
}

// truncate sets the current size and logs the change for Crash.
// REQUIRES: the MemFS's mu is held.
func (n *memNode) truncate(size int) {
	n.data = resize(n.data, size)
	n.minSize = min(n.minSize, size)
	n.log = append(n.log, memWrite{size: int64(size)})
}

// grow extends the current size to size if it is smaller and logs the
// change for Crash.
// REQUIRES: the MemFS's mu is held.
func (n *memNode) grow(size int) {
	if size > len(n.data) {
		n.data = resize(n.data, size)
		n.log = append(n.log, memWrite{size: int64(size), grow: true})
	}
}

// sync makes the current content durable. It copies only what may differ
// from the durable content: the logged writes and everything at or past
// the smallest size the file had since the last sync.
// REQUIRES: the MemFS's mu is held.
func (n *memNode) sync() {
	size := len(n.data)
	n.synced = resize(n.synced, size)
	lo := min(n.minSize, size)
	copy(n.synced[lo:], n.data[lo:])
	for _, w := range n.log {
		lo, hi := int(w.off), min(int(w.off)+len(w.data), size)
		if lo < hi {
			copy(n.synced[lo:hi], n.data[lo:hi])
		}
	}
	clear(n.log) // drop references to the copies
	n.log = n.log[:0]
	n.minSize = size
}

// memFile is an open MemFS file.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	readable bool
	writable bool
	closed   bool // Protected by fs.mu.
}

var _ File = (*memFile)(nil)

// access is what an operation needs from a memFile's open mode.
type access int

const (
	accessAny access = iota + 1
	accessRead
	accessWrite
)

// begin locks the file system for op and checks the file is open with the
// access op needs. On success the caller must unlock f.fs.mu.
func (f *memFile) begin(op string, need access) error {
	if err := f.fs.lock(op, f.name); err != nil {
		return err
	}
	var err error
	switch {
	case f.closed:
		err = fs.ErrClosed
	case need == accessWrite && !f.writable, need == accessRead && !f.readable:
		err = errBadFD
	default:
		return nil
	}
	f.fs.mu.Unlock()
	return &fs.PathError{Op: op, Path: f.name, Err: err}
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: errInvalid}
	}
	if err := f.begin("read", accessRead); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	data := f.node.data
	if len(p) == 0 {
		return 0, nil // as (*os.File).ReadAt
	}
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: errInvalid}
	}
	if err := f.begin("write", accessWrite); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	f.node.write(p, off)
	return len(p), nil
}

// WritevAt writes bufs as one write: Crash keeps, loses or tears it as a
// whole, like a single pwritev.
func (f *memFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "pwritev", Path: f.name, Err: errInvalid}
	}
	if err := f.begin("pwritev", accessWrite); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	p := slices.Concat(bufs...)
	f.node.write(p, off)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if err := f.begin("fdatasync", accessAny); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	f.node.sync()
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: errInvalid}
	}
	if err := f.begin("truncate", accessWrite); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	f.node.truncate(int(size))
	return nil
}

func (f *memFile) Preallocate(off, n int64) error {
	if off < 0 || n < 0 {
		return &fs.PathError{Op: "fallocate", Path: f.name, Err: errInvalid}
	}
	if err := f.begin("fallocate", accessWrite); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	f.node.grow(int(off + n))
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.begin("stat", accessAny); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	return int64(len(f.node.data)), nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Close() error {
	if err := f.fs.lock("close", f.name); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}

// memLock is a held MemFS lock.
type memLock struct {
	fs       *MemFS
	node     *memNode
	name     string
	released bool // Protected by fs.mu.
}

func (l *memLock) Close() error {
	if err := l.fs.lock("unlock", l.name); err != nil {
		return err
	}
	defer l.fs.mu.Unlock()
	if l.released {
		return &fs.PathError{Op: "unlock", Path: l.name, Err: fs.ErrClosed}
	}
	l.released = true
	l.node.locked = false
	return nil
}

// memInfo is the fs.FileInfo of a MemFS node.
type memInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }
