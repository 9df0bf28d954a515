package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/record"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/prometheus/client_golang/prometheus"
	rosewal "github.com/rosedblabs/wal"
	tidwal "github.com/tidwall/wal"

	"github.com/appendlog/appendlog/wal"
)

// Write-ahead logs. Each contender opens a log in a new directory,
// appends records (one per call, or batches), and closes; close must leave
// every record durable (the libraries differ in whether Close syncs, so
// each contender adds what its library needs). The records are then read
// back through the library's own reader: count, content, order.
//
// All logs use 64 MiB segments (appendlog's and raft-wal's default;
// tidwall/wal defaults to 20 MB and rosedblabs/wal to 1 GiB), except
// pebble's record.LogWriter, which writes one file (pebble rotates its WAL
// with the memtable, above the LogWriter).

const _segmentSize = 64 << 20

// walLog is an open contender. append adds recs (one call: one record, or
// one batch) and returns once they are accepted or, for a durable log, once
// they are durable. It is safe for concurrent use.
type walLog struct {
	append func(recs [][]byte) error
	close  func() error
}

type walContender struct {
	name string
	// open opens a log in dir; durable asks for every append to be
	// durable when it returns (the durable-acks benchmark), otherwise no
	// sync until close.
	open func(dir string, durable bool) (*walLog, error)
	// read reopens the closed log and feeds every record, in log order,
	// to visit.
	read func(dir string, visit func(rec []byte)) error
}

var walContenders = []walContender{
	{name: "appendlog", open: openAppendlog, read: readAppendlog},
	{name: "tidwall", open: openTidwall, read: readTidwall},
	{name: "rosedb", open: openRosedb, read: readRosedb},
	{name: "raft-wal", open: openRaftWAL, read: readRaftWAL},
	{name: "pebble", open: openPebble, read: readPebble},
}

// appendlog: SyncNever for throughput (Close flushes and fdatasyncs);
// group commit (SyncBatch, the default) with WaitDurable for durable acks.
func openAppendlog(dir string, durable bool) (*walLog, error) {
	opts := &wal.Options{Sync: wal.SyncNever}
	if durable {
		opts.Sync = wal.SyncBatch
	}
	l, err := wal.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	return &walLog{
		append: func(recs [][]byte) error {
			var last uint64
			if len(recs) == 1 {
				seq, err := l.Append(recs[0])
				if err != nil {
					return err
				}
				last = seq
			} else {
				first, err := l.AppendBatch(recs)
				if err != nil {
					return err
				}
				last = first + uint64(len(recs)) - 1
			}
			if durable {
				return l.WaitDurable(ctx, last)
			}
			return nil
		},
		close: l.Close,
	}, nil
}

func readAppendlog(dir string, visit func([]byte)) error {
	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	for r.Next() {
		visit(r.Record())
	}
	if t := r.Torn(); t != nil {
		return fmt.Errorf("torn tail after Close: %+v", *t)
	}
	return r.Err()
}

// tidwall/wal: indexes start at 1 and must be consecutive, so appends
// take a mutex to number their entries. NoSync for throughput (Close
// syncs); NoSync=false (fsync in every Write/WriteBatch) for durable acks.
func openTidwall(dir string, durable bool) (*walLog, error) {
	opts := *tidwal.DefaultOptions
	opts.NoSync = !durable
	opts.SegmentSize = _segmentSize
	l, err := tidwal.Open(dir, &opts)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		next  uint64 = 1
		batch tidwal.Batch
	)
	return &walLog{
		append: func(recs [][]byte) error {
			mu.Lock()
			defer mu.Unlock()
			if len(recs) == 1 {
				if err := l.Write(next, recs[0]); err != nil {
					return err
				}
				next++
				return nil
			}
			for _, rec := range recs {
				batch.Write(next, rec)
				next++
			}
			return l.WriteBatch(&batch)
		},
		close: l.Close, // syncs
	}, nil
}

func readTidwall(dir string, visit func([]byte)) error {
	opts := *tidwal.DefaultOptions
	opts.SegmentSize = _segmentSize
	l, err := tidwal.Open(dir, &opts)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer l.Close()
	first, err := l.FirstIndex()
	if err != nil {
		return err
	}
	last, err := l.LastIndex()
	if err != nil {
		return err
	}
	if first != 1 && last != 0 {
		return fmt.Errorf("first index %d, want 1", first)
	}
	for i := first; i <= last && last != 0; i++ {
		rec, err := l.Read(i)
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		visit(rec)
	}
	return nil
}

