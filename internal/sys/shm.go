package sys

import (
	"strconv"
	"sync/atomic"
	"unsafe"
)

// Uint64At returns the 8-byte word at b[off:off+8] as an *atomic.Uint64,
// for counters and frame headers that several processes share through a
// MAP_SHARED mapping (package shmlog). It panics if the word is not inside
// b or its address is not a multiple of 8.
//
// The caller must not use the returned pointer after b is unmapped, and b
// must not be memory the Go garbage collector manages (it is a mapping from
// Mmap), so the pointer never keeps Go memory alive or moves.
func Uint64At(b []byte, off int) *atomic.Uint64 {
	if off < 0 || off > len(b)-8 {
		panic("sys: Uint64At: offset " + strconv.Itoa(off) + " outside " + strconv.Itoa(len(b)) + " bytes")
	}
	// Invariant: &b[off] points into a live mapping of at least 8 more
	// bytes (checked above); atomic.Uint64 is a plain 8-byte word with no
	// other state, so an 8-aligned address (checked below) holds one.
	p := unsafe.Pointer(&b[off])
	if uintptr(p)%8 != 0 {
		panic("sys: Uint64At: unaligned offset " + strconv.Itoa(off))
	}
	return (*atomic.Uint64)(p)
}
