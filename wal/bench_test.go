package wal_test

// Benchmarks for package wal, each beside the baseline it is judged
// against (see BENCHMARKS.md at the module root for method and results).
//
// Rules every benchmark here follows:
//   - files live in b.TempDir() (the disk, not tmpfs, on our machines);
//   - the timed region includes the final Close (or file Close): bytes still
//     in a buffer were not written;
//   - after the timer stops, the benchmark reads back what it wrote and
//     calls b.Fatal on any difference, so a fast-but-wrong run cannot pass;
//   - SetBytes counts payload bytes per record (the 16-byte frame header is
//     not counted), so MB/s compares like with like against the baselines.
//
// They run only with -bench; TestAppendAllocs is the only test.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/wal"
)

// A benchmark payload is size bytes: an 8-byte record counter, a 4-byte
// writer id, then filler that depends only on the size. Stamping the
// counter costs about a nanosecond and is done in every benchmark and
// baseline alike, so that read-back can check order and exact counts.
const (
	_stampCounter = 0
	_stampWriter  = 8
	_stampLen     = 12
)

// _batchLen is the number of records per AppendBatch call.
const _batchLen = 1000

// payloadTemplate returns a size-byte payload with its filler set and a
// zero stamp. REQUIRES: size >= _stampLen.
func payloadTemplate(size int) []byte {
	p := make([]byte, size)
	x := uint32(size)*2654435761 + 1
	for i := _stampLen; i < size; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return p
}

func stamp(p []byte, writer uint32, counter uint64) {
	binary.LittleEndian.PutUint64(p[_stampCounter:], counter)
	binary.LittleEndian.PutUint32(p[_stampWriter:], writer)
}

// recordChecker checks read-back records against the payload template:
// right size, filler intact, and per writer the counters 0, 1, 2, ... in
// order with no gap or repeat.
type recordChecker struct {
	tmpl []byte
	next map[uint32]uint64
	n    int
}

func newRecordChecker(size int) *recordChecker {
	return &recordChecker{tmpl: payloadTemplate(size), next: make(map[uint32]uint64)}
}

func (c *recordChecker) check(p []byte) error {
	if len(p) != len(c.tmpl) {
		return fmt.Errorf("record %d: %d bytes, want %d", c.n, len(p), len(c.tmpl))
	}
	if !bytes.Equal(p[_stampLen:], c.tmpl[_stampLen:]) {
		return fmt.Errorf("record %d: payload filler differs", c.n)
	}
	w := binary.LittleEndian.Uint32(p[_stampWriter:])
	got := binary.LittleEndian.Uint64(p[_stampCounter:])
	if want := c.next[w]; got != want {
		return fmt.Errorf("record %d: writer %d counter %d, want %d", c.n, w, got, want)
	}
	c.next[w]++
	c.n++
	return nil
}

// done checks the totals: n records in all, perWriter[w] from writer w.
func (c *recordChecker) done(n int, perWriter []int) error {
	if c.n != n {
		return fmt.Errorf("read %d records, want %d", c.n, n)
	}
	for w, k := range perWriter {
		if got := c.next[uint32(w)]; got != uint64(k) {
			return fmt.Errorf("writer %d: %d records, want %d", w, got, k)
		}
	}
	return nil
}

// verifyLog checks the closed log in dir holds exactly n records of size
// bytes, perWriter[w] of them from writer w in order: wal.Verify first
// (checksums, sequence numbers, footers), then a full read-back.
func verifyLog(b *testing.B, dir string, n, size int, perWriter []int) {
	b.Helper()
	rep, err := wal.Verify(dir, nil)
	if err != nil {
		b.Fatalf("verify: %v", err)
	}
	if rep.Records != uint64(n) || rep.Bytes != int64(n)*int64(size) || rep.Torn != nil {
		b.Fatalf("verify: %d records, %d payload bytes, torn %v; want %d records, %d bytes, no torn tail",
			rep.Records, rep.Bytes, rep.Torn, n, int64(n)*int64(size))
	}
	if n > 0 && (rep.FirstSeq != 1 || rep.NextSeq != uint64(n)+1) {
		b.Fatalf("verify: sequence numbers [%d, %d), want [1, %d)", rep.FirstSeq, rep.NextSeq, n+1)
	}
	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	c := newRecordChecker(size)
	for r.Next() {
		if r.Seq() != uint64(c.n)+1 {
			b.Fatalf("record %d has sequence number %d", c.n, r.Seq())
		}
		if err := c.check(r.Record()); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Err(); err != nil {
		b.Fatal(err)
	}
	if err := c.done(n, perWriter); err != nil {
		b.Fatal(err)
	}
}

// verifyFlatFile checks that the file at path is exactly n size-byte
// payloads from writer 0, in order (the baselines' output).
func verifyFlatFile(b *testing.B, path string, n, size int) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	if want := int64(n) * int64(size); fi.Size() != want {
		b.Fatalf("%s: %d bytes, want %d", path, fi.Size(), want)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	p := make([]byte, size)
	c := newRecordChecker(size)
	for range n {
		if _, err := io.ReadFull(br, p); err != nil {
			b.Fatal(err)
		}
		if err := c.check(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.done(n, []int{n}); err != nil {
		b.Fatal(err)
	}
}

func openLog(tb testing.TB, dir string, opts *wal.Options) *wal.Log {
	tb.Helper()
	l, err := wal.Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// reportRate reports b.N per second of timed run under unit.
func reportRate(b *testing.B, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, unit)
	}
}

// BenchmarkAppend appends one record per call from one goroutine, SyncNever.
// One op is one record.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{128} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			dir := b.TempDir()
			l := openLog(b, dir, &wal.Options{Sync: wal.SyncNever})
			p := payloadTemplate(size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				stamp(p, 0, uint64(i))
				if _, err := l.Append(p); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportRate(b, "rec/s")
			verifyLog(b, dir, b.N, size, []int{b.N})
		})
	}
}

