package payload

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Decode checks that p is exactly one whole record, byte for byte, and
// returns its writer and counter. A record that does not check out is
// reported as a *Problem (Kind Torn, Foreign, Checksum or Filler; Byte is
// the first wrong byte when known; Record and Offset are -1, for the caller
// to fill). Decode does not allocate unless p is damaged.
func Decode(p []byte) (w int, c uint64, err error) {
	n := len(p)
	if n < MinSize {
		return 0, 0, damaged(Torn, 0, -1, "%d bytes, shorter than the smallest record (%d)", n, MinSize)
	}
	// The writer's 4 digits and the counter's top 4 in one conversion.
	wc, ok1 := unhex8(uint64(binary.LittleEndian.Uint32(p[0:4])) | uint64(binary.LittleEndian.Uint32(p[5:9]))<<32)
	lo, ok2 := unhex8(binary.LittleEndian.Uint64(p[9:17]))
	if !ok1 || !ok2 || p[4] != ' ' || p[17] != ' ' {
		return 0, 0, damaged(Foreign, firstNonHead(p), -1, "not a record: starts %q", clip(p, _headSize))
	}
	wv := wc >> 16
	w, c = int(wv), uint64(wc&0xffff)<<32|uint64(lo)
	if p[n-1] != '\n' {
		return w, c, damaged(Torn, n-1, w, "writer %d counter %d: %d bytes not ending in a newline: ends %q", w, c, n, tail(p, 12))
	}
	want := check(wv, c, n)
	if raw := binary.LittleEndian.Uint64(p[n-9 : n-1]); raw != hex8(want) || p[n-10] != ' ' {
		sum, ok := unhex8(raw)
		if !ok || p[n-10] != ' ' {
			return w, c, damaged(Torn, n-10, w, "writer %d counter %d: %d bytes ending %q, not in a check", w, c, n, tail(p, 12))
		}
		if i := fillerMismatch(p); i >= 0 {
			return w, c, damaged(Filler, i, w, "writer %d counter %d: byte %d of %d is %q, want %q", w, c, i, n, p[i], _fill[i%_period])
		}
		return w, c, damaged(Checksum, n-9, w, "writer %d counter %d: check %08x, want %08x for its head and %d bytes", w, c, sum, want, n)
	}
	if i := fillerMismatch(p); i >= 0 {
		return w, c, damaged(Filler, i, w, "writer %d counter %d: byte %d of %d is %q, want %q", w, c, i, n, p[i], _fill[i%_period])
	}
	return w, c, nil
}

// fillerMismatch returns the index of the first filler byte of p that is
// wrong, or -1.
func fillerMismatch(p []byte) int {
	end := len(p) - 10
	for i := _headSize; i < end; {
		k := min(end-i, _chunk)
		want := _fill[i%_period:][:k]
		if !bytes.Equal(p[i:i+k], want) {
			for j := range k {
				if p[i+j] != want[j] {
					return i + j
				}
			}
		}
		i += k
	}
	return -1
}

// firstNonHead returns the first byte of p that cannot belong to a head.
func firstNonHead(p []byte) int {
	for i := range min(len(p), _headSize) {
		b := p[i]
		switch i {
		case 4, 17:
			if b != ' ' {
				return i
			}
		default:
			if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
				return i
			}
		}
	}
	return 0
}

func damaged(k Kind, at, w int, format string, args ...any) *Problem {
	return &Problem{Kind: k, Record: -1, Offset: -1, Byte: at, Writer: w, Detail: fmt.Sprintf(format, args...)}
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
