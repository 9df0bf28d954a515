package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/appendlog/appendlog/internal/sys"
)

// Shape of the io_uring strategy.
const (
	_uringBuf   = 64 << 10 // bytes per write
	_uringDepth = 8        // writes in flight
)

// uringSink fills 64 KiB buffers under a mutex, like bufio, but hands each
// full buffer to the kernel as an asynchronous IORING_OP_WRITE at its file
// offset and goes on filling the next one; with every buffer in flight, the
// writer that needs one waits for a completion.
type uringSink struct {
	fileSink
	nopDone
	mu      sync.Mutex
	ring    *sys.Uring // Protected by mu.
	bufs    [][]byte   // _uringDepth buffers. Protected by mu.
	pending []int64    // file offset of each buffer in flight, -1 if free. Protected by mu.
	plen    []int      // length of each buffer in flight. Protected by mu.
	cur     int        // buffer being filled. Protected by mu.
	n       int        // bytes in bufs[cur]. Protected by mu.
	off     int64      // file offset of bufs[cur]. Protected by mu.
	err     error      // sticky error. Protected by mu.
}

func openUring(_ context.Context, dir string, _ runCase) (sink, error) {
	r, err := sys.NewUring(_uringDepth)
	if err != nil {
		return nil, err
	}
	f, err := createFile(dir, 0)
	if err != nil {
		return nil, errors.Join(err, r.Close())
	}
	s := &uringSink{fileSink: fileSink{f: f}, ring: r, bufs: make([][]byte, _uringDepth), pending: make([]int64, _uringDepth), plen: make([]int, _uringDepth)}
	for i := range s.bufs {
		s.bufs[i] = make([]byte, _uringBuf)
		s.pending[i] = -1
	}
	return s, nil
}

func (s *uringSink) producer(int) (producer, error) { return s, nil }

func (s *uringSink) write(rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	for len(rec) > 0 {
		k := copy(s.bufs[s.cur][s.n:], rec)
		s.n += k
		rec = rec[k:]
		if s.n == _uringBuf {
			if err := s.submitLocked(); err != nil {
				return err
			}
		}
	}
	return nil
}

// submitLocked submits the current buffer and makes a free buffer current,
// waiting for a completion if none is free.
//
// REQUIRES: s.mu held.
func (s *uringSink) submitLocked() error {
	if s.n == 0 {
		return nil
	}
	if err := s.ring.Write(s.f, s.bufs[s.cur][:s.n], s.off, uint64(s.cur)); err != nil {
		s.err = fmt.Errorf("io_uring write at %d: %w", s.off, err)
		return s.err
	}
	s.pending[s.cur], s.plen[s.cur] = s.off, s.n
	s.off += int64(s.n)
	s.n = 0
	for {
		for i, p := range s.pending {
			if p < 0 {
				s.cur = i
				return nil
			}
		}
		if err := s.reapLocked(); err != nil {
			return err
		}
	}
}

// reapLocked waits for one completion and frees its buffer. A short write
// is completed synchronously.
//
// REQUIRES: s.mu held and a write in flight.
func (s *uringSink) reapLocked() error {
	c, err := s.ring.Wait()
	if err != nil {
		s.err = err
		return err
	}
	i := int(c.Tag)
	if i < 0 || i >= len(s.bufs) || s.pending[i] < 0 {
		s.err = fmt.Errorf("io_uring completion for unknown buffer %d", c.Tag)
		return s.err
	}
	off := s.pending[i]
	s.pending[i] = -1
	if c.Err != nil {
		s.err = fmt.Errorf("io_uring write at %d: %w", off, c.Err)
		return s.err
	}
	if want := s.plen[i]; c.N < want {
		if _, err := s.f.WriteAt(s.bufs[i][c.N:want], off+int64(c.N)); err != nil {
			s.err = fmt.Errorf("complete short io_uring write at %d: %w", off+int64(c.N), err)
			return s.err
		}
	}
	return nil
}

func (s *uringSink) finish(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := s.submitLocked(); err != nil {
		return err
	}
	for s.ring.InFlight() > 0 {
		if err := s.reapLocked(); err != nil {
			return err
		}
	}
	return nil
}

func (s *uringSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Writes still in flight (after an error) must complete before their
	// buffers and file go away.
	for s.ring.InFlight() > 0 {
		if _, err := s.ring.Wait(); err != nil {
			break
		}
	}
	return errors.Join(s.ring.Close(), s.f.Close())
}
