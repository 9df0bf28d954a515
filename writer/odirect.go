package writer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/appendlog/appendlog/internal/sys"
)

// directSink writes the ring's bytes to a file opened with O_DIRECT, in
// whole blocks (sys.BlockSize) at block-aligned offsets, straight from the
// ring where it can:
//
//	file:  ... | carried | block | block | ... | block | tail   |
//	iovec:       stage[0]  ring ----------------------  stage[1]
//
// The Ring starts log positions at the file's length, so log positions are
// file offsets, and the engine's ring is block-aligned in memory: once the
// carried partial block is completed (copied into the stage), the rest of a
// flush is aligned in memory and on disk and goes to pwritev as it lies in
// the ring. Only the carried block's head and the new partial tail block are
// copied (at most a block each per flush). The tail block, padded with
// zeros, is written with the rest and becomes the next carried block: it is
// rewritten, completed, at the same offset by the next flush. So zero
// padding only ever follows the last byte, never sits in the middle of the
// file, and close truncates it away.
//
// A range that is not aligned in memory (never the case for the Ring, but
// Write does not rely on it) is copied through the stage, a stage-full per
// pwritev.
//
// Before each write it reads the file's size, as fileSink does: a file
// shorter than what the sink wrote was truncated by another program
// (logrotate's copytruncate), and the sink refuses to write on, with an
// error wrapping ErrTruncated, rather than leave a hole of zero bytes.
//
// Its methods run on the flusher goroutine. Every error is sticky.
type directSink struct {
	f     *os.File
	stage []byte // aligned; a whole number of blocks, at least 2
	si    int    // index of the block of stage holding the partial block
	base  int64  // file offset of the partial block, a multiple of sys.BlockSize
	fill  int    // bytes of the partial block holding data (< sys.BlockSize)
	iov   [][]byte
	// good is the file's true length after the last write that succeeded:
	// a failed write has advanced base and fill past what the file holds,
	// and may have left part of its blocks in it. close truncates to it.
	good int64
	// copied counts bytes copied into the stage (tests pin that the Ring's
	// flushes copy at most two blocks each).
	copied int64
	// pwritevAt writes the blocks; nil means sys.Pwritev. Tests fail it.
	pwritevAt func(f *os.File, iov [][]byte, off int64) (int, error)
	// fdatasync syncs the file; nil means sys.Fdatasync. Tests fail it.
	fdatasync func(f *os.File) error
	// syncFailed is set by a Sync that failed: close then does not
	// fdatasync again (a failed fdatasync is never retried: the pages it
	// could not write may be clean now, and a second one would say they
	// are durable).
	syncFailed atomic.Bool
}

// _directStage is the O_DIRECT sink's staging buffer: the carried and tail
// blocks, and the bounce buffer for ranges not aligned in memory.
const _directStage = 64 << 10

// openDirectSink opens the file at path with O_DIRECT, creating it with
// perm if needed, and makes its directory entry durable with syncDir.
func openDirectSink(path string, perm os.FileMode, syncDir func(string) error) (*directSink, error) {
	f, err := sys.OpenDirect(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: %w", err)
	}
	s := &directSink{f: f, stage: sys.AlignedBuffer(_directStage), iov: make([][]byte, 0, 8)}
	if err := s.resume(); err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: open %s: %w", path, err)
	}
	return s, nil
}

// size returns the file's true length: where the next byte goes.
func (s *directSink) size() int64 { return s.base + int64(s.fill) }

// resume positions the sink at the end of the existing file, loading its
// partial last block into the stage.
func (s *directSink) resume() error {
	fi, err := s.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	s.base = size &^ (sys.BlockSize - 1)
	s.fill = int(size - s.base)
	s.good = size
	if s.fill == 0 {
		return nil
	}
	n, err := s.f.ReadAt(s.stage[:sys.BlockSize], s.base)
	if n < s.fill {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("read last block: %w", err)
	}
	return nil
}

// block returns block i of the stage.
func (s *directSink) block(i int) []byte {
	return s.stage[i*sys.BlockSize : (i+1)*sys.BlockSize]
}

func (s *directSink) Write(pos uint64, a, b []byte) error {
	const bs = sys.BlockSize
	fi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	if fi.Size() < s.size() {
		return &truncatedError{path: s.f.Name(), size: fi.Size(), off: s.size(), direct: true}
	}
	start := s.base // file offset of iov[0]
	s.iov = s.iov[:0]
	for _, p := range [2][]byte{a, b} {
		for len(p) > 0 {
			if s.fill == 0 && len(p) >= bs && sys.IsAligned(p) {
				// Whole blocks, aligned in memory: write them from the ring.
				w := len(p) &^ (bs - 1)
				s.iov = append(s.iov, p[:w])
				s.base += int64(w)
				p = p[w:]
				continue
			}
			k := copy(s.block(s.si)[s.fill:], p)
			s.copied += int64(k)
			s.fill += k
			p = p[k:]
			if s.fill < bs {
				continue
			}
			s.iov = append(s.iov, s.block(s.si))
			s.base += bs
			s.fill = 0
			s.si++
			if s.si == len(s.stage)/bs {
				// The stage is full (a range not aligned in memory).
				if err := s.pwritev(start); err != nil {
					return err
				}
				start, s.si = s.base, 0
			}
		}
	}
	if s.fill > 0 {
		blk := s.block(s.si)
		clear(blk[s.fill:])
		s.iov = append(s.iov, blk)
	}
	if err := s.pwritev(start); err != nil {
		return err
	}
	if s.si != 0 {
		// Carry the partial block (possibly empty) to the front.
		copy(s.stage, s.block(s.si)[:s.fill])
		s.si = 0
	}
	s.good = s.size()
	return nil
}

// pwritev writes s.iov (whole blocks) at off and empties it.
func (s *directSink) pwritev(off int64) error {
	if len(s.iov) == 0 {
		return nil
	}
	pwritev := s.pwritevAt
	if pwritev == nil {
		pwritev = sys.Pwritev
	}
	_, err := pwritev(s.f, s.iov, off)
	clear(s.iov) // do not keep ring slices past the call
	s.iov = s.iov[:0]
	if err != nil {
		return fmt.Errorf("writer: at offset %d: %w", off, namePath("pwritev", s.f.Name(), err))
	}
	return nil
}

func (s *directSink) Sync() error {
	if err := s.sync(); err != nil {
		s.syncFailed.Store(true)
		return fmt.Errorf("writer: %w", err)
	}
	return nil
}

func (s *directSink) sync() error {
	if s.fdatasync != nil {
		return s.fdatasync(s.f)
	}
	return sys.Fdatasync(s.f)
}

// close truncates the file to its true length (dropping the padding of the
// last block), makes that durable (unless a Sync failed) and closes the
// file. After a failed write
// the true length is the one the last successful write left: the padding
// of that write's last block is still in the file (a later OpenFile would
// append after it, leaving zero bytes in the middle of the log), and so
// may be part of the failed write's blocks. It never extends the file: it
// may end before that length (truncated by another program), and zeros
// must not fill the gap.
func (s *directSink) close() error {
	size := s.good
	fi, err := s.f.Stat()
	if err == nil && fi.Size() > size {
		err = s.f.Truncate(size)
	}
	if err == nil && !s.syncFailed.Load() {
		err = s.sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writer: close: %w", err)
	}
	return nil
}
