package writer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// streamSink writes the ring's bytes to an io.Writer (a network
// connection, a pipe, a terminal). Its methods run on the flusher goroutine.
//
// A failed write is not returned to the engine, which would make it sticky:
// the sink retries the bytes not yet written, in order, pausing between
// attempts (capped exponential backoff), until the write succeeds, the
// retry limit is reached, or Close gives up (giveUp is closed). Only then
// does it return the error, which fails the Ring. Errors that say the
// writer itself is closed (net.ErrClosed, os.ErrClosed) are not retried.
// Sync errors (an fsync of a file given to NewRing) are sticky.
type streamSink struct {
	w          io.Writer
	sync       func() error
	onError    func(error)
	backoff    time.Duration
	maxBackoff time.Duration
	limit      int
	giveUp     <-chan struct{}

	timer   *time.Timer // reused between pauses; nil until the first failure
	retries atomic.Uint64
}

func newStreamSink(w io.Writer, o *RingOptions, giveUp <-chan struct{}) *streamSink {
	return &streamSink{
		w:          w,
		sync:       syncFunc(w),
		onError:    o.OnError,
		backoff:    o.RetryBackoff,
		maxBackoff: o.RetryMaxBackoff,
		limit:      o.RetryLimit,
		giveUp:     giveUp,
	}
}

func (s *streamSink) Write(pos uint64, a, b []byte) error {
	if err := s.writeAll(a); err != nil {
		return err
	}
	return s.writeAll(b)
}

// writeAll writes all of p, retrying failures.
func (s *streamSink) writeAll(p []byte) error {
	pause := s.backoff
	failures := 0
	for len(p) > 0 {
		n, err := s.w.Write(p)
		if n < 0 || n > len(p) {
			n, err = 0, fmt.Errorf("writer: invalid count %d from Write", n)
		}
		p = p[n:]
		if err == nil {
			if len(p) > 0 && n == 0 {
				err = io.ErrShortWrite
			} else {
				failures = 0
				pause = s.backoff
				continue
			}
		}
		failures++
		if s.onError != nil {
			s.onError(err)
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
			return fmt.Errorf("writer: write: %w", err)
		}
		if s.limit > 0 && failures >= s.limit {
			return fmt.Errorf("writer: write failed %d times, giving up: %w", failures, err)
		}
		s.retries.Add(1)
		if !s.sleep(pause) {
			return fmt.Errorf("writer: write failed, given up at close: %w", err)
		}
		pause = min(2*pause, s.maxBackoff)
	}
	return nil
}

// sleep pauses for d; it returns false if Close gave up first.
func (s *streamSink) sleep(d time.Duration) bool {
	select {
	case <-s.giveUp:
		return false
	default:
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return true
	case <-s.giveUp:
		s.timer.Stop()
		return false
	}
}

func (s *streamSink) Sync() error {
	if err := s.sync(); err != nil {
		return fmt.Errorf("writer: sync: %w", err)
	}
	return nil
}

// abandon interrupts a write that is blocked in w (a network connection
// whose peer stopped reading) when Close gives up: if w has
// SetWriteDeadline, as a net.Conn does, it sets a deadline in the past, so
// the blocked Write returns a timeout error that is then not retried. It may
// be called from any goroutine, once giveUp is closed.
func (s *streamSink) abandon() {
	if d, ok := s.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Unix(1, 0))
	}
}

// close does nothing: the caller owns w.
func (s *streamSink) close() error { return nil }
