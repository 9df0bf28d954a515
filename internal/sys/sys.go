package sys

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"unsafe"
)

// BlockSize is the alignment O_DIRECT requires for buffer addresses, file
// offsets and transfer lengths. 4096 covers every logical block size in
// common use (512 and 4096 bytes).
const BlockSize = 4096

// _maxIov is the most buffers passed to one pwritev(2) call (IOV_MAX on
// Linux); Pwritev splits longer vectors.
const _maxIov = 1024

// Advice is a hint to the kernel about how a mapped region will be
// accessed; see Madvise. The zero value is invalid.
type Advice int

// The advice values mirror madvise(2).
const (
	// AdviceNormal means no special treatment (MADV_NORMAL).
	AdviceNormal Advice = iota + 1
	// AdviceSequential means pages will be read in order; read ahead
	// aggressively and free pages soon after use (MADV_SEQUENTIAL).
	AdviceSequential
	// AdviceRandom means pages will be read in random order; do not read
	// ahead (MADV_RANDOM).
	AdviceRandom
	// AdviceWillNeed means the pages will be needed soon; start reading
	// them in (MADV_WILLNEED).
	AdviceWillNeed
	// AdviceDontNeed means the pages will not be needed soon; the kernel
	// may drop them (MADV_DONTNEED). For MAP_SHARED file mappings the data
	// stays in the file.
	AdviceDontNeed
)

// String returns the madvise(2) name of a.
func (a Advice) String() string {
	switch a {
	case AdviceNormal:
		return "normal"
	case AdviceSequential:
		return "sequential"
	case AdviceRandom:
		return "random"
	case AdviceWillNeed:
		return "willneed"
	case AdviceDontNeed:
		return "dontneed"
	default:
		return "invalid"
	}
}

// Fdatasync flushes f's data and the metadata needed to read it back (its
// size) to stable storage. On Linux it is fdatasync(2); elsewhere
// (*os.File).Sync. An error means the data may be lost: never retry it and
// assume it is durable.
func Fdatasync(f *os.File) error {
	return pathErr("fdatasync", f, fdatasync(f, false))
}

// FdatasyncParked is Fdatasync with the wait parked: on Linux the
// fdatasync runs on a kernel worker (io_uring IORING_OP_FSYNC) while the
// calling goroutine waits in Go's network poller, holding no P, like one
// reading a socket.
//
// A goroutine blocked in a system call keeps its P, and the runtime takes
// it back only when its monitor next looks, which in a process that has
// been busy without blocking can be 10 ms away; the goroutines queued on
// that P wait all that time. An fdatasync that waits for an ext4 journal
// commit takes milliseconds, so a few logs syncing at once on a machine
// with few CPUs stall every ready goroutine. A parked sync costs more CPU
// (a kernel worker's wake-up and the poller's) and adds a little latency,
// so it is for processes where several logs sync at once.
//
// On Linux the kernel workers that run these syncs are moved to
// SCHED_BATCH: they keep their fair share of CPU time, but an fdatasync's
// completion does not preempt the thread running on its CPU (one of Go's,
// holding a P). See workerSched.
//
// Where io_uring is unavailable (other platforms, old kernels, disabled by
// sysctl or seccomp), or too many syncs are in flight, it is Fdatasync.
func FdatasyncParked(f *os.File) error {
	return pathErr("fdatasync", f, fdatasync(f, true))
}

// Fallocate allocates the byte range [off, off+n) of f, zero-filled,
// extending the file size if off+n is past the end (fallocate(2) mode 0).
// Where fallocate is unsupported (EOPNOTSUPP, ENOSYS, non-Linux) it falls
// back to extending the size with ftruncate when off+n exceeds the current
// size, which leaves a sparse (unallocated) range. n <= 0 does nothing.
func Fallocate(f *os.File, off, n int64) error {
	if off < 0 {
		return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: errors.New("negative offset")}
	}
	if n <= 0 {
		return nil
	}
	return pathErr("fallocate", f, fallocate(f, off, n))
}

