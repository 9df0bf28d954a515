package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// target opens one writer on one sink kind. output, called after the
// writer is closed, returns everything the sink received.
type target struct {
	name string
	open func(t *testing.T) (w Writer, output func() []byte)
}

func targets() []target {
	return []target{
		{"ring/file", func(t *testing.T) (Writer, func() []byte) {
			r, path := openRingFile(t, &RingOptions{Size: 64 << 10})
			return r, func() []byte { return readFile(t, path) }
		}},
		{"ring/file-8MiB", func(t *testing.T) (Writer, func() []byte) {
			r, path := openRingFile(t, nil)
			return r, func() []byte { return readFile(t, path) }
		}},
		{"ring/direct", func(t *testing.T) (Writer, func() []byte) {
			r, path := openRingFile(t, &RingOptions{Size: 64 << 10, Direct: true})
			return r, func() []byte { return readFile(t, path) }
		}},
		{"ring/tcp", func(t *testing.T) (Writer, func() []byte) {
			s := newTCPSink(t)
			r, err := NewRing(s.conn, &RingOptions{Size: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			return r, s.output
		}},
		{"ring/appendfile", func(t *testing.T) (Writer, func() []byte) {
			f := openAppend(t, "stream.log")
			r, err := NewRing(f, &RingOptions{Size: 128 << 10})
			if err != nil {
				t.Fatal(err)
			}
			return r, fileOutput(t, f)
		}},
		{"direct/file", func(t *testing.T) (Writer, func() []byte) {
			f := openAppend(t, "direct.log")
			return NewDirect(f), fileOutput(t, f)
		}},
		{"direct/tcp", func(t *testing.T) (Writer, func() []byte) {
			s := newTCPSink(t)
			return NewDirect(s.conn), s.output
		}},
		{"buffered/file", func(t *testing.T) (Writer, func() []byte) {
			f := openAppend(t, "buffered.log")
			return NewBuffered(f, 4096), fileOutput(t, f)
		}},
		{"buffered/tcp", func(t *testing.T) (Writer, func() []byte) {
			s := newTCPSink(t)
			return NewBuffered(s.conn, 0), s.output
		}},
		{"slab/file", func(t *testing.T) (Writer, func() []byte) {
			f := openAppend(t, "slab.log")
			w, err := NewSlab(f, &SlabOptions{Slabs: 2, SlabSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			return w, fileOutput(t, f)
		}},
		{"slab/tcp", func(t *testing.T) (Writer, func() []byte) {
			s := newTCPSink(t)
			w, err := NewSlab(s.conn, nil)
			if err != nil {
				t.Fatal(err)
			}
			return w, s.output
		}},
		{"mmap/file", func(t *testing.T) (Writer, func() []byte) {
			path := t.TempDir() + "/mmap.log"
			w, err := OpenMmap(path, &MmapOptions{ChunkSize: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			return w, func() []byte { return readFile(t, path) }
		}},
	}
}

// flusher is implemented by every writer here.
type flusher interface {
	Flush(context.Context) error
}

// TestConcurrentProducers has 1, 8 and 64 goroutines write tagged records
// to every writer and sink kind, and checks that after Close every record
// is present exactly once, whole, and in per-producer order, and that the
// counters agree.
func TestConcurrentProducers(t *testing.T) {
	for _, tg := range targets() {
		for _, g := range []int{1, 8, 64} {
			t.Run(fmt.Sprintf("%s/g=%d", tg.name, g), func(t *testing.T) {
				t.Parallel()
				per := max(150, 6000/g)
				if testing.Short() {
					per /= 4
				}
				w, output := tg.open(t)
				var wg sync.WaitGroup
				var total, totalBytes uint64
				var mu sync.Mutex
				for id := range g {
					wg.Go(func() {
						var b []byte
						var n uint64
						for c := range per {
							b = appendRecord(b[:0], id, c)
							if _, err := w.Write(b); err != nil {
								t.Errorf("producer %d: write %d: %v", id, c, err)
								return
							}
							n += uint64(len(b))
							// One producer also flushes and syncs, racing the others.
							if id == 0 && c%500 == 499 {
								if err := w.(flusher).Flush(context.Background()); err != nil {
									t.Errorf("flush: %v", err)
								}
							}
							if id == 0 && c%2000 == 1999 {
								if err := w.Sync(); err != nil {
									t.Errorf("sync: %v", err)
								}
							}
						}
						mu.Lock()
						total += uint64(per)
						totalBytes += n
						mu.Unlock()
					})
				}
				wg.Wait()
				if err := w.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				data := output()
				want := make([]int, g)
				for i := range want {
					want[i] = per
				}
				res := verifyRecords(t, data, g, true, false, want)
				if res.records != int(total) {
					t.Fatalf("%d records in output, wrote %d", res.records, total)
				}
				s := w.Stats()
				if s.Records != total || s.WrittenRecords != total || s.DroppedRecords != 0 {
					t.Errorf("stats records %d written %d dropped %d, want %d written", s.Records, s.WrittenRecords, s.DroppedRecords, total)
				}
				if s.Bytes != totalBytes || s.WrittenBytes != totalBytes || uint64(len(data)) != totalBytes {
					t.Errorf("stats bytes %d written %d, output %d, want %d", s.Bytes, s.WrittenBytes, len(data), totalBytes)
				}
				if s.QueuedBytes != 0 {
					t.Errorf("QueuedBytes = %d after Close", s.QueuedBytes)
				}
			})
		}
	}
}

// TestAfterClose checks Write, Flush and Sync after Close return ErrClosed
// and that Close is idempotent, for every writer.
func TestAfterClose(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			w, output := tg.open(t)
			if _, err := w.Write([]byte("one\n")); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("second close: %v", err)
			}
			if n, err := w.Write([]byte("two\n")); err != ErrClosed || n != 0 {
				t.Errorf("write after close = %d, %v; want 0, ErrClosed", n, err)
			}
			if err := w.Sync(); err != ErrClosed {
				t.Errorf("sync after close = %v; want ErrClosed", err)
			}
			if err := w.(flusher).Flush(context.Background()); err != ErrClosed {
				t.Errorf("flush after close = %v; want ErrClosed", err)
			}
			if got := string(output()); got != "one\n" {
				t.Errorf("output %q, want %q", got, "one\n")
			}
			if s := w.Stats(); s.Records != 1 || s.WrittenRecords != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestWriteCopies checks the writers copy p: changing it after Write
// returns does not change the output.
func TestWriteCopies(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			w, output := tg.open(t)
			p := []byte("original\n")
			mustWrite(t, w, p)
			copy(p, "CHANGED!\n")
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := string(output()); got != "original\n" {
				t.Errorf("output %q", got)
			}
		})
	}
}

// TestStrategyWriteErrors: Buffered and Slab make a sink write error
// sticky; Direct returns it for the one record.
func TestStrategyWriteErrors(t *testing.T) {
	failing := func() *collectWriter {
		return &collectWriter{fail: func(call, n int) (int, error) { return 0, syscall.EIO }}
	}
	t.Run("direct", func(t *testing.T) {
		d := NewDirect(failing())
		if _, err := d.Write([]byte("x\n")); !errors.Is(err, syscall.EIO) {
			t.Errorf("write = %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("close = %v", err)
		}
		if s := d.Stats(); s.Records != 0 {
			t.Errorf("failed write counted: %+v", s)
		}
	})
	t.Run("buffered", func(t *testing.T) {
		b := NewBuffered(failing(), 4096)
		mustWrite(t, b, []byte("x\n")) // buffered; the flush fails
		if err := b.Flush(context.Background()); !errors.Is(err, syscall.EIO) {
			t.Errorf("flush = %v", err)
		}
		if _, err := b.Write([]byte("y\n")); !errors.Is(err, syscall.EIO) {
			t.Errorf("write = %v", err)
		}
		if err := b.Close(); !errors.Is(err, syscall.EIO) {
			t.Errorf("close = %v", err)
		}
	})
	t.Run("slab", func(t *testing.T) {
		s, err := NewSlab(failing(), &SlabOptions{SlabSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, s, []byte("x\n")) // buffered; the flush fails
		if err := s.Flush(context.Background()); !errors.Is(err, syscall.EIO) {
			t.Errorf("flush = %v", err)
		}
		if _, err := s.Write([]byte("y\n")); !errors.Is(err, syscall.EIO) {
			t.Errorf("write = %v", err)
		}
		if err := s.Close(); !errors.Is(err, syscall.EIO) {
			t.Errorf("close = %v", err)
		}
	})
}

// TestMmapReopen appends through Mmap to a file whose size is not a
// multiple of the chunk, and checks the result and the trimmed length.
func TestMmapReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.log")
	var want []byte
	for round := range 3 {
		m, err := OpenMmap(path, &MmapOptions{ChunkSize: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		for c := range 700 {
			b = appendRecord(b[:0], 0, round*700+c)
			if _, err := m.Write(b); err != nil {
				t.Fatal(err)
			}
			want = append(want, b...)
		}
		if err := m.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatalf("file has %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

// TestSlabIdleFlush: a record in a partly filled slab is written when
// FlushInterval has passed on the Slab's clock, without Flush.
func TestSlabIdleFlush(t *testing.T) {
	const interval = 10 * time.Millisecond
	clk := newFakeClock()
	w := &collectWriter{}
	s, err := NewSlab(w, &SlabOptions{FlushInterval: interval, clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, s)
	start := clk.Now()
	mustWrite(t, s, []byte("idle\n"))
	waitFor(t, "the flush timer", func() bool {
		_, ok := clk.Next()
		return ok
	})
	if at, _ := clk.Next(); !at.Equal(start.Add(interval)) {
		t.Errorf("the flush timer fires %v after the start, want FlushInterval %v", at.Sub(start), interval)
	}
	if got := w.bytes(); len(got) != 0 {
		t.Errorf("written before FlushInterval: %q", got)
	}
	advanceUntil(t, clk, "the record written", func() bool { return string(w.bytes()) == "idle\n" })
}
