//go:build linux

package sys

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring ABI constants and structures (include/uapi/linux/io_uring.h).
// These are part of the kernel ABI and must not change.
const (
	_ioringOffSQRing        = 0
	_ioringOffCQRing        = 0x8000000
	_ioringOffSQEs          = 0x10000000
	_ioringOpFsync          = 3
	_ioringOpTimeout        = 11
	_ioringOpWrite          = 23
	_ioringFsyncDatasync    = 1 << 0
	_ioringRegisterEventfd  = 4
	_ioringEnterGetEvents   = 1 << 0
	_ioringFeatSingleMmap   = 1 << 0
	_ioringSQESize          = 64
	_ioringCQESize          = 16
	_ioringSetupParamsBytes = 120
)

type uringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOffsets
	cqOff                                                                  uringCQOffsets
}

type uringSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// Compile-time checks of the ABI sizes.
var (
	_ [_ioringSetupParamsBytes - unsafe.Sizeof(uringParams{})]byte
	_ [unsafe.Sizeof(uringParams{}) - _ioringSetupParamsBytes]byte
	_ [_ioringSQESize - unsafe.Sizeof(uringSQE{})]byte
	_ [_ioringCQESize - unsafe.Sizeof(uringCQE{})]byte
)

// uring is the Linux state of a Uring: the ring fd and the three shared
// mappings. The head/tail words live in memory shared with the kernel and
// are accessed with atomics.
type uring struct {
	fd       int
	sqRing   []byte // SQ ring mapping (also the CQ ring with SINGLE_MMAP)
	cqRing   []byte // CQ ring mapping, nil with SINGLE_MMAP
	sqeMem   []byte // the SQE array mapping
	sqHead   *atomic.Uint32
	sqTail   *atomic.Uint32
	sqMask   uint32
	sqArray  unsafe.Pointer // uint32[sqEntries]
	cqHead   *atomic.Uint32
	cqTail   *atomic.Uint32
	cqMask   uint32
	cqes     unsafe.Pointer // uringCQE[cqEntries]
	n        uint32         // SQ entries
	inflight int
	closed   bool
}

func (u *uring) setup(entries uint32) error {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	switch errno {
	case 0:
	case unix.ENOSYS:
		return fmt.Errorf("%w: io_uring_setup: %v (the kernel was built without io_uring)", ErrUringUnsupported, errno)
	case unix.EPERM:
		return fmt.Errorf("%w: io_uring_setup: %v (disabled by sysctl kernel.io_uring_disabled or a seccomp filter)", ErrUringUnsupported, errno)
	default:
		return fmt.Errorf("io_uring_setup: %w", errno)
	}
	u.fd = int(fd)
	if err := u.mapRings(&p); err != nil {
		_ = u.close()
		return err
	}
	return nil
}

func (u *uring) mapRings(p *uringParams) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*_ioringCQESize)
	single := p.features&_ioringFeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	prot, flags := unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE
	if u.sqRing, err = unix.Mmap(u.fd, _ioringOffSQRing, sqSize, prot, flags); err != nil {
		return fmt.Errorf("mmap io_uring SQ ring: %w", err)
	}
	cq := u.sqRing
	if !single {
		if u.cqRing, err = unix.Mmap(u.fd, _ioringOffCQRing, cqSize, prot, flags); err != nil {
			return fmt.Errorf("mmap io_uring CQ ring: %w", err)
		}
		cq = u.cqRing
	}
	if u.sqeMem, err = unix.Mmap(u.fd, _ioringOffSQEs, int(p.sqEntries)*_ioringSQESize, prot, flags); err != nil {
		return fmt.Errorf("mmap io_uring SQEs: %w", err)
	}
	sq := unsafe.Pointer(&u.sqRing[0])
	u.sqHead = (*atomic.Uint32)(unsafe.Add(sq, p.sqOff.head))
	u.sqTail = (*atomic.Uint32)(unsafe.Add(sq, p.sqOff.tail))
	u.sqMask = *(*uint32)(unsafe.Add(sq, p.sqOff.ringMask))
	u.sqArray = unsafe.Add(sq, p.sqOff.array)
	cqp := unsafe.Pointer(&cq[0])
	u.cqHead = (*atomic.Uint32)(unsafe.Add(cqp, p.cqOff.head))
	u.cqTail = (*atomic.Uint32)(unsafe.Add(cqp, p.cqOff.tail))
	u.cqMask = *(*uint32)(unsafe.Add(cqp, p.cqOff.ringMask))
	u.cqes = unsafe.Add(cqp, p.cqOff.cqes)
	u.n = p.sqEntries
	if p.cqEntries < p.sqEntries {
		return errors.New("io_uring: fewer CQ than SQ entries")
	}
	return nil
}

