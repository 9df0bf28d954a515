package shmlog_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// benchLog runs fn b.N times on a log, starting a fresh log (timer
// stopped) every 1<<20 calls so that a long run does not fill the disk.
func benchLog(b *testing.B, fn func(l *shmlog.Log)) {
	dir := b.TempDir()
	open := func(round int) *shmlog.Log {
		l, err := shmlog.Open(fmt.Sprintf("%s/log%d", dir, round), nil)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	l := open(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i > 0 && i%(1<<20) == 0 {
			b.StopTimer()
			l.Close()
			os.RemoveAll(dir)
			os.MkdirAll(dir, 0o755)
			l = open(i >> 20)
			b.StartTimer()
		}
		fn(l)
	}
	b.StopTimer()
	l.Close()
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1, 128, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			p := make([]byte, size)
			b.SetBytes(int64(size))
			benchLog(b, func(l *shmlog.Log) {
				if _, err := l.Append(p); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkReserve(b *testing.B) {
	for _, size := range []int{1, 128, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			benchLog(b, func(l *shmlog.Log) {
				r, err := l.Reserve(size)
				if err != nil {
					b.Fatal(err)
				}
				r.Bytes()[0] = 1
				if err := r.Commit(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkAppendParallel appends 128-byte records from GOMAXPROCS
// goroutines of one process.
func BenchmarkAppendParallel(b *testing.B) {
	l, err := shmlog.Open(b.TempDir()+"/log", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetBytes(128)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := make([]byte, 128)
		for pb.Next() {
			if _, err := l.Append(p); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkLatency measures the time from a writer process's Append to a
// reader in this process (Reader.Wait) returning the record: each record
// carries the wall clock at its Append; the writer paces records 50µs
// apart. It reports the median and the 99th percentile.
func BenchmarkLatency(b *testing.B) {
	path := b.TempDir() + "/log"
	l, err := shmlog.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r, err := l.NewReader(0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	n := max(b.N, 100)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), _childEnv+"="+job{path: path, records: n, size: 16, fileSize: shmlog.DefaultMaxFileSize, hook: "stamp"}.String(), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	sc.Scan() // "open"
	lat := make([]time.Duration, 0, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ResetTimer()
	for range n {
		if err := r.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		rec, _, _ := r.Next()
		now := time.Now().UnixNano()
		lat = append(lat, time.Duration(now-int64(binary.LittleEndian.Uint64(rec.Payload))))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