// extend grows f to size bytes with ftruncate if it is shorter; it is the
// fallback for fallocate.
func extend(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if size <= fi.Size() {
		return nil
	}
	return f.Truncate(size)
}

// OpenDirect opens name like os.OpenFile with O_DIRECT added: reads and
// writes bypass the page cache and must use buffers from AlignedBuffer,
// offsets and lengths that are multiples of BlockSize. Where O_DIRECT is
// unavailable the error wraps ErrDirectUnsupported.
func OpenDirect(name string, flag int, perm os.FileMode) (*os.File, error) {
	return openDirect(name, flag, perm)
}

// AlignedBuffer returns a zeroed slice of length and capacity n whose first
// byte is aligned to BlockSize, as O_DIRECT requires. It allocates
// n+BlockSize bytes and slices at the first aligned address. Go does not
// expose the address of a slice's backing array without unsafe; the address
// is stable because the Go garbage collector does not move heap objects.
func AlignedBuffer(n int) []byte {
	if n < 0 {
		panic("sys: negative AlignedBuffer size")
	}
	b := make([]byte, n+BlockSize)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (BlockSize - 1)); r != 0 {
		skip = BlockSize - r
	}
	return b[skip : skip+n : skip+n]
}

// HugePage is the size of a transparent huge page on the platforms that
// HugeBuffer backs with them.
const HugePage = 2 << 20

// HugeBuffer returns n bytes aligned to BlockSize for a long-lived I/O
// buffer (a ring). On Linux, when n is at least HugePage, they come from an
// anonymous private mapping aligned to HugePage and advised MADV_HUGEPAGE:
// a 1 MiB O_DIRECT write from 4 KiB pages needs 256 segments, more than a
// virtio disk takes in one request (max_segments 254 here), so it is split;
// from huge pages it is one segment, and the copy into the ring misses the
// TLB less. Otherwise the buffer is AlignedBuffer's, from the Go heap.
//
// release frees a mapping (it does nothing for heap memory). The caller
// must call it exactly once, after the last access to b: touching b
// afterwards faults.
func HugeBuffer(n int) (b []byte, release func() error, err error) {
	if n < HugePage {
		return AlignedBuffer(n), func() error { return nil }, nil
	}
	return hugeBuffer(n)
}

// IsAligned reports whether the first byte of b is aligned to BlockSize.
// It says nothing about len(b).
func IsAligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(BlockSize-1) == 0
}

// Pwritev writes the concatenation of bufs to f at offset off with
// pwritev(2), without moving the file offset. It writes all the bytes:
// short writes are continued, vectors longer than IOV_MAX (1024) are split
// and empty buffers are skipped. It returns the number of bytes written,
// which is less than the total only when err != nil. Elsewhere it is one
// WriteAt per buffer.
func Pwritev(f *os.File, bufs [][]byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "pwritev", Path: f.Name(), Err: errors.New("negative offset")}
	}
	n, err := writevAll(bufs, off, func(vec [][]byte, off int64) (int, error) {
		return pwritev(f, vec, off)
	})
	return n, pathErr("pwritev", f, err)
}

// writevAll writes all of bufs at off through write, which may write less
// than it was given. It continues short writes, passes at most _maxIov
// non-empty buffers per call, and stops at the first error.
func writevAll(bufs [][]byte, off int64, write func(vec [][]byte, off int64) (int, error)) (int, error) {
	var (
		total int
		i     int      // index of the first buffer not fully written
		done  int      // bytes of bufs[i] already written
		tmp   [][]byte // scratch vector, built only when bufs can't be passed as is
	)
	for {
		for i < len(bufs) && done >= len(bufs[i]) {
			i++
			done = 0
		}
		if i == len(bufs) {
			return total, nil
		}
		vec := window(bufs, i, done, &tmp)
		n, err := write(vec, off+int64(total))
		if n < 0 {
			n = 0
		}
		if n == 0 && err == nil {
			// No progress and no error: report it rather than spin.
			err = io.ErrShortWrite
		}
		total += n
		for n > 0 {
			if r := len(bufs[i]) - done; n >= r {
				n -= r
				i++
				done = 0
			} else {
				done += n
				n = 0
			}
		}
		if err != nil {
			return total, err
		}
	}
}

