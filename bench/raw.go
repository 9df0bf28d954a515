package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/appendlog/appendlog/internal/sys"
)

// _fileName is the name of the file a run writes in its directory.
const _fileName = "records.dat"

func createFile(dir string, flag int) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, _fileName), os.O_WRONLY|os.O_CREATE|os.O_EXCL|flag, 0o644)
}

// nopDone is embedded by shared sinks: their producers have no state of
// their own.
type nopDone struct{}

func (nopDone) done() error { return nil }

// fileSink is the part of the raw sinks that is the same for all of them.
type fileSink struct {
	f *os.File
}

func (s *fileSink) output() output  { return output{path: s.f.Name()} }
func (s *fileSink) dropped() uint64 { return 0 }

// writeSink: one write(2) per record, O_APPEND.
type writeSink struct {
	fileSink
	nopDone
}

func openWrite(_ context.Context, dir string, _ runCase) (sink, error) {
	f, err := createFile(dir, os.O_APPEND)
	if err != nil {
		return nil, err
	}
	return &writeSink{fileSink: fileSink{f: f}}, nil
}

func (s *writeSink) producer(int) (producer, error) { return s, nil }

func (s *writeSink) write(rec []byte) error {
	_, err := s.f.Write(rec)
	return err
}

func (s *writeSink) finish(context.Context) error { return nil }
func (s *writeSink) close() error                 { return s.f.Close() }

// writevSink: each writer gathers records into a batch and writes the batch
// with one pwritev(2) at a file range it reserved with one atomic add.
type writevSink struct {
	fileSink
	tail  atomic.Int64 // next free file offset
	size  int
	batch int // records per pwritev
}

// _writevBytes bounds one writev batch.
const _writevBytes = 64 << 10

func openWritev(_ context.Context, dir string, rc runCase) (sink, error) {
	f, err := createFile(dir, 0)
	if err != nil {
		return nil, err
	}
	// At most 1024 buffers (IOV_MAX) per call.
	return &writevSink{fileSink: fileSink{f: f}, size: rc.size, batch: min(1024, max(1, _writevBytes/rc.size))}, nil
}

func (s *writevSink) producer(int) (producer, error) {
	p := &writevProducer{s: s, arena: make([]byte, s.batch*s.size), bufs: make([][]byte, s.batch)}
	for i := range p.bufs {
		p.bufs[i] = p.arena[i*s.size : (i+1)*s.size]
	}
	return p, nil
}

func (s *writevSink) finish(context.Context) error { return nil }
func (s *writevSink) close() error                 { return s.f.Close() }

// writevProducer is one writer's batch. Not safe for concurrent use.
type writevProducer struct {
	s     *writevSink
	arena []byte   // batch*size bytes: the records of the batch
	bufs  [][]byte // one buffer per record, slices of arena
	n     int      // records in the batch
}

func (p *writevProducer) write(rec []byte) error {
	copy(p.bufs[p.n], rec)
	p.n++
	if p.n == len(p.bufs) {
		return p.flush()
	}
	return nil
}

func (p *writevProducer) flush() error {
	if p.n == 0 {
		return nil
	}
	n := int64(p.n * p.s.size)
	off := p.s.tail.Add(n) - n
	_, err := sys.Pwritev(p.s.f, p.bufs[:p.n], off)
	p.n = 0
	return err
}

func (p *writevProducer) done() error { return p.flush() }

// bufioSink: one bufio.Writer shared by every writer under a mutex.
type bufioSink struct {
	fileSink
	nopDone
	mu sync.Mutex
	bw *bufio.Writer // Protected by mu.
}

func openBufio(size int) func(context.Context, string, runCase) (sink, error) {
	return func(_ context.Context, dir string, _ runCase) (sink, error) {
		f, err := createFile(dir, 0)
		if err != nil {
			return nil, err
		}
		return &bufioSink{fileSink: fileSink{f: f}, bw: bufio.NewWriterSize(f, size)}, nil
	}
}

func (s *bufioSink) producer(int) (producer, error) { return s, nil }

func (s *bufioSink) write(rec []byte) error {
	s.mu.Lock()
	_, err := s.bw.Write(rec)
	s.mu.Unlock()
	return err
}

func (s *bufioSink) finish(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bw.Flush()
}

func (s *bufioSink) close() error { return s.f.Close() }

// directSink: O_DIRECT writes of a 1 MiB aligned buffer filled under a
// mutex. Records are a byte stream: they cross buffer boundaries. When the
// buffer is full it is written at its aligned file offset; finish writes
// the partial buffer padded to a whole block and keeps the partial last
// block in the buffer, to be rewritten in place by the next write, so the
// file never has padding in the middle; close truncates the file to its
// true length.
type directSink struct {
	fileSink
	nopDone
	mu  sync.Mutex
	buf []byte // aligned, _directBuf bytes. Protected by mu.
	n   int    // bytes in buf. Protected by mu.
	off int64  // file offset of buf[0], block aligned. Protected by mu.
	err error  // sticky write error. Protected by mu.
}

// _directBuf is the direct strategy's buffer: a multiple of sys.BlockSize.
const _directBuf = 1 << 20

func openDirect(_ context.Context, dir string, _ runCase) (sink, error) {
	f, err := sys.OpenDirect(filepath.Join(dir, _fileName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &directSink{fileSink: fileSink{f: f}, buf: sys.AlignedBuffer(_directBuf)}, nil
}

func (s *directSink) producer(int) (producer, error) { return s, nil }

func (s *directSink) write(rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	for len(rec) > 0 {
		k := copy(s.buf[s.n:], rec)
		s.n += k
		rec = rec[k:]
		if s.n == len(s.buf) {
			if _, err := s.f.WriteAt(s.buf, s.off); err != nil {
				s.err = fmt.Errorf("direct write at %d: %w", s.off, err)
				return s.err
			}
			s.off += int64(len(s.buf))
			s.n = 0
		}
	}
	return nil
}

// flushLocked writes the partial buffer padded to whole blocks and moves
// the partial last block to the start of the buffer.
//
// REQUIRES: s.mu held.
func (s *directSink) flushLocked() error {
	if s.err != nil || s.n == 0 {
		return s.err
	}
	padded := (s.n + sys.BlockSize - 1) &^ (sys.BlockSize - 1)
	clear(s.buf[s.n:padded])
	if _, err := s.f.WriteAt(s.buf[:padded], s.off); err != nil {
		s.err = fmt.Errorf("direct write at %d: %w", s.off, err)
		return s.err
	}
	full := s.n &^ (sys.BlockSize - 1)
	copy(s.buf, s.buf[full:s.n])
	s.off += int64(full)
	s.n -= full
	return nil
}

func (s *directSink) finish(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

func (s *directSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.flushLocked()
	if err == nil {
		err = s.f.Truncate(s.off + int64(s.n))
	}
	return errors.Join(err, s.f.Close())
}
