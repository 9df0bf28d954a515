package writer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/appendlog/appendlog/internal/sys"
)

// DefaultChunkSize is the default MmapOptions.ChunkSize.
const DefaultChunkSize = 4 << 20

// MmapOptions configures an Mmap. A nil *MmapOptions and zero fields mean the
// defaults.
type MmapOptions struct {
	// ChunkSize is both the step by which the file grows and the size of
	// the mapped window, a multiple of the page size (rounded up to 64 KiB).
	// Default DefaultChunkSize (4 MiB).
	ChunkSize int
	// Perm is the permission of a file OpenMmap creates. Default
	// DefaultPerm.
	Perm os.FileMode

	// syncDir makes the directory entry of the file durable. Default
	// sys.SyncDir; tests watch or fail it.
	syncDir func(dir string) error
	// fdatasync makes the file's data durable. Default sys.Fdatasync;
	// tests fail it.
	fdatasync func(*os.File) error
}

// _mmapAlign is the alignment of mapping offsets: a multiple of every page
// size in common use (4 KiB, 16 KiB, 64 KiB).
const _mmapAlign = 64 << 10

// Mmap writes records by copying them into a shared mapping of the file:
// the file grows by ChunkSize at a time (sys.Fallocate), the chunk being
// written is mapped (sys.Mmap, MAP_SHARED), and a record that crosses the end
// of the window continues in the next one after the old window is unmapped.
// Copying into the mapping puts the bytes in the page cache, so a returned
// Write is already handed to the OS; the kernel writes the pages back.
// Close unmaps, truncates the file to its true length and syncs it; after a
// crash the file may end with up to ChunkSize zero bytes.
//
// Producers take a mutex. The file must not be truncated by anyone else
// while it is mapped (touching a mapped page past the end of the file
// raises SIGBUS).
type Mmap struct {
	f         *os.File
	lock      io.Closer // the lock on the file, released by Close
	chunk     int64
	fdatasync func(*os.File) error

	mu struct {
		sync.Mutex
		win            []byte // the mapped window; nil after Close
		winOff         int64  // file offset of win[0]
		off            int64  // file offset of the next byte
		err            error  // sticky: a failed grow or map
		closed         bool
		records, bytes uint64
		grows          uint64
		latency        Histogram // time to grow and remap
	}
	syncs flushCounters // only syncs is used
	// syncMu runs Syncs one at a time, so that none starts after one
	// failed (a second fdatasync would report success for what the
	// first lost).
	syncMu    sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

// OpenMmap opens (creating if needed) the file at path for appending
// through a mapping, and syncs its directory. Mmap owns the file: Close
// closes it. Like OpenFile, it first takes an exclusive lock on the file,
// held until Close, and fails with an error wrapping ErrInUse if another
// writer holds it.
func OpenMmap(path string, opts *MmapOptions) (*Mmap, error) {
	var o MmapOptions
	if opts != nil {
		o = *opts
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.ChunkSize < 0 {
		return nil, fmt.Errorf("writer: negative chunk size %d", o.ChunkSize)
	}
	if o.Perm == 0 {
		o.Perm = DefaultPerm
	}
	if o.syncDir == nil {
		o.syncDir = sys.SyncDir
	}
	if o.fdatasync == nil {
		o.fdatasync = sys.Fdatasync
	}
	chunk := (int64(o.ChunkSize) + _mmapAlign - 1) &^ (_mmapAlign - 1)
	lock, err := lockFile(path, o.Perm)
	if err != nil {
		return nil, err
	}
	m, err := openMmap(path, o, chunk)
	if err != nil {
		lock.Close()
		return nil, err
	}
	m.lock = lock
	return m, nil
}

// openMmap opens and maps the file for OpenMmap, which holds its lock.
func openMmap(path string, o MmapOptions, chunk int64) (*Mmap, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, o.Perm)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	if err := o.syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: %w", err)
	}
	m := &Mmap{f: f, chunk: chunk, fdatasync: o.fdatasync}
	m.mu.off = fi.Size()
	if err := m.mapLocked(); err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// mapLocked maps the chunk holding m.mu.off, growing the file to cover it,
// and unmaps the previous window. REQUIRES: m.mu held.
func (m *Mmap) mapLocked() error {
	start := time.Now()
	if m.mu.win != nil {
		if err := sys.Munmap(m.mu.win); err != nil {
			return fmt.Errorf("writer: %w", err)
		}
		m.mu.win = nil
	}
	off := m.mu.off - m.mu.off%m.chunk
	if err := sys.Fallocate(m.f, off, m.chunk); err != nil {
		return fmt.Errorf("writer: grow: %w", err) // err names the file
	}
	win, err := sys.Mmap(m.f, off, int(m.chunk), true)
	if err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	m.mu.win, m.mu.winOff = win, off
	m.mu.grows++
	m.mu.latency.Record(time.Since(start))
	return nil
}

func (m *Mmap) stateLocked() error {
	if m.mu.err != nil {
		return m.mu.err
	}
	if m.mu.closed {
		return ErrClosed
	}
	return nil
}

// Write copies p into the mapping as one record.
func (m *Mmap) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.stateLocked(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	start, rest := m.mu.off, p
	for {
		k := copy(m.mu.win[m.mu.off-m.mu.winOff:], rest)
		m.mu.off += int64(k)
		rest = rest[k:]
		if len(rest) == 0 {
			break
		}
		if err := m.mapLocked(); err != nil {
			// Forget the part already copied (Close truncates it away)
			// and make the failure sticky.
			m.mu.off = start
			m.mu.err = err
			return 0, err
		}
	}
	if m.mu.off == m.mu.winOff+m.chunk {
		// Map the next chunk now, so the next Write finds room.
		if err := m.mapLocked(); err != nil {
			m.mu.err = err
		}
	}
	m.mu.records++
	m.mu.bytes += uint64(len(p))
	return len(p), nil
}

// Flush does nothing: a returned Write is already in the page cache. It
// returns ErrClosed after Close.
func (m *Mmap) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Mmap.Flush")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stateLocked()
}