// window returns up to _maxIov non-empty buffers starting at bufs[i][done:].
// It returns a subslice of bufs when possible (no allocation) and otherwise
// builds the vector in *tmp.
func window(bufs [][]byte, i, done int, tmp *[][]byte) [][]byte {
	end := min(len(bufs), i+_maxIov)
	if done == 0 {
		clean := true
		for _, b := range bufs[i:end] {
			if len(b) == 0 {
				clean = false
				break
			}
		}
		if clean {
			return bufs[i:end]
		}
	}
	v := (*tmp)[:0]
	v = append(v, bufs[i][done:])
	for j := i + 1; j < len(bufs) && len(v) < _maxIov; j++ {
		if len(bufs[j]) > 0 {
			v = append(v, bufs[j])
		}
	}
	*tmp = v
	return v
}

// Mmap maps length bytes of f starting at off (a multiple of the page
// size) with MAP_SHARED: stores through a writable mapping reach the file.
// The mapping outlives f being closed; release it with Munmap.
func Mmap(f *os.File, off int64, length int, writable bool) ([]byte, error) {
	b, err := mmap(f, off, length, writable)
	if err != nil {
		return nil, pathErr("mmap", f, err)
	}
	return b, nil
}

// Munmap releases a mapping returned by Mmap. b must be that slice (or a
// reslice of it starting at index 0). Touching b afterwards faults.
func Munmap(b []byte) error {
	if err := munmap(b); err != nil {
		return &fs.PathError{Op: "munmap", Path: "", Err: err}
	}
	return nil
}

// Madvise passes advice a about the mapped region b to the kernel
// (madvise(2)). It returns nil where advice is unsupported (ENOSYS,
// EINVAL, non-Linux): advice is only a hint.
func Madvise(b []byte, a Advice) error {
	if len(b) == 0 {
		return nil
	}
	if err := madvise(b, a); err != nil {
		return &fs.PathError{Op: "madvise", Path: "", Err: err}
	}
	return nil
}

// TryLock takes an exclusive lock on f without blocking (flock(2)
// LOCK_EX|LOCK_NB). flock locks belong to the open file description: two
// os.Open calls on the same file in one process conflict, and the lock is
// released by Unlock or when f is closed. If another holder has the lock,
// the error wraps ErrLocked.
func TryLock(f *os.File) error {
	return pathErr("flock", f, tryLock(f))
}

// Unlock releases a lock taken by TryLock on f.
func Unlock(f *os.File) error {
	return pathErr("flock", f, unlock(f))
}

// SyncDir makes directory entry changes in dir (creates, renames, removes)
// durable: it opens dir, fsyncs it and closes it. On Windows, where
// directories cannot be synced, it only checks that dir can be opened.
func SyncDir(dir string) error {
	return syncDir(dir, false)
}

// SyncDirParked is SyncDir with the fsync parked (see FdatasyncParked).
func SyncDirParked(dir string) error {
	return syncDir(dir, true)
}

// control runs fn with f's descriptor, holding a reference to it so that a
// concurrent Close cannot free it mid-call. A closed f yields os.ErrClosed.
func control(f *os.File, fn func(fd uintptr) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = fn(fd) }); err != nil {
		// Control fails only when the file is closed (or closing); os
		// reports that as os.ErrClosed, so do the same.
		return os.ErrClosed
	}
	return opErr
}

// pathErr wraps err as a *fs.PathError for op on f, leaving nil and errors
// that already are *fs.PathError alone.
func pathErr(op string, f *os.File, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return &fs.PathError{Op: op, Path: f.Name(), Err: err}
}
