package writer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/ceiling"
	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/sys"
)

// Benchmarks compare Ring with the reference strategies and two baselines
// (one os.File.Write per record; a 64 KiB bufio.Writer under a mutex). The
// timed region includes Close (flush and fdatasync, for every writer and
// baseline alike), so buffered bytes are paid for; after it the output is
// verified (record count from Stats and the file's length). With a real
// file, ns/op is then dominated by the disk; the write-ns/op and
// flushed-ns/op metrics isolate the producers' cost and the hand-off to the
// OS.
//
//	go test -run '^$' -bench . -benchtime 2s -count 3 ./writer
//
// g is the number of writing goroutines: g=1 is a plain loop, larger g
// uses RunParallel with SetParallelism(g/GOMAXPROCS).

// osFileWriter is the baseline of one write(2) per record. Close syncs,
// as every writer's Close does.
type osFileWriter struct{ f *os.File }

func (w osFileWriter) Write(p []byte) (int, error)     { return w.f.Write(p) }
func (w osFileWriter) Flush(ctx context.Context) error { return nil }
func (w osFileWriter) Sync() error                     { return syncFunc(w.f)() }
func (w osFileWriter) Close() error                    { return w.Sync() }
func (w osFileWriter) Stats() Stats                    { return Stats{} }

// bufioWriter is the baseline of a bufio.Writer under a mutex. Close
// flushes and syncs.
type bufioWriter struct {
	mu   sync.Mutex
	bw   *bufio.Writer
	sync func() error
}

func newBufioWriter(w io.Writer) *bufioWriter {
	return &bufioWriter{bw: bufio.NewWriterSize(w, 64<<10), sync: syncFunc(w)}
}

func (w *bufioWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, err := w.bw.Write(p)
	w.mu.Unlock()
	return n, err
}

func (w *bufioWriter) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Flush()
}

func (w *bufioWriter) Sync() error {
	if err := w.Flush(context.Background()); err != nil {
		return err
	}
	return w.sync()
}

func (w *bufioWriter) Close() error { return w.Sync() }
func (w *bufioWriter) Stats() Stats { return Stats{} }

// benchSink is where a benchmarked writer writes: "null" (io.Discard, or
// /dev/null for writers that need a file) or "file" (a new file).
type benchSink struct {
	kind string
	path string
	f    *os.File // for the writers that take an io.Writer
}

func newBenchSink(b *testing.B, kind string) *benchSink {
	s := &benchSink{kind: kind}
	if kind == "file" {
		s.path = filepath.Join(b.TempDir(), "bench.log")
	}
	return s
}

// writer returns the io.Writer to hand to a strategy: io.Discard or an
// O_APPEND file.
func (s *benchSink) writer(b *testing.B) io.Writer {
	if s.kind == "null" {
		return io.Discard
	}
	return s.file(b)
}

// file returns an O_APPEND file: /dev/null or the sink's file.
func (s *benchSink) file(b *testing.B) *os.File {
	path := s.path
	if s.kind == "null" {
		path = os.DevNull
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	s.f = f
	return f
}

// done closes the sink's file, checks its size and removes it.
func (s *benchSink) done(b *testing.B, want int64) {
	if s.f != nil {
		s.f.Close()
	}
	if s.kind != "file" {
		return
	}
	// The file and, with rotation, its backups: every file in its
	// directory.
	dir := filepath.Dir(s.path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			b.Fatal(err)
		}
		size += fi.Size()
	}
	if size != want {
		b.Fatalf("files have %d bytes, want %d", size, want)
	}
	for _, e := range ents {
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

type benchStrategy struct {
	name  string
	sinks []string // sink kinds it runs on
	open  func(b *testing.B, s *benchSink) Writer
	stats bool // Stats counts records
}

// must panics on an error from a constructor; benchmarks only.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func benchStrategies() []benchStrategy {
	both := []string{"null", "file"}
	return []benchStrategy{
		{"ring", both, func(b *testing.B, s *benchSink) Writer {
			if s.kind == "file" {
				return must(OpenFile(s.path, nil))
			}
			return must(NewRing(io.Discard, nil))
		}, true},
		// Rotation on, at the size issue #17 measures it with.
		{"ring-rotate", []string{"file"}, func(b *testing.B, s *benchSink) Writer {
			return must(OpenFile(s.path, &RingOptions{Rotate: &Rotate{MaxBytes: 64 << 20}}))
		}, true},
		{"ring-direct", []string{"file"}, func(b *testing.B, s *benchSink) Writer {
			return must(OpenFile(s.path, &RingOptions{Direct: true}))
		}, true},
		{"direct", both, func(b *testing.B, s *benchSink) Writer { return NewDirect(s.writer(b)) }, true},
		{"buffered", both, func(b *testing.B, s *benchSink) Writer { return NewBuffered(s.writer(b), 0) }, true},
		{"slab", both, func(b *testing.B, s *benchSink) Writer { return must(NewSlab(s.writer(b), nil)) }, true},
		{"mmap", []string{"file"}, func(b *testing.B, s *benchSink) Writer { return must(OpenMmap(s.path, nil)) }, true},
		{"osfile", both, func(b *testing.B, s *benchSink) Writer { return osFileWriter{s.file(b)} }, false},
		{"bufio64k", both, func(b *testing.B, s *benchSink) Writer {
			return newBufioWriter(s.writer(b))
		}, false},
	}
}

// record returns a size-byte text record ending in a newline.
func benchRecord(size int) []byte {
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte('a' + i%26)
	}
	rec[size-1] = '\n'
	return rec
}

