//go:build linux

package sys

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// syncRing runs the parked syncs (FdatasyncParked, SyncDirParked):
// fdatasync and fsync are submitted to an io_uring, which runs them on
// kernel workers, and the caller waits for the completion by reading an
// eventfd registered with the ring. That read goes through Go's network
// poller, so the waiting goroutine is parked without a P.
//
// One ring serves the process; it is created on first use and lives as
// long as the process (like the poller's own epoll descriptor). No
// goroutine of its own reaps it: the first waiter becomes the leader,
// reads the eventfd and hands each completion to its caller through the
// caller's slot; when the leader's own completion arrives it passes the
// leadership to a caller still waiting, or ends it if there is none.
type syncRing struct {
	mu sync.Mutex // guards everything below but ev reads and evBuf
	u  uring
	ev *os.File // the eventfd, non-blocking, so reads park in the poller
	// slots are the calls in flight, by the user data of their SQE. A
	// slot's channel (buffer 1) receives exactly one value per use: its
	// completion's result, or _lead when it is to lead.
	slots   []ringSlot
	free    []uint64 // indexes of unused slots
	pending int      // slots submitted and not yet reaped
	leading bool     // a caller is reading ev
	evBuf   [8]byte  // the leader's read buffer

	workers workerSched // its own lock; see workerSched
}

type ringSlot struct {
	c       chan int32
	pending bool // submitted, completion not yet reaped
}

// _lead is sent to a waiting caller's slot to make it the leader; no
// completion result (0 or -errno) takes this value.
const _lead = math.MinInt32

// _syncRingEntries bounds the syncs in flight through the ring; a call
// that finds every slot taken makes the system call itself.
const _syncRingEntries = 64

var (
	_syncRingOnce sync.Once
	_syncRing     *syncRing // nil where io_uring or eventfd is unavailable
)

// ring returns the process's sync ring, or nil where it cannot be had
// (then syncs are plain system calls).
func ring() *syncRing {
	_syncRingOnce.Do(func() {
		r, err := newSyncRing(_syncRingEntries)
		if err == nil {
			_syncRing = r
		}
	})
	return _syncRing
}

func newSyncRing(entries int) (*syncRing, error) {
	r := &syncRing{slots: make([]ringSlot, entries), free: make([]uint64, 0, entries)}
	if err := r.u.setup(uint32(entries)); err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = r.u.close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.u.fd), _ioringRegisterEventfd, uintptr(unsafe.Pointer(&efd)), 1, 0, 0)
	if errno != 0 {
		_ = unix.Close(efd)
		_ = r.u.close()
		return nil, fmt.Errorf("io_uring_register eventfd: %w", errno)
	}
	// Non-blocking, so os.NewFile puts it in the poller.
	r.ev = os.NewFile(uintptr(efd), "io_uring eventfd")
	for i := range r.slots {
		r.slots[i].c = make(chan int32, 1)
		r.free = append(r.free, uint64(entries-1-i))
	}
	return r, nil
}

// close releases the ring. Only tests call it, on rings of their own,
// with nothing in flight.
func (r *syncRing) close() error {
	return errors.Join(r.ev.Close(), r.u.close())
}

// fsync runs IORING_OP_FSYNC (flags: _ioringFsyncDatasync or 0) on fd
// and waits for it without holding a P, returning its error. ok is false
// when the ring could not take the call (every slot in flight, or the
// submission failed), and the caller makes the system call itself.
// REQUIRES: fd stays open until fsync returns.
func (r *syncRing) fsync(fd int, flags uint32) (ok bool, err error) {
	sqe := uringSQE{opcode: _ioringOpFsync, fd: int32(fd), rwFlags: flags}
	return r.do(&sqe)
}

// do submits sqe and waits for its completion; see fsync.
//
// The submission holds mu (the submission queue has one producer at a
// time): io_uring_enter without waiting only queues the request, which
// the kernel runs on a worker, so no I/O is waited for under the lock.
func (r *syncRing) do(sqe *uringSQE) (ok bool, err error) {
	r.mu.Lock()
	if len(r.free) == 0 {
		r.mu.Unlock()
		return false, nil
	}
	tok := r.free[len(r.free)-1]
	sqe.userData = tok
	if err := r.u.submit(sqe); err != nil {
		r.mu.Unlock()
		return false, nil
	}
	r.free = r.free[:len(r.free)-1]
	r.slots[tok].pending = true
	r.pending++
	lead := !r.leading
	r.leading = true
	r.mu.Unlock()
	// After the submission, which may have made a worker.
	r.workers.maybeScan()

	if !lead {
		if res := <-r.slots[tok].c; res != _lead {
			r.mu.Lock()
			r.free = append(r.free, tok)
			r.mu.Unlock()
			return true, errnoErr(res)
		}
	}
	return true, errnoErr(r.lead(tok))
}

// lead reaps completions, handing each to its slot, until tok's arrives,
// and returns its result. It runs in one caller at a time (leading).
func (r *syncRing) lead(tok uint64) int32 {
	for {
		r.mu.Lock()
		res, done := int32(0), false
		for {
			cqe, ok := r.u.reap()
			if !ok {
				break
			}
			r.pending--
			r.slots[cqe.userData].pending = false
			if cqe.userData == tok {
				res, done = cqe.res, true
			} else {
				r.slots[cqe.userData].c <- cqe.res // buffered: never blocks
			}
		}
		if done {
			r.free = append(r.free, tok)
			r.handOff()
			r.mu.Unlock()
			return res
		}
		r.mu.Unlock()
		// The eventfd counts completions posted; a read that returns
		// for completions already reaped only costs a pass.
		if _, err := r.ev.Read(r.evBuf[:]); err != nil {
			// Never expected (the eventfd is never closed while in
			// use): wait in the kernel instead, holding the P.
			_ = r.u.await()
		}
	}
}

// handOff passes the leadership to a caller still waiting, or ends it.
// REQUIRES: r.mu held, by the leader.
func (r *syncRing) handOff() {
	if r.pending == 0 {
		r.leading = false
		return
	}
	for i := range r.slots {
		if r.slots[i].pending {
			r.slots[i].c <- _lead
			return
		}
	}
}

// errnoErr turns a completion's result into an error.
func errnoErr(res int32) error {
	if res < 0 {
		return unix.Errno(-res)
	}
	return nil
}