// BenchmarkBaselineWritePerRecord is BenchmarkAppend's baseline: one
// write(2) per record to an O_APPEND file, same payloads, no framing.
func BenchmarkBaselineWritePerRecord(b *testing.B) {
	for _, size := range []int{128} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			benchWritePerRecord(b, size, false)
		})
	}
}

// benchWritePerRecord writes b.N records of size bytes to an O_APPEND file
// with one write(2) each, and an fsync(2) after each if sync, then verifies
// the file.
func benchWritePerRecord(b *testing.B, size int, sync bool) {
	path := filepath.Join(b.TempDir(), "baseline")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	p := payloadTemplate(size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stamp(p, 0, uint64(i))
		if _, err := f.Write(p); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if sync {
		reportRate(b, "acks/s")
	} else {
		reportRate(b, "rec/s")
	}
	verifyFlatFile(b, path, b.N, size)
}

// TestAppendAllocs pins Append's zero-allocation path on a warm log.
func TestAppendAllocs(t *testing.T) {
	l := openLog(t, t.TempDir(), &wal.Options{Sync: wal.SyncNever})
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	p := payloadTemplate(128)
	for range 1000 {
		if _, err := l.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	var appendErr error
	allocs := testing.AllocsPerRun(5000, func() {
		if _, err := l.Append(p); err != nil {
			appendErr = err
		}
	})
	if appendErr != nil {
		t.Fatal(appendErr)
	}
	if allocs != 0 {
		t.Errorf("Append of 128 bytes: %v allocs per call, want 0", allocs)
	}
}

// BenchmarkAppendBatch appends _batchLen records per AppendBatch call from
// one goroutine, SyncNever. One op is one record (the last call takes the
// remainder), so ns/op, MB/s and rec/s compare directly with
// BenchmarkAppend and BenchmarkBaselineSeqWrite.
func BenchmarkAppendBatch(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			dir := b.TempDir()
			l := openLog(b, dir, &wal.Options{Sync: wal.SyncNever})
			backing := bytes.Repeat(payloadTemplate(size), _batchLen)
			recs := make([][]byte, _batchLen)
			for i := range recs {
				recs[i] = backing[i*size : (i+1)*size : (i+1)*size]
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				batch := recs[:min(_batchLen, b.N-done)]
				for i, p := range batch {
					stamp(p, 0, uint64(done+i))
				}
				if _, err := l.AppendBatch(batch); err != nil {
					b.Fatal(err)
				}
				done += len(batch)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportRate(b, "rec/s")
			verifyLog(b, dir, b.N, size, []int{b.N})
		})
	}
}

// _seqChunk is the write size of BenchmarkBaselineSeqWrite; a multiple of
// every benchmarked record size.
const _seqChunk = 1 << 20

// BenchmarkBaselineSeqWrite is BenchmarkAppendBatch's baseline: the same
// payload bytes written with sequential 1 MiB write(2) calls through the
// page cache, then Close (no fsync): the buffered sequential-write ceiling.
func BenchmarkBaselineSeqWrite(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			benchSeqWrite(b, size, 0)
		})
	}
}

// BenchmarkBaselineSeqWriteSync is BenchmarkBaselineSeqWrite plus the
// durability work a SyncNever log does anyway: an fsync(2) after every
// 64 MiB (the log fdatasyncs each segment it seals) and one before Close
// (the log's Close syncs). It is the disk-bound ceiling for the same job.
func BenchmarkBaselineSeqWriteSync(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			benchSeqWrite(b, size, wal.DefaultSegmentSize)
		})
	}
}

