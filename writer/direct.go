package writer

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Direct is the simplest strategy: each Write is one Write call on the
// underlying writer, so one write(2) per record for an *os.File. Open the
// file with os.O_APPEND: the kernel then appends each record whole, in the
// order the calls reach it, even from several goroutines or processes.
// It buffers nothing, so a returned Write is already in the OS.
//
// Direct does not close w. It is safe for concurrent use if w is (an
// *os.File and a net.Conn are).
type Direct struct {
	w    io.Writer
	sync func() error

	// mu is held shared by Write and exclusively by Close, so that Close
	// waits for writes in flight and no Write succeeds after it.
	mu     sync.RWMutex
	closed bool // Protected by mu.
	// syncMu runs syncs one at a time, so that none starts after one
	// failed; err is the failed sync's error, sticky: the page cache may
	// have dropped what it was to write, and a second sync would report
	// success.
	syncMu sync.Mutex
	err    atomic.Pointer[error]

	records, bytes atomic.Uint64
	syncs          atomic.Uint64
	closeOnce      sync.Once
	closeErr       error
}

// NewDirect returns a Direct writing to w.
func NewDirect(w io.Writer) *Direct {
	return &Direct{w: w, sync: syncFunc(w)}
}

// Write writes p with one call to the underlying Write. Errors are returned
// as they are, not made sticky: each record succeeds or fails alone. A
// short write without an error (which io.Writer forbids) is
// io.ErrShortWrite. After a failed Sync, Write returns its error.
func (d *Direct) Write(p []byte) (int, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if err := d.stateLocked(); err != nil {
		return 0, err
	}
	n, err := d.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err == nil {
		d.records.Add(1)
		d.bytes.Add(uint64(n))
	}
	return n, err
}

// Flush does nothing: Direct does not buffer. It returns ErrClosed after
// Close.
func (d *Direct) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Direct.Flush")
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.stateLocked()
}

// stateLocked returns the sticky sync error, ErrClosed after Close, or
// nil. REQUIRES: d.mu held.
func (d *Direct) stateLocked() error {
	if p := d.err.Load(); p != nil {
		return *p
	}
	if d.closed {
		return ErrClosed
	}
	return nil
}

// Sync makes the written records durable (fdatasync for an *os.File). A
// sync error is sticky: every later call returns it.
func (d *Direct) Sync() error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if err := d.stateLocked(); err != nil {
		return err
	}
	return d.doSync()
}

// doSync syncs the sink, unless a sync failed. REQUIRES: d.mu held.
func (d *Direct) doSync() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	if p := d.err.Load(); p != nil {
		return *p
	}
	if err := d.sync(); err != nil {
		err = fmt.Errorf("writer: sync: %w", err)
		d.err.Store(&err)
		return err
	}
	d.syncs.Add(1)
	return nil
}

// Close waits for writes in flight, syncs, and makes later calls return
// ErrClosed. It is idempotent.
func (d *Direct) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.closed = true
		d.closeErr = d.doSync()
	})
	return d.closeErr
}

// Stats returns the counters. Every accepted record is written.
func (d *Direct) Stats() Stats {
	r, b := d.records.Load(), d.bytes.Load()
	return Stats{
		Records: r, Bytes: b,
		WrittenRecords: r, WrittenBytes: b,
		Flushes: r,
		Syncs:   d.syncs.Load(),
	}
}
