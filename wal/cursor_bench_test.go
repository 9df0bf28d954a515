package wal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAck acks records in order from one goroutine, and from every
// goroutine at once (seqs handed out by a shared counter, so acks arrive
// slightly out of order; run it with -benchtime=1000000x).
func BenchmarkAck(b *testing.B) {
	const n = 1 << 20
	l, err := Open(b.TempDir(), &Options{Sync: SyncNever, BufferSize: 64 << 20, SegmentSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := make([][]byte, 1024)
	for i := range recs {
		recs[i] = []byte{}
	}
	for range n / len(recs) {
		if _, err := l.AppendBatch(recs); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	name := 0
	cursor := func(b *testing.B) *Cursor {
		name++
		c, err := l.Cursor(fmt.Sprint("c", name))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	b.Run("goroutines=1", func(b *testing.B) {
		b.ReportAllocs()
		c := cursor(b)
		defer c.Close()
		s := uint64(1)
		for b.Loop() {
			if s == n {
				b.StopTimer()
				c.Close()
				c, s = cursor(b), 1
				b.StartTimer()
			}
			if err := c.Ack(s); err != nil {
				b.Fatal(err)
			}
			s++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		c := cursor(b)
		defer c.Close()
		var next atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				// Past n, acks are below the committed position: run
				// with -benchtime of at most n iterations (1048576x).
				s := next.Add(1)
				if s >= n {
					b.Errorf("more than %d acks: run with -benchtime=%dx or less", n-1, n-1)
					return
				}
				err := c.Ack(s)
				for errors.Is(err, ErrAckRange) {
					runtime.Gosched()
					err = c.Ack(s)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAppendWithCursor is the cost of cursor checkpoints on append
// throughput: 128-byte appends with no cursor, and with a cursor acking
// every record checkpointed every hour (acks, no checkpoints) and every
// second. Run it with a -benchtime of several seconds so that checkpoints
// happen.
func BenchmarkAppendWithCursor(b *testing.B) {
	rec := make([]byte, 128)
	for _, every := range []time.Duration{0, time.Hour, time.Second} {
		name := "cursor=none"
		if every > 0 {
			name = fmt.Sprintf("checkpoint=%v", every)
		}
		b.Run(name, func(b *testing.B) {
			// Retention keeps the disk use bounded whatever b.N is.
			l, err := Open(b.TempDir(), &Options{CheckpointEvery: max(every, time.Second), SegmentSize: 8 << 20,
				Retention: Retention{MaxBytes: 32 << 20, IgnoreCursors: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			var c *Cursor
			if every > 0 {
				if c, err = l.Cursor("c"); err != nil {
					b.Fatal(err)
				}
			}
			before := l.cursors.writes.Load()
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				seq, err := l.Append(rec)
				if err != nil {
					b.Fatal(err)
				}
				if c != nil {
					if err := c.Ack(seq); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(l.cursors.writes.Load()-before), "checkpoints")
		})
	}
}

// BenchmarkCheckpoint is one checkpoint write: temporary file, fdatasync,
// rename, directory fsync. Once per CheckpointEvery, this is what a
// cursor adds to the log's work (on the checkpointer goroutine, sharing no
// lock with Append).
func BenchmarkCheckpoint(b *testing.B) {
	l, err := Open(b.TempDir(), &Options{Sync: SyncNever, CheckpointEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c, err := l.Cursor("c")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		seq, err := l.Append(nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Ack(seq); err != nil {
			b.Fatal(err)
		}
		if err := c.checkpoint(seq + 1); err != nil { // records are in the page cache; durability is not the point here
			b.Fatal(err)
		}
	}
}
