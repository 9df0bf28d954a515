package writer

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkProducer measures what a producer pays per Write when the sink
// costs nothing: the sink adds up the bytes and counts the calls, and the
// records are written as they are (no per-record encoding), so ns/op is the
// writer's own cost, Close (the hand-off of every buffered byte) included.
// bufio-mutex is the baseline a Ring must beat: a 64 KiB bufio.Writer under
// a sync.Mutex. After Close the sink must have received every byte, and
// the writer's Stats every record. The content and order of what a Ring
// writes are checked by its tests (TestOrderProducers and the peers'
// verifying runs), not here.
//
// With latency, every Write is timed and the p50, p99 and p99.9 of one
// Write are reported (the clock reads are then in ns/op).
//
//	go test -run '^$' -bench '^BenchmarkProducer$' -benchtime 1s -count 5 ./writer
func BenchmarkProducer(b *testing.B) {
	for _, g := range []int{1, 8, 64} {
		for _, size := range []int{1, 8, 64, 128} {
			for _, w := range []string{"ring", "slab", "bufio-mutex"} {
				b.Run(fmt.Sprintf("g=%d/size=%d/w=%s", g, size, w), func(b *testing.B) {
					benchProducer(b, g, size, w, false)
				})
			}
		}
	}
	b.Run("latency/g=64/size=64/w=ring", func(b *testing.B) { benchProducer(b, 64, 64, "ring", true) })
}

// countWriter is the sink of BenchmarkProducer.
type countWriter struct {
	bytes atomic.Uint64
	calls atomic.Uint64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.bytes.Add(uint64(len(p)))
	c.calls.Add(1)
	return len(p), nil
}

func benchProducer(b *testing.B, g, size int, name string, latency bool) {
	sink := &countWriter{}
	var w Writer
	switch name {
	case "ring":
		w = must(NewRing(sink, nil))
	case "slab":
		w = must(NewSlab(sink, nil))
	case "bufio-mutex":
		w = newBufioWriter(sink)
	default:
		b.Fatalf("unknown writer %q", name)
	}
	rec := benchRecord(size)
	var (
		mu  sync.Mutex
		all fineHist
	)
	write := func(pb interface{ Next() bool }) {
		var h *fineHist
		if latency {
			h = new(fineHist)
		}
		for pb.Next() {
			if latency {
				start := time.Now()
				w.Write(rec)
				h.record(time.Since(start))
			} else if _, err := w.Write(rec); err != nil {
				panic(err)
			}
		}
		if latency {
			mu.Lock()
			all.merge(h)
			mu.Unlock()
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	if g == 1 {
		write(&loop{n: b.N})
	} else {
		b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) { write(pb) })
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if got, want := sink.bytes.Load(), uint64(b.N)*uint64(size); got != want {
		b.Fatalf("sink received %d bytes, want %d", got, want)
	}
	if b.N > 0 && sink.calls.Load() == 0 {
		b.Fatal("sink never called")
	}
	if name != "bufio-mutex" {
		if s := w.Stats(); s.Records != uint64(b.N) || s.WrittenRecords != s.Records || s.DroppedRecords != 0 {
			b.Fatalf("stats: %d accepted, %d written, %d dropped; want %d", s.Records, s.WrittenRecords, s.DroppedRecords, b.N)
		}
	}
	if latency {
		b.ReportMetric(float64(all.quantile(0.5)), "p50-ns")
		b.ReportMetric(float64(all.quantile(0.99)), "p99-ns")
		b.ReportMetric(float64(all.quantile(0.999)), "p99.9-ns")
	}
}

// loop is a testing.PB for the one-goroutine case: n iterations.
type loop struct{ n int }

func (l *loop) Next() bool {
	l.n--
	return l.n >= 0
}
