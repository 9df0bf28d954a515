//go:build linux

package sys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

func fdatasync(f *os.File, parked bool) error {
	return control(f, func(fd uintptr) error { return fsyncFD(int(fd), true, parked) })
}

// fsyncFD makes fd's data (datasync) or data and metadata durable: with
// the system call, or, parked, through the process's sync ring, whose
// wait holds no P (see syncRing). Where the ring is unavailable (or
// full) a parked sync is the system call too.
func fsyncFD(fd int, datasync, parked bool) error {
	if parked {
		if r := ring(); r != nil {
			flags := uint32(0)
			if datasync {
				flags = _ioringFsyncDatasync
			}
			if ok, err := r.fsync(fd, flags); ok && err != unix.EINTR {
				return err
			}
		}
	}
	if datasync {
		return retryEINTR(func() error { return unix.Fdatasync(fd) })
	}
	return retryEINTR(func() error { return unix.Fsync(fd) })
}

func fallocate(f *os.File, off, n int64) error {
	err := control(f, func(fd uintptr) error {
		return retryEINTR(func() error { return unix.Fallocate(int(fd), 0, off, n) })
	})
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return extend(f, off+n)
	}
	return err
}

func openDirect(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|unix.O_DIRECT, perm)
	if err != nil {
		// open(2): EINVAL "The filesystem does not support the O_DIRECT flag."
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, unix.EINVAL) {
			pe.Err = fmt.Errorf("%w: %w", ErrDirectUnsupported, pe.Err)
		}
		return nil, err
	}
	return f, nil
}

func pwritev(f *os.File, bufs [][]byte, off int64) (int, error) {
	var n int
	err := control(f, func(fd uintptr) error {
		var err error
		for {
			n, err = unix.Pwritev(int(fd), bufs, off)
			if err != unix.EINTR {
				return err
			}
		}
	})
	return n, err
}

func mmap(f *os.File, off int64, length int, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	var b []byte
	err := control(f, func(fd uintptr) error {
		var err error
		b, err = unix.Mmap(int(fd), off, length, prot, unix.MAP_SHARED)
		return err
	})
	return b, err
}

func munmap(b []byte) error {
	return unix.Munmap(b)
}

func madvise(b []byte, a Advice) error {
	var advice int
	switch a {
	case AdviceNormal:
		advice = unix.MADV_NORMAL
	case AdviceSequential:
		advice = unix.MADV_SEQUENTIAL
	case AdviceRandom:
		advice = unix.MADV_RANDOM
	case AdviceWillNeed:
		advice = unix.MADV_WILLNEED
	case AdviceDontNeed:
		advice = unix.MADV_DONTNEED
	default:
		return fmt.Errorf("invalid advice %d", int(a))
	}
	err := unix.Madvise(b, advice)
	if err == unix.ENOSYS || err == unix.EINVAL {
		return nil
	}
	return err
}

func syncDir(dir string, parked bool) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	err = control(d, func(fd uintptr) error { return fsyncFD(int(fd), false, parked) })
	if err != nil {
		err = &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// retryEINTR calls fn until it returns something other than EINTR.
func retryEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

func hugeBuffer(n int) ([]byte, func() error, error) {
	m, err := unix.Mmap(-1, 0, n+HugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "mmap", Path: "anonymous", Err: err}
	}
	// INVARIANT: b lies inside m, which stays mapped until release; only
	// the address is inspected here, to align b to a huge page.
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(m))) & (HugePage - 1)); r != 0 {
		skip = HugePage - r
	}
	b := m[skip : skip+n : skip+n]
	// Only a hint: without transparent huge pages the buffer still works.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	var once sync.Once
	release := func() error {
		err := error(nil)
		once.Do(func() { err = unix.Munmap(m) })
		return err
	}
	return b, release, nil
}
