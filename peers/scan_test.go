package peers

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/wal"
)

// Sequential scan: a log of 128 B records (1 GiB; 4 MiB with -short) is
// written once per contender, then read from first record to last through
// the library's own reader, warm in the page cache. One op is one whole
// scan: open, read every record, close. The visit function does the same
// trivial work for everyone (count, fold one byte); the log is verified
// once, untimed, after the timed scans (count, content and order, with the
// internal/payload checker as every WAL benchmark here).
//
// appendlog is read two ways: appendlog-open opens the log (wal.Open:
// lock, recovery of the tail) and scans it with a Reader of the open Log,
// which maps the segments read-only and returns slices of the mapping;
// appendlog-reader uses wal.OpenReader, which reads with ReadAt into a
// buffer and checks every segment's footer (dump, verify and tail read
// this way).

// scanContenders are the WAL contenders plus appendlog's second reader.
var scanContenders = append([]walContender{
	{name: "appendlog-open", open: openAppendlog, read: readAppendlogOpen},
	{name: "appendlog-reader", open: openAppendlog, read: readAppendlog},
}, walContenders[1:]...)

// readAppendlogOpen reads the log with a Reader of the open Log.
func readAppendlogOpen(dir string, visit func([]byte)) error {
	l, err := wal.Open(dir, nil)
	if err != nil {
		return err
	}
	r, err := l.NewReader(1, nil)
	if err != nil {
		l.Close()
		return err
	}
	for r.Next() {
		visit(r.Record())
	}
	rerr := r.Err()
	r.Close()
	if err := l.Close(); rerr == nil {
		rerr = err
	}
	return rerr
}

// scanLogBytes is the size of the scanned log's records.
func scanLogBytes() int64 {
	if testing.Short() {
		return 4 << 20
	}
	return 1 << 30
}

// writeScanLog writes n records to a new log of c in dir, 8192 per call,
// and closes it.
func writeScanLog(tb testing.TB, c walContender, dir string, n int) {
	tb.Helper()
	l, err := c.open(dir, false)
	if err != nil {
		tb.Fatal(err)
	}
	const batch = 8192
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, recSize)
	}
	for i := 0; i < n; i += batch {
		k := min(batch, n-i)
		for j := range k {
			fillRecord(bufs[j], 0, uint64(i+j))
		}
		if err := l.append(bufs[:k]); err != nil {
			l.close()
			tb.Fatalf("%s: write: %v", c.name, err)
		}
	}
	if err := l.close(); err != nil {
		tb.Fatalf("%s: close: %v", c.name, err)
	}
}

// scanOnce reads the log in dir through c's reader and checks the count.
func scanOnce(c walContender, dir string, n int) (byte, error) {
	var count int
	var fold byte
	if err := c.read(dir, func(rec []byte) {
		count++
		fold ^= rec[len(rec)-1]
	}); err != nil {
		return 0, fmt.Errorf("%s: scan: %w", c.name, err)
	}
	if count != n {
		return 0, fmt.Errorf("%s: scan read %d records, want %d", c.name, count, n)
	}
	return fold, nil
}

// BenchmarkScan: sequential scan of a warm log of 128 B records through
// each library's reader; MB/s counts record bytes, rec/s records.
func BenchmarkScan(b *testing.B) {
	n := int(scanLogBytes() / recSize)
	for _, c := range scanContenders {
		dir := filepath.Join(b.TempDir(), c.name)
		writeScanLog(b, c, dir, n)
		b.Run("peer="+c.name, func(b *testing.B) {
			b.SetBytes(int64(n) * recSize)
			b.ReportAllocs()
			var sink byte
			for b.Loop() {
				f, err := scanOnce(c, dir, n)
				if err != nil {
					b.Fatal(err)
				}
				sink ^= f
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rec/s")
			_ = sink
		})
		if err := verifyWAL(c, dir, []uint64{uint64(n)}); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil { // one log on disk at a time
			b.Fatal(err)
		}
	}
}

// TestScan runs every scan contender on a small log and verifies it.
func TestScan(t *testing.T) {
	const n = 20000
	for _, c := range scanContenders {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			writeScanLog(t, c, dir, n)
			if _, err := scanOnce(c, dir, n); err != nil {
				t.Fatal(err)
			}
			if err := verifyWAL(c, dir, []uint64{n}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
