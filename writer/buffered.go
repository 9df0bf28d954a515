package writer

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/appendlog/appendlog/internal/sys"
)

// Limits and default of the Buffered buffer size.
const (
	MinBufferedSize     = 4 << 10
	MaxBufferedSize     = 64 << 10
	DefaultBufferedSize = 64 << 10
)

// Buffered is a bufio.Writer under a mutex, with a page-aligned buffer:
// Write appends the record to the buffer, and a record that does not fit
// first writes the buffer out with one Write call on the sink, in the
// calling goroutine. It never flushes on its own: records wait in the
// buffer until it fills or Flush, Sync or Close is called. A record larger
// than the buffer is written directly, after the buffer.
//
// A write error is sticky, as in bufio: the buffered bytes are lost and
// every later call returns the error. Buffered does not close w.
type Buffered struct {
	w    io.Writer
	sync func() error
	c    flushCounters

	mu struct {
		sync.Mutex
		b              batch
		err            error // sticky write or sync error
		closed         bool
		records, bytes uint64 // accepted
	}
	closeOnce sync.Once
	closeErr  error
}

// NewBuffered returns a Buffered writing to w through a buffer of size
// bytes, rounded up to a multiple of 4 KiB and clamped to [MinBufferedSize,
// MaxBufferedSize]; 0 means DefaultBufferedSize.
func NewBuffered(w io.Writer, size int) *Buffered {
	if size == 0 {
		size = DefaultBufferedSize
	}
	size = min(max(size, MinBufferedSize), MaxBufferedSize)
	size = (size + sys.BlockSize - 1) &^ (sys.BlockSize - 1)
	b := &Buffered{w: w, sync: syncFunc(w)}
	b.mu.b.buf = sys.AlignedBuffer(size)[:0]
	return b
}

// Write appends p to the buffer as one record. An empty p is not a
// record: Write returns 0 and counts nothing.
func (b *Buffered) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.stateLocked(); err != nil || len(p) == 0 {
		return 0, err
	}
	if !b.mu.b.fits(len(p)) {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if !b.mu.b.fits(len(p)) {
			if err := b.c.write(b.w, p, 1); err != nil {
				b.mu.err = fmt.Errorf("writer: write: %w", err)
				return 0, b.mu.err
			}
			b.mu.records++
			b.mu.bytes += uint64(len(p))
			return len(p), nil
		}
	}
	b.mu.b.add(p)
	b.mu.records++
	b.mu.bytes += uint64(len(p))
	return len(p), nil
}

func (b *Buffered) stateLocked() error {
	if b.mu.err != nil {
		return b.mu.err
	}
	if b.mu.closed {
		return ErrClosed
	}
	return nil
}

// flushLocked writes the buffer out. REQUIRES: b.mu held.
func (b *Buffered) flushLocked() error {
	if len(b.mu.b.buf) == 0 {
		return nil
	}
	err := b.c.write(b.w, b.mu.b.buf, b.mu.b.recs)
	b.mu.b.reset()
	if err != nil {
		b.mu.err = fmt.Errorf("writer: write: %w", err)
		return b.mu.err
	}
	return nil
}

// Flush writes the buffered records to the sink. ctx is not consulted: the
// write happens in the calling goroutine.
func (b *Buffered) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Buffered.Flush")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.stateLocked(); err != nil {
		return err
	}
	return b.flushLocked()
}

// Sync flushes and then syncs the sink (fdatasync for an *os.File), holding
// the lock: writers wait for the sync.
func (b *Buffered) Sync() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.stateLocked(); err != nil {
		return err
	}
	return b.syncLocked()
}

func (b *Buffered) syncLocked() error {
	if err := b.flushLocked(); err != nil {
		return err
	}
	if err := b.sync(); err != nil {
		b.mu.err = fmt.Errorf("writer: sync: %w", err)
		return b.mu.err
	}
	b.c.syncs.Add(1)
	return nil
}

// Close flushes and syncs, and makes later calls return ErrClosed. It is
// idempotent.
func (b *Buffered) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.mu.err == nil {
			b.closeErr = b.syncLocked()
		} else {
			b.closeErr = b.mu.err
		}
		b.mu.closed = true
	})
	return b.closeErr
}

// Stats returns the counters.
func (b *Buffered) Stats() Stats {
	b.mu.Lock()
	s := Stats{Records: b.mu.records, Bytes: b.mu.bytes, QueuedBytes: uint64(len(b.mu.b.buf))}
	b.mu.Unlock()
	b.c.fill(&s)
	return s
}