// rosedblabs/wal: Write appends one record; the batch API is PendingWrites
// (queue) + WriteAll (one write), which does not sync. Sync=false for
// throughput (its Close does not sync, so close calls Sync first);
// Sync=true (fsync in every Write) for durable acks.
func openRosedb(dir string, durable bool) (*walLog, error) {
	opts := rosewal.DefaultOptions
	opts.DirPath = dir
	opts.SegmentSize = _segmentSize
	opts.Sync = durable
	l, err := rosewal.Open(opts)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex // PendingWrites+WriteAll is one batch only if nobody else queues meanwhile
	return &walLog{
		append: func(recs [][]byte) error {
			if len(recs) == 1 {
				_, err := l.Write(recs[0])
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, rec := range recs {
				l.PendingWrites(rec)
			}
			if _, err := l.WriteAll(); err != nil {
				return err
			}
			if durable {
				return l.Sync()
			}
			return nil
		},
		close: func() error { return errors.Join(l.Sync(), l.Close()) },
	}, nil
}

func readRosedb(dir string, visit func([]byte)) error {
	opts := rosewal.DefaultOptions
	opts.DirPath = dir
	opts.SegmentSize = _segmentSize
	l, err := rosewal.Open(opts)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer l.Close()
	r := l.NewReader()
	for {
		rec, _, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		visit(rec)
	}
}

// hashicorp/raft-wal: StoreLogs fsyncs every call (there is no option to
// turn it off), so it is durable in both benchmarks. Indexes are
// consecutive from 1: appends take a mutex to number them.
//
// WAL.Close does not close its metadata store (a bbolt file holding an
// flock), so reopening the directory in the same process blocks forever
// in bbolt's flock retry loop. openRaftMeta passes our own store and close
// closes it after the WAL.
func openRaftWAL(dir string, durable bool) (*walLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, closeAll, err := openRaftMeta(dir)
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		next uint64 = 1
		logs []*raft.Log
		buf  []raft.Log
	)
	return &walLog{
		append: func(recs [][]byte) error {
			mu.Lock()
			defer mu.Unlock()
			if cap(buf) < len(recs) {
				buf = make([]raft.Log, len(recs))
				logs = make([]*raft.Log, len(recs))
			}
			logs = logs[:len(recs)]
			for i, rec := range recs {
				buf[i] = raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: rec}
				logs[i] = &buf[i]
				next++
			}
			return l.StoreLogs(logs)
		},
		close: closeAll,
	}, nil
}

// openRaftMeta opens the raft-wal log in dir with a metadata store that
// close (unlike WAL.Close) closes.
func openRaftMeta(dir string) (l *raftwal.WAL, close func() error, err error) {
	meta := &metadb.BoltMetaDB{}
	l, err = raftwal.Open(dir, raftwal.WithSegmentSize(_segmentSize), raftwal.WithMetaStore(meta))
	if err != nil {
		return nil, nil, errors.Join(err, meta.Close())
	}
	return l, func() error { return errors.Join(l.Close(), meta.Close()) }, nil
}

func readRaftWAL(dir string, visit func([]byte)) error {
	l, closeAll, err := openRaftMeta(dir)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer closeAll()
	first, err := l.FirstIndex()
	if err != nil {
		return err
	}
	last, err := l.LastIndex()
	if err != nil {
		return err
	}
	if last != 0 && first != 1 {
		return fmt.Errorf("first index %d, want 1", first)
	}
	var e raft.Log
	for i := first; i <= last && last != 0; i++ {
		if err := l.GetLog(i, &e); err != nil {
			return fmt.Errorf("get %d: %w", i, err)
		}
		if e.Index != i {
			return fmt.Errorf("get %d: entry has index %d", i, e.Index)
		}
		visit(e.Data)
	}
	return nil
}

