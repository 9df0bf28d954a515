package wal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/sys"
)

// _scanLogBytes is the size of the warm log BenchmarkScan reads.
const _scanLogBytes = 128 << 20

// BenchmarkScan reads a warm log (in the page cache) from its start with a
// Reader of the open Log (mapped segments, every CRC checked): one
// iteration is one record. Beside it, pread reads the same segment bytes
// in 1 MiB chunks with nothing decoded: the ceiling. Every record read is
// checked for sequence number and length, and every 64th decoded with
// internal/payload; a full check of every payload runs before the timer.
func BenchmarkScan(b *testing.B) {
	for _, size := range []int{128, 1024} {
		dir := b.TempDir()
		l, err := Open(dir, &Options{Sync: SyncNever})
		if err != nil {
			b.Fatal(err)
		}
		n := _scanLogBytes / (size + frame.HeaderSize)
		p := make([]byte, 0, size)
		for i := range n {
			p, _ = payload.Append(p[:0], 0, uint64(i), size)
			if _, err := l.Append(p); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		scanCheckAll(b, l, n, size)
		b.Run(fmt.Sprintf("size=%d/reader", size), func(b *testing.B) {
			r := mustReader(b, l)
			next := uint64(1)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !r.Next() {
					if r.Err() != nil || next != uint64(n)+1 {
						b.Fatalf("stopped at %d of %d: %v", next, n, r.Err())
					}
					r.Close()
					r, next = mustReader(b, l), 1
					if !r.Next() {
						b.Fatal(r.Err())
					}
				}
				rec := r.Record()
				if r.Seq() != next || len(rec) != size {
					b.Fatalf("record %d: seq %d, %d bytes", next, r.Seq(), len(rec))
				}
				if next&63 == 0 {
					if _, c, err := payload.Decode(rec); err != nil || c != next-1 {
						b.Fatalf("record %d: counter %d: %v", next, c, err)
					}
				}
				next++
			}
			b.StopTimer()
			r.Close()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rec/s")
		})
		b.Run(fmt.Sprintf("size=%d/pread", size), func(b *testing.B) {
			segs, _, _, err := listSegments(l.opts.fsys, dir)
			if err != nil {
				b.Fatal(err)
			}
			var files []*os.File
			for _, s := range segs {
				f, err := os.Open(filepath.Join(dir, s.name))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				files = append(files, f)
			}
			buf := make([]byte, 1<<20)
			fs := int64(size + frame.HeaderSize)
			fi, off, have, used := 0, int64(headerPage), int64(0), int64(0)
			records := 0
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if used+fs > have || records == n {
					if records == n {
						fi, off, records = 0, headerPage, 0
					}
					off += used
					k, _ := files[fi].ReadAt(buf, off)
					if int64(k) < fs {
						fi++
						if fi == len(files) {
							b.Fatalf("files end after %d of %d records", records, n)
						}
						off = headerPage
						k, _ = files[fi].ReadAt(buf, off)
					}
					have, used = int64(k), 0
				}
				used += fs
				records++
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rec/s")
		})
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func mustReader(b *testing.B, l *Log) *Reader {
	r, err := l.NewReader(0, nil)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// scanCheckAll reads the whole log once and checks every payload.
func scanCheckAll(b *testing.B, l *Log, n, size int) {
	r := mustReader(b, l)
	defer r.Close()
	k := 0
	for r.Next() {
		if _, c, err := payload.Decode(r.Record()); err != nil || c != uint64(k) || len(r.Record()) != size {
			b.Fatalf("record %d: counter %d: %v", k+1, c, err)
		}
		k++
	}
	if r.Err() != nil || k != n {
		b.Fatalf("read %d of %d records: %v", k, n, r.Err())
	}
}

// _loadBurst records every _loadEvery are BenchmarkReadLatency's load:
// 1M appends/s, paced by a sys.Timer (a time.Timer under 1 ms wakes about
// 1 ms late when the process goes idle, which made the load 1,000-record
// bursts every millisecond).
const (
	_loadBurst = 100
	_loadEvery = 100 * time.Microsecond
)

// BenchmarkReadLatency measures how long a record takes from Append to a
// Reader waiting in Wait (the same process): one iteration is one timed
// record. idle: nothing else is appended, each record waits for the last
// to arrive. load: another goroutine appends a million records a second
// beside the timed ones (_loadBurst every _loadEvery), and the rate it
// reached is reported as load-rec/s. Reports p50, p99 and p99.9 in µs.
// Every record the Reader gets is checked: sequence order, and the
// payload (writer, counter) with internal/payload.
func BenchmarkReadLatency(b *testing.B) {
	for _, load := range []bool{false, true} {
		name := "idle"
		if load {
			name = "load"
		}
		b.Run(name, func(b *testing.B) {
			l, err := Open(b.TempDir(), &Options{Sync: SyncNever})
			if err != nil {
				b.Fatal(err)
			}
			sent := make([]atomic.Int64, b.N)
			lat := make([]int64, 0, b.N)
			arrived := make(chan struct{}, 1)
			r, err := l.NewReader(0, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { // the Reader
				defer r.Close()
				next, counters := uint64(1), [2]uint64{}
				for len(lat) < b.N {
					if !r.Next() {
						if err := r.Err(); err != nil {
							b.Error(err)
							return
						}
						if err := r.Wait(ctx); err != nil {
							b.Error(err)
							return
						}
						continue
					}
					w, c, err := payload.Decode(r.Record())
					if err != nil || r.Seq() != next || w > 1 || c != counters[w] {
						b.Errorf("seq %d (want %d): writer %d counter %d: %v", r.Seq(), next, w, c, err)
						return
					}
					counters[w]++
					next++
					if w == 0 {
						lat = append(lat, time.Now().UnixNano()-sent[c].Load())
						select {
						case arrived <- struct{}{}:
						default:
						}
					}
				}
			})
			stop := make(chan struct{})
			var loaded atomic.Int64
			if load {
				wg.Go(func() { // 1M records/s: 100 every 100 µs, on a precise timer
					tm, err := sys.NewTimer()
					if err != nil {
						b.Error(err)
						return
					}
					defer tm.Close()
					p := make([]byte, 0, 128)
					start := time.Now()
					for c, slot := uint64(0), time.Duration(0); ; slot += _loadEvery {
						select {
						case <-stop:
							return
						default:
						}
						if err := tm.Sleep(slot - time.Since(start)); err != nil {
							b.Error(err)
							return
						}
						for range _loadBurst {
							p, _ = payload.Append(p[:0], 1, c, 128)
							if _, err := l.Append(p); err != nil {
								return
							}
							c++
						}
						loaded.Store(int64(c))
					}
				})
			}
			probeTimer, err := sys.NewTimer()
			if err != nil {
				b.Fatal(err)
			}
			defer probeTimer.Close()
			p := make([]byte, 0, 128)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, _ = payload.Append(p[:0], 0, uint64(i), 128)
				sent[i].Store(time.Now().UnixNano())
				if _, err := l.Append(p); err != nil {
					b.Fatal(err)
				}
				if load {
					// Spread the timed records over the load.
					if err := probeTimer.Sleep(20 * time.Microsecond); err != nil {
						b.Fatal(err)
					}
				} else {
					select {
					case <-arrived:
					case <-time.After(10 * time.Second):
						b.Fatalf("record %d did not arrive", i)
					}
				}
			}
			b.StopTimer()
			if load {
				b.ReportMetric(float64(loaded.Load())/b.Elapsed().Seconds(), "load-rec/s")
			}
			for len(arrived) > 0 || false {
				<-arrived
			}
			close(stop)
			wgDone := make(chan struct{})
			go func() { wg.Wait(); close(wgDone) }()
			select {
			case <-wgDone:
			case <-time.After(30 * time.Second):
				cancel()
				<-wgDone
				b.Fatal("the Reader did not get every timed record")
			}
			cancel()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			if len(lat) != b.N {
				b.Fatalf("%d latencies for %d records", len(lat), b.N)
			}
			slices.Sort(lat)
			q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))]) / 1e3 }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(q(0.999), "p99.9-µs")
		})
	}
}

