package writer

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/appendlog/appendlog/internal/sys"
)

// directSink writes the ring's bytes to a file opened with O_DIRECT. The
// flusher copies committed bytes into an aligned staging buffer and writes
// whole blocks (sys.BlockSize) at block-aligned offsets:
//
//	file:  ... | block | block | block | partial |
//	             ^ base                 ^ base+fill rounded down
//	stage: [ bytes of the file from base, fill of them ][ zeros to the block end ]
//
// A full stage is written and the next one starts after it. At the end of
// each flush the stage's whole blocks and its last, partial block (padded
// with zeros to the block size) are written; the partial block is then
// moved to the front of the stage and rewritten, completed, at the same
// offset by the next flush. So zero padding only ever follows the last
// byte, never sits in the middle of the file, and close truncates it away.
//
// Its methods run on the flusher goroutine. Every error is sticky.
type directSink struct {
	f     *os.File
	stage []byte // aligned; len is a multiple of sys.BlockSize
	base  int64  // file offset of stage[0], a multiple of sys.BlockSize
	fill  int    // bytes of stage holding data
}

func openDirectSink(path string, perm os.FileMode, stageSize int) (*directSink, error) {
	f, err := sys.OpenDirect(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	s := &directSink{f: f, stage: sys.AlignedBuffer(stageSize &^ (sys.BlockSize - 1))}
	if err := s.resume(); err != nil {
		f.Close()
		return nil, fmt.Errorf("writer: open %s: %w", path, err)
	}
	return s, nil
}

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

func (s *directSink) Write(pos uint64, a, b []byte) error {
	for _, p := range [2][]byte{a, b} {
		for len(p) > 0 {
			k := copy(s.stage[s.fill:], p)
			s.fill += k
			p = p[k:]
			if s.fill == len(s.stage) {
				if err := s.pwrite(s.stage); err != nil {
					return err
				}
				s.base += int64(len(s.stage))
				s.fill = 0
			}
		}
	}
	if s.fill == 0 {
		return nil
	}
	whole := s.fill &^ (sys.BlockSize - 1)
	end := (s.fill + sys.BlockSize - 1) &^ (sys.BlockSize - 1)
	clear(s.stage[s.fill:end])
	if err := s.pwrite(s.stage[:end]); err != nil {
		return err
	}
	if whole > 0 {
		// Carry the partial block (possibly empty) to the front.
		s.fill = copy(s.stage, s.stage[whole:s.fill])
		s.base += int64(whole)
	}
	return nil
}

// pwrite writes p (whole blocks) at base.
func (s *directSink) pwrite(p []byte) error {
	if _, err := s.f.WriteAt(p, s.base); err != nil {
		return fmt.Errorf("writer: write %s at offset %d: %w", s.f.Name(), s.base, err)
	}
	return nil
}

func (s *directSink) Sync() error {
	if err := sys.Fdatasync(s.f); err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	return nil
}

// close truncates the file to its true length (dropping the padding of the
// last block), makes that durable and closes the file. It never extends the
// file: after a failed write the file may end before the bytes the sink
// staged, and zeros must not fill that gap.
func (s *directSink) close() error {
	size := s.base + int64(s.fill)
	fi, err := s.f.Stat()
	if err == nil && fi.Size() > size {
		err = s.f.Truncate(size)
	}
	if err == nil {
		err = sys.Fdatasync(s.f)
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writer: close: %w", err)
	}
	return nil
}
