//go:build linux

package sys

import (
	"math"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex(2) operations (linux/futex.h).
const (
	_futexWait = 0
	_futexWake = 1
)

// word32 returns the address of the 4-byte word at b[off:off+4].
func word32(b []byte, off int) unsafe.Pointer {
	if off < 0 || off > len(b)-4 || off%4 != 0 {
		panic("sys: futex word at offset " + strconv.Itoa(off) + " of " + strconv.Itoa(len(b)) + " bytes")
	}
	// Invariant: the word lies inside b (checked above), which the caller
	// keeps mapped for the duration of the call; the kernel only reads it.
	return unsafe.Pointer(&b[off])
}

func futexWait(addr unsafe.Pointer, val uint32, timeout time.Duration) {
	ts := unix.NsecToTimespec(int64(min(timeout, math.MaxInt64)))
	// EAGAIN (the word differs), EINTR and ETIMEDOUT all mean: go look.
	unix.Syscall6(unix.SYS_FUTEX, uintptr(addr), _futexWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

func futexWake(addr unsafe.Pointer) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(addr), _futexWake, uintptr(math.MaxInt32), 0, 0, 0)
}