// benchSeqWrite writes b.N size-byte payloads in _seqChunk writes, with an
// fsync after every syncEvery bytes and before Close if syncEvery > 0.
func benchSeqWrite(b *testing.B, size int, syncEvery int64) {
	path := filepath.Join(b.TempDir(), "baseline")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	per := _seqChunk / size
	chunk := bytes.Repeat(payloadTemplate(size), per)
	var unsynced int64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(per, b.N-done)
		for i := range k {
			stamp(chunk[i*size:], 0, uint64(done+i))
		}
		if _, err := f.Write(chunk[:k*size]); err != nil {
			b.Fatal(err)
		}
		done += k
		if unsynced += int64(k * size); syncEvery > 0 && unsynced >= syncEvery {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			unsynced = 0
		}
	}
	if syncEvery > 0 {
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportRate(b, "rec/s")
	verifyFlatFile(b, path, b.N, size)
}

// BenchmarkGroupCommit measures durable acknowledgements: each goroutine
// appends a 128-byte record and waits for it to be durable (SyncBatch),
// in a loop. One op is one acknowledged record; b.N is split across the
// goroutines. syncs/op is fdatasyncs per record before Close, acks/sync
// the records each covered, sync-mean-µs the mean fdatasync, cpu-µs/ack
// the process's CPU time (every goroutine) per acknowledged record.
//
// Just before and just after the timed region it measures the ceiling in
// the same directory (syncCeiling): with g appends outstanding, at most g
// acks ride on one fdatasync, so g ÷ (the median of a write of g records
// then fdatasync; the mean of the two probes) bounds acks/s; %ceiling is
// the log's rate against it.
func BenchmarkGroupCommit(b *testing.B) {
	const size = 128
	for _, g := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			dir := b.TempDir()
			l := openLog(b, dir, &wal.Options{Sync: wal.SyncBatch})
			ctx := context.Background()
			perWriter := make([]int, g)
			for w := range perWriter {
				perWriter[w] = b.N / g
				if w < b.N%g {
					perWriter[w]++
				}
			}
			errs := make([]error, g)
			var start, wg sync.WaitGroup
			start.Add(1)
			for w := range g {
				wg.Go(func() {
					p := payloadTemplate(size)
					start.Wait()
					for i := range perWriter[w] {
						stamp(p, uint32(w), uint64(i))
						seq, err := l.Append(p)
						if err == nil {
							err = l.WaitDurable(ctx, seq)
						}
						if err != nil {
							errs[w] = err
							return
						}
					}
				})
			}
			before := syncCeiling(b, dir, g*(size+frame.HeaderSize))
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuErr := sys.CPUTime()
			start.Done()
			wg.Wait()
			cpu1, _ := sys.CPUTime()
			st := l.Stats()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			for w, err := range errs {
				if err != nil {
					b.Fatalf("writer %d: %v", w, err)
				}
			}
			if st.DurableSeq != uint64(b.N) {
				b.Fatalf("DurableSeq %d after every ack, want %d", st.DurableSeq, b.N)
			}
			reportRate(b, "acks/s")
			b.ReportMetric(float64(st.Syncs)/float64(b.N), "syncs/op")
			if cpuErr == nil {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/ack")
			}
			if n := st.SyncLatency.Count(); n > 0 {
				b.ReportMetric(float64(st.SyncedRecords)/float64(n), "acks/sync")
				b.ReportMetric(float64(st.SyncLatency.Sum.Microseconds())/float64(n), "sync-mean-µs")
			}
			verifyLog(b, dir, b.N, size, perWriter)
			if p50 := (before + syncCeiling(b, dir, g*(size+frame.HeaderSize))) / 2; p50 > 0 && b.Elapsed() > 0 {
				ceiling := float64(g) / p50.Seconds()
				b.ReportMetric(ceiling, "ceiling-acks/s")
				b.ReportMetric(100*float64(b.N)/b.Elapsed().Seconds()/ceiling, "%ceiling")
			}
		})
	}
}

// syncCeiling returns the median time, on a file in dir, of the fastest way
// to make one group of records durable: one pwrite of n bytes at the tail,
// into blocks already written (no extent to convert), then fdatasync.
func syncCeiling(b *testing.B, dir string, n int) time.Duration {
	const rounds = 300
	f, err := os.OpenFile(filepath.Join(dir, "ceiling.probe"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, (rounds+1)*n)); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	p := make([]byte, n)
	lat := make([]time.Duration, rounds)
	for i := range lat {
		start := time.Now()
		if _, err := f.WriteAt(p, int64(i*n)); err != nil {
			b.Fatal(err)
		}
		if err := sys.Fdatasync(f); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat[rounds/2]
}

// BenchmarkBaselineWriteSync is the floor BenchmarkGroupCommit is read
// against: one goroutine, one write(2) of a 128-byte record then fsync(2)
// (os.File.Sync) per record, to an O_APPEND file; what a WAL without group
// commit gets. Its rate is about 1/(fsync latency) on this disk.
func BenchmarkBaselineWriteSync(b *testing.B) {
	for _, size := range []int{128} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			benchWritePerRecord(b, size, true)
		})
	}
}

