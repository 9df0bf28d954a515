package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	// _initialBufSize is the Scanner's starting buffer and read size.
	_initialBufSize = 1 << 20
	// _zeroBlock is the block size of the zero checks.
	_zeroBlock = 4096
	// _maxEmptyReads bounds consecutive (0, nil) reads, as bufio does.
	_maxEmptyReads = 100
)

// _zeros is compared against with bytes.Equal to skip zero blocks quickly.
// Never written.
var _zeros [_zeroBlock]byte

// lastNonZero returns the index of the last non-zero byte of b, or -1 if b
// is all zero.
func lastNonZero(b []byte) int {
	end := len(b)
	for end > 0 {
		start := max(end-_zeroBlock, 0)
		if !bytes.Equal(b[start:end], _zeros[:end-start]) {
			for i := end - 1; ; i-- {
				if b[i] != 0 {
					return i
				}
			}
		}
		end = start
	}
	return -1
}

// errInvalidRead is returned when an io.Reader returns an impossible count.
var errInvalidRead = errors.New("frame: read: invalid count from io.Reader")

// Scanner reads consecutive frames from an io.Reader, as recovery and
// verification do. It stops at the clean end of the data or at the first
// damage; see the package documentation for the rules.
//
// Typical use:
//
//	s := frame.NewScanner(r, frame.FileHeaderSize, 0)
//	for s.Next() {
//		f := s.Frame()
//		...
//	}
//	end, err := s.Offset(), s.Err()
//
// A Scanner is not safe for concurrent use.
type Scanner struct {
	r          io.Reader
	maxPayload int
	bufSize    int // initial buffer size

	// buf[start:end] holds bytes read but not consumed; buf[start] is at
	// file offset off.
	buf        []byte
	start, end int
	off        int64
	eof        bool // r returned io.EOF

	cur    Frame
	curOff int64 // offset of cur; after done, the end of the valid data
	done   bool
	err    error
}

// NewScanner returns a Scanner that reads frames from r. base is the file
// offset of r's first byte, so that offsets reported by the Scanner are
// file offsets. maxPayload bounds a frame's payload length: a larger stored
// length is ErrTooLarge damage; maxPayload <= 0 or > MaxPayload means
// MaxPayload.
//
// The Scanner reads r in large chunks into a buffer it owns, which starts at
// 1 MiB and grows only to hold a larger frame, never beyond
// HeaderSize+maxPayload. It grows by doubling while the frame's bytes
// arrive, so a garbage length in a torn tail does not allocate maxPayload.
func NewScanner(r io.Reader, base int64, maxPayload int) *Scanner {
	return newScanner(r, base, maxPayload, _initialBufSize)
}

// newScanner is NewScanner with the initial buffer size; tests shrink it.
func newScanner(r io.Reader, base int64, maxPayload, bufSize int) *Scanner {
	if maxPayload <= 0 || maxPayload > MaxPayload {
		maxPayload = MaxPayload
	}
	return &Scanner{r: r, maxPayload: maxPayload, bufSize: max(bufSize, HeaderSize), off: base, curOff: base}
}

// Reset makes s scan r from file offset base, as a new Scanner would, but
// keeps the buffer s already owns, so that scanning many files one after
// another allocates it once. maxPayload is unchanged; a zero Scanner is
// set up as NewScanner(r, base, 0) would.
func (s *Scanner) Reset(r io.Reader, base int64) {
	maxPayload, bufSize := s.maxPayload, s.bufSize
	if maxPayload == 0 { // a zero Scanner
		maxPayload, bufSize = MaxPayload, _initialBufSize
	}
	*s = Scanner{r: r, maxPayload: maxPayload, bufSize: bufSize, buf: s.buf[:cap(s.buf)], off: base, curOff: base}
}

