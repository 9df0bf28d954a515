package sys

import "time"

// FutexWait waits until the 32-bit word at b[off:off+4] (b a MAP_SHARED
// mapping; off a multiple of 4) may have changed from val, or timeout
// passes, whichever is first; it may also return early for no reason.
// Processes sharing the mapping wake it with FutexWake. On Linux it is
// futex(2) FUTEX_WAIT (not private: it works across processes); elsewhere
// it sleeps for timeout.
func FutexWait(b []byte, off int, val uint32, timeout time.Duration) {
	futexWait(word32(b, off), val, timeout)
}

// FutexWake wakes every waiter in FutexWait on the word at b[off:off+4].
func FutexWake(b []byte, off int) {
	futexWake(word32(b, off))
}
