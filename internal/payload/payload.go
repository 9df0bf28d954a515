package payload

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// These constants are part of the record format and must not change.
const (
	// MinSize is the smallest record that carries a head and a check.
	MinSize = _headSize + _tailSize
	// MaxWriters is the number of writer ids: 4 hex digits.
	MaxWriters = 1 << 16
	// MaxCounter is the largest counter: 12 hex digits.
	MaxCounter = 1<<48 - 1

	_headSize = 18 // "wwww cccccccccccc "
	_tailSize = 9  // "ssssssss\n"
	_lenMix   = 0x9e3779b97f4a7c15
	_checkMul = 0xbf58476d1ce4e5b9
	_alphabet = "ghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ."
	_period   = len(_alphabet)
	_chunk    = 4096
)

// _fill holds fill(i) for i in [0, _period+_chunk): the filler of record
// bytes [i, i+k) is _fill[i%_period:][:k] for k ≤ _chunk.
var _fill = func() (b [_period + _chunk]byte) {
	for i := range b {
		b[i] = _alphabet[i%_period]
	}
	return b
}()

// Encode writes the whole record of counter c of writer w into p, which
// must be at least MinSize bytes: the record is len(p) bytes. It does not
// allocate. After Encode, Stamp rewrites p for another counter of w.
func Encode(p []byte, w int, c uint64) error {
	if err := checkArgs(len(p), w, c); err != nil {
		return err
	}
	n := len(p)
	p[4] = ' '
	p[17] = ' '
	for i := _headSize; i < n-10; {
		k := copy(p[i:n-10], _fill[i%_period:])
		i += k
	}
	p[n-10] = ' '
	p[n-1] = '\n'
	stamp(p, uint32(w), c)
	return nil
}

// Stamp rewrites the head and check of p for counter c of writer w: the
// filler does not depend on either, so p is then the record Encode would
// write. It does O(1) work and does not allocate.
// REQUIRES: p holds a record Encode wrote (any writer, any counter), of
// len(p) bytes.
func Stamp(p []byte, w int, c uint64) error {
	if len(p) < MinSize || uint(w) >= MaxWriters || c > MaxCounter {
		return checkArgs(len(p), w, c)
	}
	stamp(p, uint32(w), c)
	return nil
}

// Append appends the n-byte record of counter c of writer w to dst.
func Append(dst []byte, w int, c uint64, n int) ([]byte, error) {
	if err := checkArgs(n, w, c); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, n)
	dst = dst[:len(dst)+n]
	return dst, Encode(dst[len(dst)-n:], w, c)
}

func checkArgs(n, w int, c uint64) error {
	switch {
	case n < MinSize:
		return fmt.Errorf("%w: %d bytes", ErrSize, n)
	case w < 0 || w >= MaxWriters:
		return fmt.Errorf("%w: %d", ErrWriter, w)
	case c > MaxCounter:
		return fmt.Errorf("%w: %d", ErrCounter, c)
	}
	return nil
}

func stamp(p []byte, w uint32, c uint64) {
	n := len(p)
	// The writer's 4 digits and the counter's top 4 in one conversion.
	wc := hex8(w<<16 | uint32(c>>32))
	binary.LittleEndian.PutUint32(p[0:4], uint32(wc))
	binary.LittleEndian.PutUint32(p[5:9], uint32(wc>>32))
	binary.LittleEndian.PutUint64(p[9:17], hex8(uint32(c)))
	binary.LittleEndian.PutUint64(p[n-9:n-1], hex8(check(w, c, n)))
}

// check is the check of the n-byte record of counter c of writer w: the
// high half of (z ^ z>>29) × _checkMul, z = (w<<48 | c) XOR n×_lenMix.
func check(w uint32, c uint64, n int) uint32 {
	z := uint64(w)<<48 | c
	z ^= uint64(n) * _lenMix
	z = (z ^ z>>29) * _checkMul
	return uint32(z >> 32)
}

// _hexPairs[b] is byte b as two lowercase hex digits, in the order a
// little-endian load reads them.
var _hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for i := range t {
		t[i] = uint16(digits[i>>4]) | uint16(digits[i&15])<<8
	}
	return t
}()

// hex8 returns v as 8 lowercase hex digits, most significant first, in the
// order a little-endian store writes them.
func hex8(v uint32) uint64 {
	return uint64(_hexPairs[v>>24]) | uint64(_hexPairs[v>>16&0xff])<<16 |
		uint64(_hexPairs[v>>8&0xff])<<32 | uint64(_hexPairs[v&0xff])<<48
}

// unhex8 parses the 8 lowercase hex digits in raw, as a little-endian load
// of them reads. ok is false unless every byte is one of 0-9a-f.
func unhex8(raw uint64) (v uint32, ok bool) {
	const (
		lo7  = 0x7f7f7f7f7f7f7f7f
		high = 0x8080808080808080
	)
	// Per byte b < 0x80, b+0x80-k has its high bit set iff b ≥ k; no
	// carry crosses bytes.
	b := raw & lo7
	digit := (b + 0x5050505050505050) &^ (b + 0x4646464646464646) // '0' ≤ b ≤ '9'
	alpha := (b + 0x1f1f1f1f1f1f1f1f) &^ (b + 0x1919191919191919) // 'a' ≤ b ≤ 'f'
	ok = (digit|alpha)&high == high && raw&high == 0
	x := bits.ReverseBytes64(raw) // first digit in the top byte
	// A digit's value is its low nibble, plus 9 for 'a'..'f' (bit 6 set).
	x = (x & 0x0f0f0f0f0f0f0f0f) + ((x>>6)&0x0101010101010101)*9
	x = (x | x>>4) & 0x00ff00ff00ff00ff // two digits a byte
	x = (x | x>>8) & 0x0000ffff0000ffff // four digits a half
	return uint32(x | x>>16), ok
}
