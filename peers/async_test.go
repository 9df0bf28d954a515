package peers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog/diode"
	"go.uber.org/zap/zapcore"

	"github.com/appendlog/appendlog/writer"
)

// Asynchronous log writers. Each contender wraps either a new file or the
// do-nothing (checking) sink; its close must leave every accepted record
// handed to the sink, the file synced (fsync or fdatasync) and closed: the
// timed region ends with it.

// _diodeSlots is the capacity of the diode, in records: the record
// capacity of an 8 MiB Ring (writer.DefaultSize) at 128 B per record.
const _diodeSlots = writer.DefaultSize / recSize

// asyncTarget is where a contender writes: the file at path, or sink.
type asyncTarget struct {
	path string
	sink *checkSink
}

func (t asyncTarget) dest() (io.Writer, *os.File, error) {
	if t.sink != nil {
		return t.sink, nil, nil
	}
	f, err := os.OpenFile(t.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	return f, f, err
}

// asyncWriter is an open contender.
type asyncWriter struct {
	write   func(rec []byte) error
	close   func() error
	dropped func() uint64 // nil for writers that never drop
	// collisions counts ring slots the writer skipped without storing a
	// record in them, but which its drop count includes (see
	// countCollisions). nil for writers other than the diode.
	collisions func() uint64
}

type asyncContender struct {
	name string
	gaps bool // drops records by design (checked: delivered + dropped == written)
	open func(t asyncTarget) (*asyncWriter, error)
}

func writeErr(n int, err error) error {
	if err == nil && n != recSize {
		err = fmt.Errorf("short write: %d of %d bytes", n, recSize)
	}
	return err
}

// closeFile syncs and closes f, if there is one.
func closeFile(f *os.File) error {
	if f == nil {
		return nil
	}
	return errors.Join(f.Sync(), f.Close())
}

// syncCloser makes Close sync the file first: the diode writer closes its
// sink but does not sync it.
type syncCloser struct{ f *os.File }

func (s syncCloser) Write(p []byte) (int, error) { return s.f.Write(p) }
func (s syncCloser) Close() error                { return closeFile(s.f) }

var asyncContenders = []asyncContender{
	{name: "appendlog-ring", open: func(t asyncTarget) (*asyncWriter, error) {
		var r *writer.Ring
		var err error
		if t.sink != nil {
			r, err = writer.NewRing(t.sink, nil)
		} else {
			r, err = writer.OpenFile(t.path, nil) // positional writes; Close fdatasyncs and closes
		}
		if err != nil {
			return nil, err
		}
		return &asyncWriter{
			write: func(rec []byte) error { return writeErr(r.Write(rec)) },
			close: func() error {
				if err := r.Close(); err != nil {
					return err
				}
				if st := r.Stats(); st.WrittenRecords != st.Records || st.DroppedRecords != 0 {
					return fmt.Errorf("ring stats: %d records accepted, %d written, %d dropped", st.Records, st.WrittenRecords, st.DroppedRecords)
				}
				return nil
			},
		}, nil
	}},
	{name: "appendlog-slab", open: func(t asyncTarget) (*asyncWriter, error) {
		w, f, err := t.dest()
		if err != nil {
			return nil, err
		}
		s, err := writer.NewSlab(w, nil)
		if err != nil {
			return nil, errors.Join(err, closeFile(f))
		}
		return &asyncWriter{
			write: func(rec []byte) error { return writeErr(s.Write(rec)) },
			close: func() error { return errors.Join(s.Close(), closeFile(f)) }, // Slab.Close flushes and syncs
		}, nil
	}},
	{name: "zap-buffered", open: func(t asyncTarget) (*asyncWriter, error) {
		var ws zapcore.WriteSyncer = t.sink
		var f *os.File
		if t.sink == nil {
			_, file, err := t.dest()
			if err != nil {
				return nil, err
			}
			ws, f = file, file
		}
		z := &zapcore.BufferedWriteSyncer{WS: ws} // defaults: 256 KiB buffer, 30 s flush interval
		return &asyncWriter{
			write: func(rec []byte) error { return writeErr(z.Write(rec)) },
			// Stop flushes and calls WS.Sync (fsync); the file is ours to close.
			close: func() error { return errors.Join(z.Stop(), closeFileNoSync(f)) },
		}, nil
	}},
	{name: "zerolog-diode", gaps: true, open: func(t asyncTarget) (*asyncWriter, error) {
		w, f, err := t.dest()
		if err != nil {
			return nil, err
		}
		if f != nil {
			w = syncCloser{f}
		}
		var dropped atomic.Uint64
		col := countCollisions()
		// A waiter (pollInterval 0), as in the package doc's example.
		d := diode.NewWriter(w, _diodeSlots, 0, func(missed int) { dropped.Add(uint64(missed)) })
		return &asyncWriter{
			write: func(rec []byte) error { return writeErr(d.Write(rec)) },
			close: func() error {
				defer col.restore()
				return d.Close() // drains what it can, then closes (syncCloser: syncs) the file
			},
			dropped:    dropped.Load,
			collisions: col.n.Load,
		}, nil
	}},
	{name: "bufio-mutex", open: func(t asyncTarget) (*asyncWriter, error) {
		w, f, err := t.dest()
		if err != nil {
			return nil, err
		}
		var mu sync.Mutex
		bw := bufio.NewWriterSize(w, 64<<10)
		return &asyncWriter{
			write: func(rec []byte) error {
				mu.Lock()
				n, err := bw.Write(rec)
				mu.Unlock()
				return writeErr(n, err)
			},
			close: func() error {
				mu.Lock()
				defer mu.Unlock()
				return errors.Join(bw.Flush(), closeFile(f))
			},
		}, nil
	}},
	{name: "write-per-record", open: func(t asyncTarget) (*asyncWriter, error) {
		w, f, err := t.dest() // O_APPEND: each write(2) appends one whole record
		if err != nil {
			return nil, err
		}
		return &asyncWriter{
			write: func(rec []byte) error { return writeErr(w.Write(rec)) },
			close: func() error { return closeFile(f) },
		}, nil
	}},
}

// collisionCounter counts the "Diode set collision" lines the diode writes
// to the standard logger. On a collision a diode producer abandons the slot
// index it drew and draws another; the reader later skips the abandoned
// index and reports it to the Alerter as a dropped record, though no
// record was lost. The verification subtracts these from the reported
// drops (and the benchmark reports them as collisions/op); other log lines
// pass through.
type collisionCounter struct {
	n    atomic.Uint64
	prev io.Writer
}

func countCollisions() *collisionCounter {
	c := &collisionCounter{prev: log.Writer()}
	log.SetOutput(c)
	return c
}

func (c *collisionCounter) Write(p []byte) (int, error) {
	if n := bytes.Count(p, []byte("Diode set collision")); n > 0 {
		c.n.Add(uint64(n))
		return len(p), nil
	}
	return c.prev.Write(p)
}

func (c *collisionCounter) restore() { log.SetOutput(c.prev) }

func closeFileNoSync(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close()
}

// asyncResult is what a run of a dropping contender (the diode) found.
type asyncResult struct {
	dropped    uint64 // reported to the Alerter
	collisions uint64 // "Diode set collision" lines
	lost       uint64 // neither delivered nor reported dropped
}

// asyncRun is one run of a contender: open, write (run), close, verify.
// run writes the records and returns how many each writer wrote; the
// timer hooks bracket the timed region (open and verification are
// outside it).
//
// For every contender the records read back must be whole, unduplicated
// and in each writer's order. For a contender that never drops, every
// record must be there. For the diode, records may be missing, and the
// missing ones are compared with the drops its Alerter reported: the
// Alerter may over-report by one per collision (see collisionCounter),
// more is a failure; records neither delivered nor reported are counted
// as lost (see README.md: a collision can leave a hole that strands the
// records after it when the writer is closed).
func asyncRun(tb testing.TB, c asyncContender, sinkName string, writers int,
	run func(w *asyncWriter) ([]uint64, error), start, stop func()) asyncResult {
	tb.Helper()
	chk := newChecker(writers, c.gaps)
	var t asyncTarget
	switch sinkName {
	case "null":
		t.sink = &checkSink{c: chk}
	case "file":
		t.path = filepath.Join(tb.TempDir(), "log")
	default:
		tb.Fatalf("unknown sink %q", sinkName)
	}
	w, err := c.open(t)
	if err != nil {
		tb.Fatal(err)
	}
	start()
	written, werr := run(w)
	cerr := w.close()
	stop()
	if err := errors.Join(werr, cerr); err != nil {
		tb.Fatal(err)
	}
	if t.path != "" {
		if err := checkFile(chk, t.path); err != nil {
			tb.Fatal(err)
		}
		if err := os.Remove(t.path); err != nil {
			tb.Fatal(err)
		}
	}
	var r asyncResult
	if !c.gaps {
		if err := chk.finish(written, 0); err != nil {
			tb.Fatalf("%s: verification failed: %v", c.name, err)
		}
		return r
	}
	r.dropped = w.dropped()
	if w.collisions != nil {
		r.collisions = w.collisions()
	}
	if err := chk.finishGaps(written); err != nil {
		tb.Fatalf("%s: verification failed: %v", c.name, err)
	}
	unaccounted := int64(sum(written)) - int64(chk.records) - int64(r.dropped)
	if unaccounted < -int64(r.collisions) {
		tb.Fatalf("%s: verification failed: %d written, %d read back, %d reported dropped: %d too many (%d collisions)",
			c.name, sum(written), chk.records, r.dropped, -unaccounted, r.collisions)
	}
	if unaccounted > 0 {
		r.lost = uint64(unaccounted)
	}
	return r
}

// BenchmarkAsync: b.N records of 128 B written by g goroutines, through
// each contender, to a file or the do-nothing sink. The timed region ends
// after the contender's close (every record handed over, the file synced
// and closed).
func BenchmarkAsync(b *testing.B) {
	for _, sink := range []string{"file", "null"} {
		for _, g := range []int{1, 8, 64} {
			_, actual := goroutinesFor(g)
			for _, c := range asyncContenders {
				b.Run(fmt.Sprintf("sink=%s/g=%d/%s", sink, actual, c.name), func(b *testing.B) {
					b.SetBytes(recSize)
					b.ReportAllocs()
					r := asyncRun(b, c, sink, actual,
						func(w *asyncWriter) ([]uint64, error) { return benchWrites(b, g, w.write) },
						b.ResetTimer, b.StopTimer)
					if c.gaps {
						n := float64(b.N)
						b.ReportMetric(float64(r.dropped)/n, "dropped/op")
						b.ReportMetric(float64(r.lost)/n, "lost/op")
						b.ReportMetric(float64(r.collisions)/n, "collisions/op")
						if r.lost > 0 {
							b.Logf("%d of %d records neither delivered nor reported dropped (%d reported dropped, %d collisions)",
								r.lost, b.N, r.dropped, r.collisions)
						}
					}
				})
			}
		}
	}
}

// TestAsync runs every contender once on a small workload, through the
// benchmarks' harness and verification.
func TestAsync(t *testing.T) {
	const g, n = 4, 3000
	for _, sink := range []string{"file", "null"} {
		for _, c := range asyncContenders {
			t.Run(sink+"/"+c.name, func(t *testing.T) {
				r := asyncRun(t, c, sink, g,
					func(w *asyncWriter) ([]uint64, error) { return testWrites(g, n, w.write) },
					func() {}, func() {})
				if r.dropped+r.lost > 0 {
					t.Logf("%s: of %d records, %d reported dropped, %d lost unreported, %d collisions", c.name, g*n, r.dropped, r.lost, r.collisions)
				}
			})
		}
	}
}
