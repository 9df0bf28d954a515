package engine

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkFloor measures what any claim/copy/commit design with one total
// order costs on this machine, without the engine: the hardware floor the
// writer targets are held against. Each op appends 128 bytes to a shared
// 8 MiB buffer:
//
//   - xadd: one locked add on a shared word (the claim alone);
//   - xadd-copy: claim, then copy into the claimed range (no commit);
//   - xadd-copy-xadd: claim, copy, and a locked add to publish (the
//     minimum of a commit that the flusher can observe);
//   - mutex-copy: a sync.Mutex around a position and the copy;
//   - xadd-owncopy: the claim on the shared word (one total order), but the
//     copy goes to a buffer of the goroutine's own: a lower bound for a
//     design with per-core buffers merged by sequence number, before the
//     flusher's merge costs anything.
//
// g=1 is one goroutine; g=8 and g=64 use RunParallel as the writer
// benchmarks do. With 2 CPUs, contended ops pay a cache-line transfer
// between cores for the shared word and for the buffer lines the other
// core wrote last.
func BenchmarkFloor(b *testing.B) {
	const size, rec = 8 << 20, 128
	type state struct {
		_    [64]byte
		tail atomic.Uint64
		_    [56]byte
		com  atomic.Uint64
		_    [56]byte
		mu   sync.Mutex
		pos  uint64
	}
	src := make([]byte, rec)
	ops := []struct {
		name string
		op   func(s *state, buf []byte, own *ownBuf)
	}{
		{"xadd", func(s *state, _ []byte, _ *ownBuf) { s.tail.Add(rec) }},
		{"xadd-copy", func(s *state, buf []byte, _ *ownBuf) {
			p := (s.tail.Add(rec) - rec) & (size - 1)
			copy(buf[p:p+rec], src)
		}},
		{"xadd-copy-xadd", func(s *state, buf []byte, _ *ownBuf) {
			p := (s.tail.Add(rec) - rec) & (size - 1)
			copy(buf[p:p+rec], src)
			s.com.Add(rec)
		}},
		{"mutex-copy", func(s *state, buf []byte, _ *ownBuf) {
			s.mu.Lock()
			p := s.pos
			s.pos = (p + rec) & (size - 1)
			copy(buf[p:p+rec], src)
			s.mu.Unlock()
		}},
		{"xadd-owncopy", func(s *state, _ []byte, own *ownBuf) {
			s.tail.Add(rec)
			p := own.pos & (ownSize - 1)
			own.pos += rec
			copy(own.buf[p:p+rec], src)
		}},
	}
	for _, o := range ops {
		for _, g := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("op=%s/g=%d", o.name, g), func(b *testing.B) {
				s := new(state)
				buf := make([]byte, size)
				b.SetBytes(rec)
				if g == 1 {
					own := newOwnBuf()
					for b.Loop() {
						o.op(s, buf, own)
					}
				} else {
					b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						own := newOwnBuf()
						for pb.Next() {
							o.op(s, buf, own)
						}
					})
				}
				if o.name != "mutex-copy" && s.tail.Load() != uint64(b.N)*rec {
					b.Fatalf("tail %d after %d ops", s.tail.Load(), b.N)
				}
			})
		}
	}
}

// ownSize is the size of each goroutine's own buffer in xadd-owncopy.
const ownSize = 1 << 20

// ownBuf is a goroutine's own buffer and append position.
type ownBuf struct {
	buf []byte
	pos uint64
}

func newOwnBuf() *ownBuf { return &ownBuf{buf: make([]byte, ownSize)} }
