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
//
// Whole records. The engine hands the sink ranges that may end inside a
// record: a range cut at a block boundary (the flusher writes what is
// committed, block by block), or split at the ring's wrap. The sink writes
// only whole records, so a record-based writer (lumberjack, a socket
// whose reader frames by line) never sees half of one. It knows where
// records start from the ring's marks: the producer of the claim that
// holds a position that is a multiple of 4 KiB stores that claim's start
// (see marks). Every place a range may end inside a record is such a
// position, so the sink looks up the record that crosses it, writes up to
// that record's start and carries the rest to the next range. When the
// next range arrives it completes the carried record (and the whole
// records up to the next start a mark names, less than 4 KiB further on
// unless the record is longer) in the carry buffer and writes that as one
// call, then goes on from the ring. A range that ends at the tail, where
// every claim ended, leaves nothing carried, so Flush, Sync and Close
// hand the writer every record they promise. The carry is at most one
// record plus 4 KiB, copied once; it grows to the longest record seen.
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

	// marks are the ring's record starts; carry holds the bytes at log
	// positions [cstart, cstart+len(carry)) that begin with a record not
	// yet written whole. Flusher only.
	marks    *marks
	maxClaim int
	carry    []byte
	cstart   uint64
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
	if s.marks == nil {
		if err := s.writeAll(a); err != nil {
			return err
		}
		return s.writeAll(b)
	}
	if err := s.whole(pos, a); err != nil {
		return err
	}
	return s.whole(pos+uint64(len(a)), b)
}

// whole writes the whole records of p, the bytes at log positions [pos,
// pos+len(p)) that follow the carry, and carries the rest.
func (s *streamSink) whole(pos uint64, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	end := pos + uint64(len(p))
	from := pos
	if len(s.carry) > 0 {
		from = s.cstart
	}
	cut := end
	if c, ok := s.crossing(end); ok {
		cut = c
	}
	if cut <= from {
		// One record runs on past end: keep all of it.
		if len(s.carry) == 0 {
			s.cstart = pos
		}
		s.carry = append(s.carry, p...)
		return nil
	}
	if len(s.carry) > 0 {
		// Complete the carried record, and the records up to the next
		// start a mark names, in the carry buffer: one call.
		b1 := s.nextStart(s.cstart, cut)
		s.carry = append(s.carry, p[:b1-pos]...)
		err := s.writeAll(s.carry)
		s.carry = s.carry[:0]
		if err != nil {
			return err
		}
		p, pos = p[b1-pos:], b1
	}
	if err := s.writeAll(p[:cut-pos]); err != nil {
		return err
	}
	if cut < end {
		s.cstart = cut
		s.carry = append(s.carry, p[cut-pos:]...)
	}
	return nil
}

// crossing returns the start of the record that holds position x and
// began before it, if there is one: x is then not a record boundary. Only
// a multiple of 4 KiB can be a range's end inside a record (see the
// engine's Sink), and only there do marks say.
func (s *streamSink) crossing(x uint64) (uint64, bool) {
	if x&(1<<_markShift-1) != 0 {
		return 0, false
	}
	c, ok := s.marks.start(x>>_markShift, s.maxClaim)
	return c, ok && c < x
}

// nextStart returns the first record start a mark names after the record
// that starts at from, or limit if there is none below it.
func (s *streamSink) nextStart(from, limit uint64) uint64 {
	for m := from>>_markShift + 1; m<<_markShift < limit; m++ {
		if c, ok := s.marks.start(m, s.maxClaim); ok && c > from {
			return min(c, limit)
		}
	}
	return limit
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