// BenchmarkOpen times Open+Close of a 1 GiB log (default segment size,
// 1 KiB records) whose files are in the page cache. Open trusts sealed
// segments by their footer and CRC-scans the tail segment, so the cost
// depends on how full the tail is: tail=small has a few records in it,
// tail=full is within a few records of sealing (the worst case, 1 GiB plus
// a full segment).
func BenchmarkOpen(b *testing.B) {
	if testing.Short() {
		b.Skip("builds 2 GiB of logs")
	}
	const size = 1024
	segSize := int64(wal.DefaultSegmentSize)
	sealed := int((1 << 30) / segSize) // 1 GiB in sealed segments
	// A segment is sealed after the record that brings its data to within
	// a footer of SegmentSize.
	room := segSize - frame.FooterSize - frame.FileHeaderSize
	perSeg := int((room + frame.HeaderSize + size - 1) / (frame.HeaderSize + size))
	parent := b
	for _, tc := range []struct {
		name string
		tail int // records in the tail segment
	}{
		{"size=1GiB/tail=small", 100},
		{"size=1GiB/tail=full", perSeg - 100},
	} {
		n := sealed*perSeg + tc.tail
		var dir string
		b.Run(tc.name, func(b *testing.B) {
			if dir == "" {
				dir = filepath.Join(parent.TempDir(), "log")
				buildLog(b, dir, n, size)
			}
			var rec wal.Recovery
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := wal.Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				rec = l.Recovery()
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
			b.ReportMetric(float64(rec.ScannedBytes)/(1<<20), "scannedMiB")
			if rec.Segments != sealed+1 || rec.FirstSeq != 1 || rec.NextSeq != uint64(n)+1 || rec.TruncatedAt != -1 {
				b.Fatalf("recovery %+v: want %d segments, records [1, %d), nothing cut", rec, sealed+1, n+1)
			}
		})
	}
}

// buildLog writes n size-byte records into a new log in dir, closes it and
// verifies it. It stops the timer: it is setup.
func buildLog(b *testing.B, dir string, n, size int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	l := openLog(b, dir, &wal.Options{Sync: wal.SyncNever})
	backing := bytes.Repeat(payloadTemplate(size), _batchLen)
	recs := make([][]byte, _batchLen)
	for i := range recs {
		recs[i] = backing[i*size : (i+1)*size : (i+1)*size]
	}
	for done := 0; done < n; {
		batch := recs[:min(_batchLen, n-done)]
		for i, p := range batch {
			stamp(p, 0, uint64(done+i))
		}
		if _, err := l.AppendBatch(batch); err != nil {
			b.Fatal(err)
		}
		done += len(batch)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	verifyLog(b, dir, n, size, []int{n})
}

// BenchmarkOpenVerify times Open+Close of a 1 GiB log (default segment
// size, 1 KiB records, a small tail) whose files are in the page cache,
// with and without Options.VerifyOnOpen, which CRC-scans every sealed
// segment instead of trusting its footer. SetBytes is the log's size, so
// MB/s is the scan rate for verify=on.
func BenchmarkOpenVerify(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1 GiB log")
	}
	const size = 1024
	segSize := int64(wal.DefaultSegmentSize)
	sealed := int((1 << 30) / segSize)
	room := segSize - frame.FooterSize - frame.FileHeaderSize
	perSeg := int((room + frame.HeaderSize + size - 1) / (frame.HeaderSize + size))
	n := sealed*perSeg + 100
	var dir string
	parent := b
	for _, verify := range []bool{false, true} {
		b.Run(fmt.Sprintf("size=1GiB/verify=%v", map[bool]string{false: "off", true: "on"}[verify]), func(b *testing.B) {
			if dir == "" {
				dir = filepath.Join(parent.TempDir(), "log")
				buildLog(b, dir, n, size)
			}
			var rec wal.Recovery
			b.SetBytes(int64(n) * (frame.HeaderSize + size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := wal.Open(dir, &wal.Options{VerifyOnOpen: verify})
				if err != nil {
					b.Fatal(err)
				}
				rec = l.Recovery()
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
			b.ReportMetric(float64(rec.ScannedBytes)/(1<<20), "scannedMiB")
			if rec.Segments != sealed+1 || rec.NextSeq != uint64(n)+1 {
				b.Fatalf("recovery %+v: want %d segments, records [1, %d)", rec, sealed+1, n+1)
			}
		})
	}
}
