package sys

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	_ "unsafe" // go:linkname, for procPin below
)

// procPin and procUnpin are the runtime's: between them the goroutine
// cannot be preempted or move to another P, and procPin returns the P's id
// (below GOMAXPROCS). Used by sync.Pool; the runtime keeps them linkable
// (go.dev/issue/67401). Invariant: nothing between the two calls blocks,
// allocates or calls into the scheduler. Only the benchmark below uses
// them: it measures a design the writer does not (yet) have.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// BenchmarkPerPFloor measures the floor of a Ring front end with one buffer
// per P (issue #18's "per-P front end that keeps global order through its
// commit sequence"), beside the shapes it would replace, each appending a
// 128-byte record:
//
//   - ring: what writer.Ring does (a CAS claim on a shared tail, the copy
//     into the shared 8 MiB buffer, a locked add to commit);
//   - mutex: a sync.Mutex around a position and the copy into a 64 KiB
//     buffer that stays in cache (bufio.Writer under a mutex);
//   - perp-*: pinned to its P, the goroutine takes a global sequence number
//     (one locked add on a shared word: the total order), writes it and
//     the record into its P's own 256 KiB buffer, and publishes the P's
//     position with an atomic store (perp-store) or a locked add
//     (perp-xadd), or not at all (perp-nocommit: no flusher could see it);
//   - pin: procPin and procUnpin alone.
//
// What a flusher would then pay (merging the P buffers by sequence number,
// a copy of every byte) comes on top and is not measured here.
func BenchmarkPerPFloor(b *testing.B) {
	const size, rec, mutexSize, pSize = 8 << 20, 128, 64 << 10, 256 << 10
	type pbuf struct {
		_   [64]byte
		com atomic.Uint64
		_   [56]byte
		pos uint64
		buf []byte
	}
	type state struct {
		_    [64]byte
		tail atomic.Uint64
		_    [56]byte
		com  atomic.Uint64
		_    [56]byte
		mu   sync.Mutex
		pos  uint64
		ps   []*pbuf
		buf  []byte
	}
	src := make([]byte, rec)
	own := func(s *state) (*pbuf, uint64) {
		pb := s.ps[procPin()]
		seq := s.tail.Add(1)
		p := pb.pos & (pSize - 1)
		pb.pos += rec + 8
		binary.LittleEndian.PutUint64(pb.buf[p:], seq)
		copy(pb.buf[p+8:p+8+rec], src)
		return pb, pb.pos
	}
	ops := []struct {
		name string
		op   func(s *state)
	}{
		{"ring", func(s *state) {
			t := s.tail.Load()
			for !s.tail.CompareAndSwap(t, t+rec) {
				t = s.tail.Load()
			}
			p := t & (size - 1)
			copy(s.buf[p:p+rec], src)
			s.com.Add(rec)
		}},
		{"mutex", func(s *state) {
			s.mu.Lock()
			p := s.pos
			s.pos = (p + rec) & (mutexSize - 1)
			copy(s.buf[p:p+rec], src)
			s.mu.Unlock()
		}},
		{"perp-store", func(s *state) {
			pb, pos := own(s)
			pb.com.Store(pos)
			procUnpin()
		}},
		{"perp-xadd", func(s *state) {
			pb, _ := own(s)
			pb.com.Add(rec + 8)
			procUnpin()
		}},
		{"perp-nocommit", func(s *state) {
			own(s)
			procUnpin()
		}},
		{"pin", func(*state) {
			procPin()
			procUnpin()
		}},
	}
	for _, o := range ops {
		for _, g := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("op=%s/g=%d", o.name, g), func(b *testing.B) {
				s := &state{buf: make([]byte, size)}
				for range runtime.GOMAXPROCS(0) {
					s.ps = append(s.ps, &pbuf{buf: make([]byte, pSize+rec+8)})
				}
				b.SetBytes(rec)
				if g == 1 {
					for b.Loop() {
						o.op(s)
					}
				} else {
					b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							o.op(s)
						}
					})
				}
				// Check what was appended: every record's sequence number
				// is in its P's buffer, each once.
				if o.name == "ring" && s.tail.Load() != uint64(b.N)*rec {
					b.Fatalf("tail %d after %d ops", s.tail.Load(), b.N)
				}
				if o.name != "ring" && o.name != "mutex" && o.name != "pin" {
					var n uint64
					for _, pb := range s.ps {
						n += pb.pos / (rec + 8)
					}
					if n != s.tail.Load() || n != uint64(b.N) {
						b.Fatalf("%d records in the P buffers, %d sequence numbers, %d ops", n, s.tail.Load(), b.N)
					}
				}
			})
		}
	}
}
