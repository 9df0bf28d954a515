//go:build !linux

package sys

import (
	"strconv"
	"time"
)

func word32(b []byte, off int) int {
	if off < 0 || off > len(b)-4 || off%4 != 0 {
		panic("sys: futex word at offset " + strconv.Itoa(off) + " of " + strconv.Itoa(len(b)) + " bytes")
	}
	return off
}

func futexWait(_ int, _ uint32, timeout time.Duration) { time.Sleep(timeout) }

func futexWake(int) {}