// Next advances to the next frame of any kind and reports whether there is
// one. It returns false at the end of the data, on damage or on a read
// error; Err tells which, and Offset where the valid data ends.
func (s *Scanner) Next() bool {
	if s.done {
		return false
	}
	if err := s.fill(HeaderSize); err != nil {
		return s.stop(err)
	}
	b := s.buf[s.start:s.end]
	if len(b) == 0 {
		return s.stop(nil) // EOF at a frame boundary
	}
	f, n, err := decode(b, s.maxPayload)
	if err == ErrTruncated && len(b) >= HeaderSize && !s.eof {
		// The header is fine; read the rest of the frame and retry.
		if err := s.fill(HeaderSize + int(lengthOf(b))); err != nil {
			return s.stop(err)
		}
		b = s.buf[s.start:s.end]
		f, n, err = decode(b, s.maxPayload)
	}
	if err != nil {
		return s.damage(err)
	}
	s.cur, s.curOff = f, s.off
	s.start += n
	s.off += int64(n)
	return true
}

// lengthOf returns the payload length stored in header hdr.
func lengthOf(hdr []byte) uint32 {
	return binary.LittleEndian.Uint32(hdr[4:8]) & MaxPayload
}

// Frame returns the current frame. Its Payload is valid until the next call
// to Next. After Next returned false it returns the zero Frame.
func (s *Scanner) Frame() Frame { return s.cur }

// Offset returns the file offset of the current frame. After Next returned
// false, it returns the offset where the valid data ends: the end of the
// last good frame (or base if there was none).
func (s *Scanner) Offset() int64 { return s.curOff }

// Err returns, after Next returned false, nil for a clean end, a *Damage
// for damage, or a read error (wrapped, not a *Damage).
func (s *Scanner) Err() error { return s.err }

// stop ends the scan with err (nil for a clean end).
func (s *Scanner) stop(err error) bool {
	s.done = true
	s.cur = Frame{}
	s.curOff = s.off
	s.err = err
	return false
}

// damage ends the scan at s.off, where bytes fail to decode with reason.
// It reads to EOF to find the extent of non-zero bytes; if there are none,
// the end is clean.
func (s *Scanner) damage(reason error) bool {
	last := int64(-1) // file offset of the last non-zero byte
	if i := lastNonZero(s.buf[s.start:s.end]); i >= 0 {
		last = s.off + int64(i)
	}
	pos := s.off + int64(s.end-s.start) // file offset of buf[s.end]
	s.start, s.end = 0, 0
	for !s.eof {
		if err := s.read(); err != nil {
			return s.stop(err)
		}
		if i := lastNonZero(s.buf[:s.end]); i >= 0 {
			last = pos + int64(i)
		}
		pos += int64(s.end)
		s.end = 0
	}
	if last < 0 {
		return s.stop(nil) // zero-filled tail
	}
	return s.stop(&Damage{Offset: s.off, Err: reason, Extent: last - s.off + 1})
}

// fill reads until buf[start:end] holds at least need bytes or r is at EOF.
// It returns only read errors other than io.EOF.
//
// The buffer grows by doubling, and only while data keeps arriving, so that
// a garbage length in a torn tail costs no more memory than the bytes that
// are really there; its final size is at most need.
// REQUIRES: need <= HeaderSize+s.maxPayload.
func (s *Scanner) fill(need int) error {
	for s.end-s.start < need && !s.eof {
		if s.end == len(s.buf) {
			switch {
			case s.buf == nil:
				s.buf = make([]byte, s.bufSize)
			case need <= len(s.buf):
				s.end = copy(s.buf, s.buf[s.start:s.end])
				s.start = 0
			default:
				nb := make([]byte, len(s.buf)+min(len(s.buf), need-len(s.buf))) // min(2*len, need), without overflow
				s.end = copy(nb, s.buf[s.start:s.end])
				s.start = 0
				s.buf = nb
			}
		}
		if err := s.read(); err != nil {
			return err
		}
	}
	return nil
}

// read reads once into buf[end:], retrying empty reads, and sets eof at
// io.EOF. It returns other read errors, wrapped.
// REQUIRES: end < len(buf).
func (s *Scanner) read() error {
	for range _maxEmptyReads {
		n, err := s.r.Read(s.buf[s.end:])
		if n < 0 || n > len(s.buf)-s.end {
			return errInvalidRead
		}
		s.end += n
		if err == io.EOF {
			s.eof = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("frame: read: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
	return fmt.Errorf("frame: read: %w", io.ErrNoProgress)
}