// cockroachdb/pebble: record.LogWriter, the writer of pebble's write-ahead
// log, used the way pebble's DB uses it (open.go, commit.go in v1.1.5):
//
//   - The file is vfs.Default.Create'd, the directory synced, and the file
//     wrapped in vfs.NewSyncingFile with pebble's defaults (WALBytesPerSync
//     0, sync on close, preallocation of 110 % of the default 4 MiB
//     memtable), so its Sync is fdatasync.
//   - LogWriterConfig as pebble gives it: no WALMinSyncInterval (pebble's
//     default), an fsync-latency histogram with pebble's buckets, and
//     QueueSemChan, a semaphore of SyncConcurrency-1 slots that a durable
//     append fills before queueing its sync (the sync queue panics if it
//     overflows; the flusher empties a slot per completed waiter).
//   - Appends hold a mutex, as pebble's commitPipeline.mu: LogWriter is not
//     safe for concurrent writers. There is no batch API (a pebble batch is
//     one record); a batch here is its records written under one lock.
//   - Durable: SyncRecord(rec, &wg, &err) under the mutex, then wg.Wait()
//     outside it: the flusher writes what is queued and fdatasyncs once for
//     every waiter queued by then (group commit). Not durable: WriteRecord
//     (the flusher writes blocks to the file in the background, no sync).
//   - Close writes the EOF trailer, waits for the flusher, fdatasyncs and
//     closes the file.
//
// One log file, no rotation; see the segment note above.

// _pebbleLogNum is the log's file number, written into every chunk header
// (pebble's recyclable format) and checked by the reader.
const _pebbleLogNum = 1

// _pebbleWALPreallocate is pebble's WAL preallocation with default options
// (DB.walPreallocateSize: MemTableSize 4 MiB plus 10 %).
const _pebbleWALPreallocate = 4<<20 + (4<<20)/10

// pebbleFsyncLatencyBuckets are pebble.FsyncLatencyBuckets (metrics.go,
// v1.1.5), copied so as not to import the pebble package itself (its
// sstable compression pulls in cgo zstd).
var pebbleFsyncLatencyBuckets = append(
	prometheus.LinearBuckets(0.0, float64(time.Microsecond*100), 50),
	prometheus.ExponentialBucketsRange(float64(time.Millisecond*5), float64(10*time.Second), 50)...,
)

func pebbleLogPath(dir string) string { return filepath.Join(dir, "000001.log") }

func openPebble(dir string, durable bool) (*walLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := vfs.Default.Create(pebbleLogPath(dir))
	if err != nil {
		return nil, err
	}
	d, err := vfs.Default.OpenDir(dir)
	if err == nil {
		err = errors.Join(d.Sync(), d.Close())
	}
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{PreallocateSize: _pebbleWALPreallocate})
	sem := make(chan struct{}, record.SyncConcurrency-1)
	w := record.NewLogWriter(f, _pebbleLogNum, record.LogWriterConfig{
		WALFsyncLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Buckets: pebbleFsyncLatencyBuckets}),
		QueueSemChan:    sem,
	})
	var mu sync.Mutex // pebble's commitPipeline.mu
	return &walLog{
		append: func(recs [][]byte) error {
			if !durable {
				mu.Lock()
				defer mu.Unlock()
				for _, rec := range recs {
					if _, err := w.WriteRecord(rec); err != nil {
						return err
					}
				}
				return nil
			}
			var (
				wg      sync.WaitGroup
				syncErr error
			)
			wg.Add(1)
			sem <- struct{}{} // reserve a sync-queue slot, as commitPipeline.Commit
			mu.Lock()
			var err error
			for _, rec := range recs[:len(recs)-1] {
				if _, err = w.WriteRecord(rec); err != nil {
					break
				}
			}
			if err == nil {
				// An error here comes before the waiter is queued.
				_, err = w.SyncRecord(recs[len(recs)-1], &wg, &syncErr)
			}
			mu.Unlock()
			if err != nil {
				<-sem
				return err
			}
			wg.Wait()
			return syncErr
		},
		close: w.Close,
	}, nil
}

// readPebble reads the log as pebble's WAL replay does (Reader.Next, then
// io.Copy of the record), except that only io.EOF, which the EOF trailer
// written by Close yields, ends it: a torn or invalid chunk, which replay
// tolerates at the tail, is an error here.
func readPebble(dir string, visit func([]byte)) error {
	f, err := os.Open(pebbleLogPath(dir))
	if err != nil {
		return err
	}
	defer f.Close()
	rr := record.NewReader(f, _pebbleLogNum)
	var buf bytes.Buffer
	for {
		off := rr.Offset()
		r, err := rr.Next()
		if err == nil {
			buf.Reset()
			_, err = io.Copy(&buf, r)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("record at offset %d: %w", off, err)
		}
		visit(buf.Bytes())
	}
}

