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
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/appendlog/appendlog/writer"
)

// Asynchronous log writers. Each contender wraps either a new file or one
// of the do-nothing sinks (checking or counting); its close must leave
// every accepted record handed to the sink, the file synced (fsync or
// fdatasync) and closed: the timed region ends with it.

// _diodeSlots is the capacity of the diode, in records: the record
// capacity of an 8 MiB Ring (writer.DefaultSize) at 128 B per record.
const _diodeSlots = writer.DefaultSize / recSize

// nullSink is a do-nothing sink: a *checkSink or a *countSink.
type nullSink interface {
	io.Writer
	Sync() error
}

// asyncTarget is where a contender writes: the file at path (in a
// directory of its own, which rotating contenders fill with backups), or
// sink.
type asyncTarget struct {
	path string
	sink nullSink
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
	name     string
	gaps     bool // drops records by design (checked: delivered + dropped == written)
	fileOnly bool // rotates files: runs only with sink=file
	open     func(t asyncTarget) (*asyncWriter, error)
}

// _rotateBytes is the file size at which the rotating contenders rotate.
const _rotateBytes = 64 << 20

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
		return openRing(t, nil)
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
	{name: "appendlog-ring-rotate", fileOnly: true, open: func(t asyncTarget) (*asyncWriter, error) {
		return openRing(t, &writer.RingOptions{Rotate: &writer.Rotate{MaxBytes: _rotateBytes}})
	}},
	{name: "zap-lumberjack", fileOnly: true, open: func(t asyncTarget) (*asyncWriter, error) {
		// zap's documented rotation setup: the core's WriteSyncer is
		// zapcore.AddSync(&lumberjack.Logger{...}); zap calls its Write
		// once per entry, and lumberjack writes each under its mutex.
		lj := &lumberjack.Logger{Filename: t.path, MaxSize: _rotateBytes >> 20}
		ws := zapcore.AddSync(lj)
		return &asyncWriter{
			write: func(rec []byte) error { return writeErr(ws.Write(rec)) },
			// lumberjack neither syncs nor exposes its file (AddSync's
			// Sync does nothing): close it, then fsync every file it
			// wrote, as the other contenders' close does.
			close: func() error { return errors.Join(lj.Close(), syncDir(filepath.Dir(t.path))) },
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

// openRing opens the Ring contender: OpenFile (positional writes; Close
// fdatasyncs and closes) or NewRing over the do-nothing sink.
func openRing(t asyncTarget, opts *writer.RingOptions) (*asyncWriter, error) {
	var r *writer.Ring
	var err error
	if t.sink != nil {
		r, err = writer.NewRing(t.sink, opts)
	} else {
		r, err = writer.OpenFile(t.path, opts)
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
}

// syncDir fsyncs every file in dir.
func syncDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return err
		}
	}
	return nil
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

// asyncSinks are the sinks of BenchmarkAsync: a new file, the checking
// do-nothing sink ("null") and the counting one ("count").
var asyncSinks = []string{"file", "null", "count"}

// asyncRun is one run of a contender: open, write (run), close, verify.
// run writes the records and returns how many each writer wrote; the
// timer hooks bracket the timed region (open and verification are
// outside it).
//
// With sink=file or sink=null the records read back must be whole,
// unduplicated and in each writer's order. With sink=count only the bytes
// are counted: they must be recSize times the records delivered, and the
// content and order are checked by a separate run of the same shape (see
// asyncVerify). For a contender that never drops, every record must be
// there. For the diode, records may be missing, and the missing ones are
// compared with the drops its Alerter reported: the Alerter may
// over-report by one per collision (see collisionCounter), more is a
// failure; records neither delivered nor reported are counted as lost
// (see README.md: a collision can leave a hole that strands the records
// after it when the writer is closed).
func asyncRun(tb testing.TB, c asyncContender, sinkName string, writers int,
	run func(w *asyncWriter) ([]uint64, error), start, stop func()) asyncResult {
	tb.Helper()
	chk := newChecker(writers, c.gaps)
	var (
		t   asyncTarget
		cnt *countSink
	)
	switch sinkName {
	case "null":
		t.sink = &checkSink{c: chk}
	case "count":
		cnt = &countSink{}
		t.sink = cnt
	case "file":
		t.path = filepath.Join(tb.TempDir(), "app.log")
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
		dir := filepath.Dir(t.path)
		if err := checkDir(chk, dir); err != nil {
			tb.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			tb.Fatal(err)
		}
	}
	var r asyncResult
	if c.gaps {
		r.dropped = w.dropped()
		if w.collisions != nil {
			r.collisions = w.collisions()
		}
	}
	delivered := func() uint64 { return chk.records }
	if cnt != nil {
		n := cnt.bytes.Load()
		if n%recSize != 0 {
			tb.Fatalf("%s: verification failed: the sink received %d bytes, not a whole number of %d-byte records", c.name, n, recSize)
		}
		if n > 0 && cnt.calls.Load() == 0 {
			tb.Fatalf("%s: verification failed: %d bytes in no call", c.name, n)
		}
		if !c.gaps && n != recSize*sum(written) {
			tb.Fatalf("%s: verification failed: the sink received %d records, %d were written", c.name, n/recSize, sum(written))
		}
		delivered = func() uint64 { return n / recSize }
	} else if !c.gaps {
		if err := chk.finish(written, 0); err != nil {
			tb.Fatalf("%s: verification failed: %v", c.name, err)
		}
		return r
	} else if err := chk.finishGaps(written); err != nil {
		tb.Fatalf("%s: verification failed: %v", c.name, err)
	}
	if !c.gaps {
		return r
	}
	unaccounted := int64(sum(written)) - int64(delivered()) - int64(r.dropped)
	if unaccounted < -int64(r.collisions) {
		tb.Fatalf("%s: verification failed: %d written, %d delivered, %d reported dropped: %d too many (%d collisions)",
			c.name, sum(written), delivered(), r.dropped, -unaccounted, r.collisions)
	}
	if unaccounted > 0 {
		r.lost = uint64(unaccounted)
	}
	return r
}

// _verifyRecords bounds the records of a verifying run: enough to wrap
// an 8 MiB ring four times.
const _verifyRecords = 1 << 18

// asyncVerify is the verifying run that goes with a sink=count run of n
// records on g goroutines: the same contender, the same goroutine count and
// record size, at most _verifyRecords records, through the checking sink
// (content, order and count checked). It is not timed.
func asyncVerify(tb testing.TB, c asyncContender, g, n int) {
	tb.Helper()
	per := max(1, min(n, _verifyRecords)/g)
	asyncRun(tb, c, "null", g,
		func(w *asyncWriter) ([]uint64, error) { return testWrites(g, per, w.write) },
		func() {}, func() {})
}

// BenchmarkAsync: b.N records of 128 B written by g goroutines, through
// each contender, to a file, the checking sink or the counting sink. The
// timed region ends after the contender's close (every record handed
// over, the file synced and closed). A sink=count run is followed, outside
// the timer, by a verifying run of the same shape (asyncVerify).
func BenchmarkAsync(b *testing.B) {
	for _, sink := range asyncSinks {
		for _, g := range []int{1, 8, 64} {
			_, actual := goroutinesFor(g)
			for _, c := range asyncContenders {
				if c.fileOnly && sink != "file" {
					continue
				}
				b.Run(fmt.Sprintf("sink=%s/g=%d/%s", sink, actual, c.name), func(b *testing.B) {
					b.SetBytes(recSize)
					b.ReportAllocs()
					r := asyncRun(b, c, sink, actual,
						func(w *asyncWriter) ([]uint64, error) { return benchWrites(b, g, w.write) },
						b.ResetTimer, b.StopTimer)
					if sink == "count" {
						asyncVerify(b, c, actual, b.N)
					}
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
	for _, sink := range asyncSinks {
		for _, c := range asyncContenders {
			if c.fileOnly && sink != "file" {
				continue
			}
			t.Run(sink+"/"+c.name, func(t *testing.T) {
				r := asyncRun(t, c, sink, g,
					func(w *asyncWriter) ([]uint64, error) { return testWrites(g, n, w.write) },
					func() {}, func() {})
				if sink == "count" {
					asyncVerify(t, c, g, g*n)
				}
				if r.dropped+r.lost > 0 {
					t.Logf("%s: of %d records, %d reported dropped, %d lost unreported, %d collisions", c.name, g*n, r.dropped, r.lost, r.collisions)
				}
			})
		}
	}
}
