package sys

import (
	"errors"
	"os"
)

// ErrUringUnsupported is returned (wrapped) by NewUring when io_uring is not
// available: on platforms other than Linux, on kernels without it (ENOSYS),
// and where it is disabled (EPERM: kernel.io_uring_disabled, or a seccomp
// filter such as a container runtime's default profile).
var ErrUringUnsupported = errors.New("sys: io_uring not available")

// Uring is a minimal io_uring instance (io_uring_setup(2)) that does one
// thing: positional writes of whole buffers, submitted without waiting and
// reaped later. It exists so that benchmarks can compare asynchronous
// kernel-side writes with the other write paths; it is not a general
// io_uring binding.
//
// A Uring is not safe for concurrent use: one goroutine at a time (or a
// caller's mutex) drives it. At most Entries writes may be in flight.
//
// REQUIRES: the buffer and the file of each Write stay untouched and open
// until its completion has been returned by Wait.
type Uring struct {
	u uring // platform state
}

// UringCompletion is the result of one write submitted with Uring.Write.
type UringCompletion struct {
	// Tag is the value passed to Write.
	Tag uint64
	// N is the number of bytes written; it may be less than the buffer's
	// length only when Err is nil and the write was short.
	N int
	// Err is the write's error (an errno), or nil.
	Err error
}

// NewUring sets up an io_uring with room for entries writes in flight
// (rounded up to a power of two by the kernel). Where io_uring is not
// available the error wraps ErrUringUnsupported and says why.
func NewUring(entries int) (*Uring, error) {
	if entries < 1 || entries > 4096 {
		return nil, errors.New("sys: io_uring entries must be in [1, 4096]")
	}
	r := &Uring{}
	if err := r.u.setup(uint32(entries)); err != nil {
		return nil, err
	}
	return r, nil
}

// ProbeUring reports whether io_uring can be used here: nil, or an error
// wrapping ErrUringUnsupported that says why not.
func ProbeUring() error {
	r, err := NewUring(1)
	if err != nil {
		return err
	}
	return r.Close()
}

// Entries returns how many writes may be in flight at once.
func (r *Uring) Entries() int { return r.u.entries() }

// InFlight returns how many submitted writes have not been returned by Wait.
func (r *Uring) InFlight() int { return r.u.inflight }

// Write submits a write of b to f at offset off (IORING_OP_WRITE) and
// returns without waiting for it. tag comes back in its completion.
// It fails if Entries writes are already in flight.
func (r *Uring) Write(f *os.File, b []byte, off int64, tag uint64) error {
	if r.u.inflight >= r.u.entries() {
		return errors.New("sys: io_uring submission queue full: Wait for a completion first")
	}
	if off < 0 {
		return pathErr("io_uring write", f, errors.New("negative offset"))
	}
	return pathErr("io_uring_enter", f, r.u.write(f, b, off, tag))
}

// Wait returns the next completion, waiting for one if none is ready.
// It fails if no write is in flight.
func (r *Uring) Wait() (UringCompletion, error) {
	if r.u.inflight == 0 {
		return UringCompletion{}, errors.New("sys: io_uring wait with no write in flight")
	}
	return r.u.wait()
}

// Close releases the ring. Writes still in flight are not waited for:
// Wait for every one of them first.
func (r *Uring) Close() error {
	return r.u.close()
}