// verifyWAL reads the closed log back through the contender's reader.
func verifyWAL(c walContender, dir string, written []uint64) error {
	chk := newChecker(len(written), false)
	if err := c.read(dir, chk.record); err != nil {
		return fmt.Errorf("%s: read back: %w", c.name, err)
	}
	if err := chk.finish(written, 0); err != nil {
		return fmt.Errorf("%s: verification failed: %w", c.name, err)
	}
	return nil
}

// walRun appends n records from one goroutine, batch records per call,
// closes, and verifies. The timer hooks bracket appends and close.
func walRun(tb testing.TB, c walContender, n, batch int, start, stop func()) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "log")
	l, err := c.open(dir, false)
	if err != nil {
		tb.Fatal(err)
	}
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, recSize)
	}
	start()
	var werr error
	for i := 0; i < n && werr == nil; i += batch {
		k := min(batch, n-i)
		for j := 0; j < k; j++ {
			fillRecord(bufs[j], 0, uint64(i+j))
		}
		werr = l.append(bufs[:k])
	}
	cerr := l.close()
	stop()
	if err := errors.Join(werr, cerr); err != nil {
		tb.Fatalf("%s: %v", c.name, err)
	}
	if err := verifyWAL(c, dir, []uint64{uint64(n)}); err != nil {
		tb.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkWAL: b.N records of 128 B appended by one goroutine, batch
// records per call, no sync until the final close (except raft-wal, which
// fsyncs every call). The timed region ends after close.
func BenchmarkWAL(b *testing.B) {
	for _, batch := range []int{1, 1000} {
		for _, c := range walContenders {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, c.name), func(b *testing.B) {
				b.SetBytes(recSize)
				b.ReportAllocs()
				walRun(b, c, b.N, batch, b.ResetTimer, b.StopTimer)
			})
		}
	}
}

func TestWAL(t *testing.T) {
	for _, batch := range []int{1, 1000} {
		for _, c := range walContenders {
			t.Run(fmt.Sprintf("batch=%d/%s", batch, c.name), func(t *testing.T) {
				n := 2500
				if c.name == "raft-wal" && batch == 1 {
					n = 200 // an fsync per record
				}
				walRun(t, c, n, batch, func() {}, func() {})
			})
		}
	}
}

// durableRun: g goroutines each append records one at a time and wait
// until each is durable before the next; run drives them. The timed region
// is the appends and the close.
func durableRun(tb testing.TB, c walContender, g int,
	run func(append func(rec []byte) error) ([]uint64, error), start, stop func()) time.Duration {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "log")
	l, err := c.open(dir, true)
	if err != nil {
		tb.Fatal(err)
	}
	start()
	t0 := time.Now()
	written, werr := run(func(rec []byte) error { return l.append([][]byte{rec}) })
	cerr := l.close()
	elapsed := time.Since(t0)
	stop()
	if err := errors.Join(werr, cerr); err != nil {
		tb.Fatalf("%s: %v", c.name, err)
	}
	if err := verifyWAL(c, dir, written); err != nil {
		tb.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	return elapsed
}

// BenchmarkDurable: g goroutines each append one 128 B record and wait
// until it is durable, b.N records in all. appendlog waits with
// WaitDurable and pebble with SyncRecord's WaitGroup (both group commit:
// one fdatasync covers every waiter); the other peers sync in every write
// (tidwall NoSync=false, rosedb Sync=true, raft-wal always). acks/s is
// records acknowledged durable per second.
func BenchmarkDurable(b *testing.B) {
	for _, g := range []int{1, 32, 128} {
		_, actual := goroutinesFor(g)
		for _, c := range walContenders {
			b.Run(fmt.Sprintf("g=%d/%s", actual, c.name), func(b *testing.B) {
				b.SetBytes(recSize)
				b.ReportAllocs()
				elapsed := durableRun(b, c, actual,
					func(append func([]byte) error) ([]uint64, error) { return benchWrites(b, g, append) },
					b.ResetTimer, b.StopTimer)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acks/s")
			})
		}
	}
}

func TestDurable(t *testing.T) {
	const g, n = 4, 25
	for _, c := range walContenders {
		t.Run(c.name, func(t *testing.T) {
			durableRun(t, c, g,
				func(append func([]byte) error) ([]uint64, error) { return testWrites(g, n, append) },
				func() {}, func() {})
		})
	}
}
