package writer

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/hist"
)

// Writer is what every writer in this package provides: Ring, Direct,
// Buffered, Slab and Mmap. It is a zapcore.WriteSyncer with Close and Stats.
type Writer interface {
	io.Writer
	Sync() error
	Close() error
	Stats() Stats
}

var (
	_ Writer = (*Direct)(nil)
	_ Writer = (*Buffered)(nil)
	_ Writer = (*Slab)(nil)
	_ Writer = (*Mmap)(nil)
)

// Exit closes each of ws in order, then ends the program with os.Exit(code).
// Use it where a program would call os.Exit or log.Fatal: deferred calls do
// not run on os.Exit, so records still buffered in a Ring would be lost. A
// Close error is reported on os.Stderr, since there is no caller left to
// return it to. Each Ring lets a failing sink retry at most its
// CloseTimeout; a write blocked in a sink that has no write deadline (see
// Ring.CloseContext) holds Exit until it returns.
//
//	logger.Print("cannot continue: ", err)
//	writer.Exit(1, ring) // instead of log.Fatal
func Exit(code int, ws ...io.Closer) {
	closeAll(os.Stderr, ws)
	os.Exit(code)
}

// closeAll closes ws in order and reports errors to errw.
func closeAll(errw io.Writer, ws []io.Closer) {
	for _, w := range ws {
		if err := w.Close(); err != nil {
			fmt.Fprintf(errw, "appendlog: close on exit: %v\n", err)
		}
	}
}

// await waits until cond returns true or a non-nil error, or ctx is done.
// cond is re-evaluated after every broadcast on b.
func await(ctx context.Context, b *engine.Broadcaster, cond func() (bool, error)) error {
	for {
		ch := b.Wait()
		if ok, err := cond(); ok || err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// batch is a buffer of whole records, for the writers that batch under a
// lock (Buffered, Slab).
type batch struct {
	buf  []byte
	recs uint64
}

func (b *batch) fits(n int) bool { return len(b.buf)+n <= cap(b.buf) }

func (b *batch) add(p []byte) {
	b.buf = append(b.buf, p...)
	b.recs++
}

func (b *batch) reset() {
	b.buf = b.buf[:0]
	b.recs = 0
}

// flushCounters counts what a batching writer handed to its sink. Any
// goroutine may read them.
type flushCounters struct {
	records, bytes atomic.Uint64
	flushes        atomic.Uint64
	syncs          atomic.Uint64
	latency        hist.Atomic
}

// write writes p, which holds recs whole records, to w in one call, timing
// it and counting it if it succeeds. A short write without an error
// (which io.Writer forbids) is io.ErrShortWrite, as in bufio.
func (c *flushCounters) write(w io.Writer, p []byte, recs uint64) error {
	start := time.Now()
	n, err := w.Write(p)
	c.latency.Record(time.Since(start))
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return err
	}
	c.flushes.Add(1)
	c.records.Add(recs)
	c.bytes.Add(uint64(len(p)))
	return nil
}

// fill copies the counters into s.
func (c *flushCounters) fill(s *Stats) {
	s.WrittenRecords = c.records.Load()
	s.WrittenBytes = c.bytes.Load()
	s.Flushes = c.flushes.Load()
	s.Syncs = c.syncs.Load()
	s.FlushLatency = c.latency.Snapshot()
}