// BenchmarkSeek positions a Reader at a random record of a 1 GiB log of
// 1 KiB records and reads it: one iteration is NewReader, Next (checked
// with internal/payload) and Close. The first positioning in each segment
// builds its sparse index by walking the frame headers; those are timed
// apart first and reported as cold-p50-µs and cold-max-µs; then the log
// is reopened and the first positioning in each segment (its index loaded
// from its index file) is reported as reopen-p50-µs and reopen-max-µs.
func BenchmarkSeek(b *testing.B) {
	const size = 1024
	dir := b.TempDir()
	l, err := Open(dir, &Options{Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { l.Close() }()
	n := (1 << 30) / (size + frame.HeaderSize)
	p := make([]byte, 0, size)
	for i := range n {
		p, _ = payload.Append(p[:0], 0, uint64(i), size)
		if _, err := l.Append(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	seek := func(seq uint64) {
		r, err := l.NewReader(seq, nil)
		if err != nil {
			b.Fatal(err)
		}
		if !r.Next() || r.Seq() != seq {
			b.Fatalf("seek %d: got %d: %v", seq, r.Seq(), r.Err())
		}
		if _, c, err := payload.Decode(r.Record()); err != nil || c != seq-1 {
			b.Fatalf("seek %d: counter %d: %v", seq, c, err)
		}
		r.Close()
	}
	// Cold: the last record of each segment, the longest walk.
	l.segs.mu.Lock()
	var ends []uint64
	for _, s := range l.segs.mu.segs {
		if e := s.end.Load(); e != 0 {
			ends = append(ends, e-1)
		}
	}
	l.segs.mu.Unlock()
	coldSeeks := func() []time.Duration {
		var cold []time.Duration
		for _, seq := range ends {
			t0 := time.Now()
			seek(seq)
			cold = append(cold, time.Since(t0))
		}
		slices.Sort(cold)
		return cold
	}
	cold := coldSeeks()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	if l, err = Open(dir, &Options{Sync: SyncNever}); err != nil {
		b.Fatal(err)
	}
	reopen := coldSeeks()
	x := uint64(88172645463325252)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		seek(1 + x%uint64(n))
	}
	b.StopTimer()
	if len(cold) > 0 {
		b.ReportMetric(float64(cold[len(cold)/2].Microseconds()), "cold-p50-µs")
		b.ReportMetric(float64(cold[len(cold)-1].Microseconds()), "cold-max-µs")
		b.ReportMetric(float64(reopen[len(reopen)/2].Microseconds()), "reopen-p50-µs")
		b.ReportMetric(float64(reopen[len(reopen)-1].Microseconds()), "reopen-max-µs")
	}
}