// Sync makes every written record durable with fdatasync, which on Linux
// writes back the pages dirtied through the mapping too. Writers are not
// held up by the sync. An error is sticky.
func (m *Mmap) Sync() error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	if err := m.stateLocked(); err != nil {
		m.mu.Unlock()
		return err
	}
	m.mu.Unlock()
	if err := m.fdatasync(m.f); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return ErrClosed // Close won the race
		}
		err = fmt.Errorf("writer: %w", err)
		m.mu.Lock()
		if m.mu.err == nil {
			m.mu.err = err
		}
		m.mu.Unlock()
		return err
	}
	m.syncs.syncs.Add(1)
	return nil
}

// Close unmaps the window, truncates the file to the bytes written, syncs
// and closes it. It is idempotent.
func (m *Mmap) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.mu.closed = true
		var err error
		if m.mu.win != nil {
			err = sys.Munmap(m.mu.win)
			m.mu.win = nil
		}
		if terr := m.f.Truncate(m.mu.off); err == nil {
			err = terr
		}
		if serr := m.fdatasync(m.f); err == nil {
			err = serr
			if serr == nil {
				m.syncs.syncs.Add(1)
			}
		}
		if cerr := m.f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = m.mu.err
		}
		if err != nil {
			err = fmt.Errorf("writer: close: %w", err)
		}
		if lerr := m.lock.Close(); err == nil {
			err = lerr
		}
		m.closeErr = err
	})
	return m.closeErr
}

// Stats returns the counters. Flushes counts window remaps (each grows the
// file by a chunk) and FlushLatency their durations.
func (m *Mmap) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{
		Records: m.mu.records, Bytes: m.mu.bytes,
		WrittenRecords: m.mu.records, WrittenBytes: m.mu.bytes,
		Flushes:      m.mu.grows,
		FlushLatency: m.mu.latency,
		Syncs:        m.syncs.syncs.Load(),
	}
}