// runWrites writes rec b.N times from g goroutines, then closes w, all
// timed, and stops the timer. Besides ns/op (Close included: flush and
// fdatasync), it reports write-ns/op (until the last Write returned) and
// flushed-ns/op (until Flush returned: every byte handed to the OS), and
// returns the time until Flush returned.
func runWrites(b *testing.B, w Writer, rec []byte, g int) (flushed time.Duration) {
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if g == 1 {
		for range b.N {
			if _, err := w.Write(rec); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := w.Write(rec); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wrote := time.Since(start)
	if err := w.(flusher).Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	flushed = time.Since(start)
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(wrote.Nanoseconds())/float64(b.N), "write-ns/op")
	b.ReportMetric(float64(flushed.Nanoseconds())/float64(b.N), "flushed-ns/op")
	return flushed
}

func verifyBench(b *testing.B, w Writer, st benchStrategy, s *benchSink, size int) {
	if st.stats {
		ws := w.Stats()
		if ws.Records != uint64(b.N) || ws.WrittenRecords != uint64(b.N) {
			b.Fatalf("stats: %d records, %d written; want %d", ws.Records, ws.WrittenRecords, b.N)
		}
	}
	s.done(b, int64(b.N)*int64(size))
}

// BenchmarkWrite: 128-byte records to a null sink and to a file, 1, 8 and
// 64 goroutines.
func BenchmarkWrite(b *testing.B) {
	const size = 128
	rec := benchRecord(size)
	for _, sink := range []string{"null", "file"} {
		for _, st := range benchStrategies() {
			if !contains(st.sinks, sink) {
				continue
			}
			for _, g := range []int{1, 8, 64} {
				b.Run(fmt.Sprintf("sink=%s/w=%s/size=%d/g=%d", sink, st.name, size, g), func(b *testing.B) {
					s := newBenchSink(b, sink)
					w := st.open(b, s)
					runWrites(b, w, rec, g)
					verifyBench(b, w, st, s, size)
				})
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// BenchmarkFileLarge: 1 KiB and 4 KiB records to a file through a Ring with
// buffered I/O and with O_DIRECT, against the ceilings: 4 MiB writes of new
// bytes (internal/ceiling, Fresh), buffered or aligned O_DIRECT from huge
// pages, fdatasync'd at the end as the Ring's Close does.
//
// The disk of a shared machine drifts by 10-20% within minutes, so each
// Ring case measures its ceiling right after itself, over the same bytes
// (timer stopped), and reports the pair:
//
//   - ceiling-MB/s and pct-ceiling: every byte handed to the OS, the Ring
//     until its Flush returned, the ceiling until its last write returned.
//     With O_DIRECT that is the device; buffered, it is the page cache (a
//     run writes 1-3 GB, below this VM's 4.8 GB dirty limit).
//   - pct-ceiling-synced: both until durable (the Ring's Close, the
//     ceiling's fdatasync), as ns/op is timed. Buffered, this measures
//     write-back, which swings 2-4x between runs here.
//
// The ceiling cases at the end also give the ceiling of a buffer written
// over and over (Reused), which new bytes cannot reach on the test VM.
func BenchmarkFileLarge(b *testing.B) {
	for _, size := range []int{1 << 10, 4 << 10} {
		rec := benchRecord(size)
		for _, direct := range []bool{false, true} {
			name := "ring"
			if direct {
				name = "ring-direct"
			}
			for _, g := range []int{1, 8} {
				b.Run(fmt.Sprintf("w=%s/size=%d/g=%d", name, size, g), func(b *testing.B) {
					// The ceiling first: each starts after the previous
					// case's file was deleted, as the Ring does.
					n := int64(b.N) * int64(size)
					wrote, synced := runCeiling(b, direct, n, ceiling.Fresh, false)
					s := newBenchSink(b, "file")
					r, err := OpenFile(s.path, &RingOptions{Direct: direct})
					if err != nil {
						b.Skip(err)
					}
					flushed := runWrites(b, r, rec, g)
					elapsed := b.Elapsed()
					verifyBench(b, r, benchStrategy{stats: true}, s, size)
					// The process's peak: run one case alone to read it.
					if rss, err := sys.MaxRSS(); err == nil {
						b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MiB")
					}
					b.ReportMetric(float64(n)/wrote.Seconds()/1e6, "ceiling-MB/s")
					b.ReportMetric(100*wrote.Seconds()/flushed.Seconds(), "pct-ceiling")
					b.ReportMetric(100*synced.Seconds()/elapsed.Seconds(), "pct-ceiling-synced")
				})
			}
		}
	}
	for _, c := range []struct {
		direct bool
		mode   ceiling.Mode
	}{{false, ceiling.Fresh}, {true, ceiling.Fresh}, {true, ceiling.Reused}} {
		name := "ceiling-buffered"
		if c.direct {
			name = "ceiling-direct"
		}
		b.Run(fmt.Sprintf("w=%s/bytes=%s/size=%d", name, c.mode, ceilingWrite), func(b *testing.B) {
			b.SetBytes(ceilingWrite)
			runCeiling(b, c.direct, int64(b.N)*ceilingWrite, c.mode, true)
		})
	}
}

// ceilingWrite is the ceilings' write: the Ring's largest O_DIRECT write at
// the default Size (larger writes carry more here: 1 MiB 2155 MB/s, 2 MiB
// 2290, 4 MiB 2325).
const ceilingWrite = DefaultSize / 2

// runCeiling writes n bytes (rounded up to a block) to a new file with
// ceiling.Write in ceilingWrite writes and fdatasyncs it, checks the file,
// and returns the time until the last write returned and until the sync
// did. With timed, b's timer times the writes and the sync (reset first);
// otherwise b's timer is left alone.
func runCeiling(b *testing.B, direct bool, n int64, mode ceiling.Mode, timed bool) (wrote, synced time.Duration) {
	n = (n + sys.BlockSize - 1) &^ (sys.BlockSize - 1)
	path := filepath.Join(b.TempDir(), "ceiling.log")
	f, err := ceiling.Create(path, direct)
	if err != nil {
		b.Fatal(err)
	}
	if timed {
		b.ResetTimer()
		b.StartTimer()
	}
	start := time.Now()
	err = ceiling.Write(f, n, ceilingWrite, mode)
	wrote = time.Since(start)
	if err == nil {
		err = sys.Fdatasync(f) // as the Ring's Close does
	}
	synced = time.Since(start)
	if timed {
		b.StopTimer()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := ceiling.Check(path, n, ceilingWrite, mode); err != nil {
		b.Fatal(err)
	}
	os.Remove(path)
	return wrote, synced
}

// sleepSink takes delay (or more: a sleep ends when its goroutine next
// gets a CPU) per Write, and adds up the time spent in Write.
type sleepSink struct {
	delay time.Duration
	busy  atomic.Int64 // nanoseconds spent in Write
}

func (s *sleepSink) Write(p []byte) (int, error) {
	start := time.Now()
	time.Sleep(s.delay)
	s.busy.Add(int64(time.Since(start)))
	return len(p), nil
}

// BenchmarkDropLatency: 8 producers write 128-byte records to a Ring in
// Drop mode whose sink takes 1 ms per write. Each Write is timed; the
// benchmark reports the producers' latency quantiles (upper bounds, from a
// power-of-two histogram) and the share of records dropped, with what says
// whether the drops were the sink's bandwidth: sink-busy-pct, the share of
// the run the sink spent in Write (100 when the flusher kept it busy), and
// KiB-per-write (MaxWrite, 1 MiB for the 8 MiB ring, when it batched fully)
// and ms-per-write (over 1 when the sleeping flusher waited for a CPU).
func BenchmarkDropLatency(b *testing.B) {
	for _, size := range []int{64 << 10, DefaultSize} {
		b.Run(fmt.Sprintf("ring=%d/size=128/g=8", size), func(b *testing.B) {
			rec := benchRecord(128)
			sink := &sleepSink{delay: time.Millisecond}
			r := must(NewRing(sink, &RingOptions{Size: size, Full: Drop}))
			var mu sync.Mutex
			var all fineHist
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				h := new(fineHist)
				for pb.Next() {
					start := time.Now()
					r.Write(rec)
					h.record(time.Since(start))
				}
				mu.Lock()
				all.merge(h)
				mu.Unlock()
			})
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			elapsed := time.Since(start)
			s := r.Stats()
			if s.Records != uint64(b.N) || s.WrittenRecords+s.DroppedRecords != s.Records {
				b.Fatalf("stats: %d accepted, %d written + %d dropped; want %d", s.Records, s.WrittenRecords, s.DroppedRecords, b.N)
			}
			b.ReportMetric(float64(all.quantile(0.5)), "p50-ns")
			b.ReportMetric(float64(all.quantile(0.99)), "p99-ns")
			b.ReportMetric(float64(all.quantile(0.999)), "p99.9-ns")
			b.ReportMetric(100*float64(s.DroppedRecords)/float64(s.Records), "%dropped")
			b.ReportMetric(100*float64(sink.busy.Load())/float64(elapsed), "sink-busy-pct")
			if s.Flushes > 0 {
				b.ReportMetric(float64(s.WrittenBytes)/float64(s.Flushes)/1024, "KiB-per-write")
				b.ReportMetric(float64(sink.busy.Load())/float64(s.Flushes)/1e6, "ms-per-write")
			}
		})
	}
}

// fineHist is a latency histogram with 8 ns buckets up to 16 us (the
// Ring's power-of-two Histogram cannot tell 600 ns from 1000 ns), and
// power-of-two buckets above. Quantiles are bucket upper bounds.
type fineHist struct {
	lin  [2048]uint64 // [i*8, i*8+8) ns
	over Histogram
	n    uint64
}

const _fineStep = 8

func (h *fineHist) record(d time.Duration) {
	h.n++
	if i := int(d / _fineStep); i >= 0 && i < len(h.lin) {
		h.lin[i]++
		return
	}
	h.over.Record(d)
}

func (h *fineHist) merge(o *fineHist) {
	for i, c := range o.lin {
		h.lin[i] += c
	}
	h.over.Merge(&o.over)
	h.n += o.n
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *fineHist) quantile(q float64) time.Duration {
	need := uint64(q * float64(h.n))
	var seen uint64
	for i, c := range h.lin {
		seen += c
		if seen > need {
			return time.Duration(i+1) * _fineStep
		}
	}
	// In the overflow: the same rank, counted from its first sample.
	return h.over.Quantile(float64(need-seen) / float64(h.over.Count()))
}

// nullSink is an engine.Sink that discards everything.
type nullSink struct{}

func (nullSink) Write(pos uint64, a, b []byte) error { return nil }
func (nullSink) Sync() error                         { return nil }

// BenchmarkEngineFloor measures the engine's claim+put+commit alone (a null
// engine.Sink, no Ring wrapper), for comparison with sink=null/w=ring: the
// difference is the Ring's own cost per Write.
func BenchmarkEngineFloor(b *testing.B) {
	rec := benchRecord(128)
	for _, g := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("size=128/g=%d", g), func(b *testing.B) {
			e := must(engine.New(engine.Config{Size: DefaultSize, FlushInterval: DefaultFlushInterval}, nullSink{}))
			write := func() {
				c, err := e.Claim(len(rec), 1)
				if err != nil {
					panic(err)
				}
				e.Put(c, 0, rec)
				e.Commit(c)
			}
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			b.ResetTimer()
			if g == 1 {
				for range b.N {
					write()
				}
			} else {
				b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						write()
					}
				})
			}
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