func (u *uring) entries() int { return int(u.n) }

func (u *uring) write(f *os.File, b []byte, off int64, tag uint64) error {
	if u.closed {
		return errors.New("io_uring closed")
	}
	// Submit inside Control: the kernel takes its own reference to the
	// file at submission, so the descriptor only needs to be valid here.
	return control(f, func(fd uintptr) error {
		sqe := uringSQE{
			opcode:   _ioringOpWrite,
			fd:       int32(fd),
			off:      uint64(off),
			len:      uint32(len(b)),
			userData: tag,
		}
		if len(b) > 0 {
			sqe.addr = uint64(uintptr(unsafe.Pointer(&b[0])))
		}
		if err := u.submit(&sqe); err != nil {
			return err
		}
		u.inflight++
		return nil
	})
}

// submit queues sqe and hands it to the kernel (io_uring_enter without
// waiting). The caller keeps what sqe refers to (buffer, descriptor)
// valid until its completion; only one goroutine at a time submits.
func (u *uring) submit(sqe *uringSQE) error {
	tail := u.sqTail.Load() // only we write the SQ tail
	idx := tail & u.sqMask
	*(*uringSQE)(unsafe.Add(unsafe.Pointer(&u.sqeMem[0]), uintptr(idx)*_ioringSQESize)) = *sqe
	*(*uint32)(unsafe.Add(u.sqArray, uintptr(idx)*4)) = idx
	u.sqTail.Store(tail + 1) // release: the SQE is complete
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), 1, 0, 0, 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0, n != 1:
			// The kernel took nothing (it counts an entry it consumed
			// and failed as submitted, and posts its completion): take
			// the entry back, or the next io_uring_enter would submit it
			// in place of its own, and the caller, told this one
			// failed, would see its completion.
			u.sqTail.Store(tail)
			if errno != 0 {
				return errno
			}
			return fmt.Errorf("io_uring_enter submitted %d of 1 entries", n)
		}
		return nil
	}
}

// reap returns the next completion without waiting; ok is false when
// none is ready.
func (u *uring) reap() (cqe uringCQE, ok bool) {
	head := u.cqHead.Load()
	if head == u.cqTail.Load() { // acquire: the CQE is complete
		return uringCQE{}, false
	}
	cqe = *(*uringCQE)(unsafe.Add(u.cqes, uintptr(head&u.cqMask)*_ioringCQESize))
	u.cqHead.Store(head + 1)
	return cqe, true
}

// await blocks in io_uring_enter until a completion is ready.
func (u *uring) await() error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), 0, 1, _ioringEnterGetEvents, 0, 0)
	if errno != 0 && errno != unix.EINTR {
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
	return nil
}

func (u *uring) wait() (UringCompletion, error) {
	for {
		if cqe, ok := u.reap(); ok {
			c := UringCompletion{Tag: cqe.userData, Err: errnoErr(cqe.res)}
			if c.Err == nil {
				c.N = int(cqe.res)
			}
			u.inflight--
			return c, nil
		}
		if err := u.await(); err != nil {
			return UringCompletion{}, err
		}
	}
}

func (u *uring) close() error {
	if u.closed {
		return nil
	}
	u.closed = true
	var errs []error
	for _, m := range [][]byte{u.sqeMem, u.cqRing, u.sqRing} {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
		}
	}
	u.sqeMem, u.cqRing, u.sqRing = nil, nil, nil
	if u.fd > 0 {
		errs = append(errs, unix.Close(u.fd))
	}
	return errors.Join(errs...)
}
