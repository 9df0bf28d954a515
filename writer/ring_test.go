package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/internal/vfs"
)

// writeRandom writes a deterministic sequence of random records (sizes up
// to maxRec, random bytes) to w, calling Flush after some of them.
func writeRandom(t *testing.T, w *Ring, seed uint64, n, maxRec int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var key [32]byte
	key[0] = byte(seed)
	pool := make([]byte, 2*maxRec)
	rand.NewChaCha8(key).Read(pool)
	for range n {
		size := 1 + rng.IntN(200)
		if rng.IntN(10) == 0 {
			size = 1 + rng.IntN(maxRec)
		}
		off := rng.IntN(maxRec)
		p := pool[off : off+size]
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(20) == 0 {
			if err := w.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestDirectMatchesBuffered writes the same records through a buffered and
// an O_DIRECT Ring and checks the files are byte-for-byte equal, including
// their length: no padding in the middle, none left at the end.
func TestDirectMatchesBuffered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		n, max_ int
	}{
		{"64KiB-ring", 64 << 10, 3000, 20 << 10},
		{"8MiB-ring", 8 << 20, 800, 600 << 10}, // records far larger than the stage
	} {
		t.Run(tc.name, func(t *testing.T) {
			buffered, bpath := openRingFile(t, &RingOptions{Size: tc.size})
			direct, dpath := openRingFile(t, &RingOptions{Size: tc.size, Direct: true})
			writeRandom(t, buffered, 42, tc.n, tc.max_)
			writeRandom(t, direct, 42, tc.n, tc.max_)
			if err := buffered.Close(); err != nil {
				t.Fatal(err)
			}
			if err := direct.Close(); err != nil {
				t.Fatal(err)
			}
			b, d := readFile(t, bpath), readFile(t, dpath)
			if len(b) != len(d) {
				t.Fatalf("buffered file %d bytes, O_DIRECT file %d", len(b), len(d))
			}
			if i := firstDiff(b, d); i >= 0 {
				t.Fatalf("files differ at byte %d of %d", i, len(b))
			}
			if s := direct.Stats(); s.WrittenBytes != uint64(len(d)) {
				t.Errorf("WrittenBytes %d, file %d", s.WrittenBytes, len(d))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestDirectResume appends with O_DIRECT to a file whose size is not a
// multiple of the block size, twice, and compares with plain appends.
func TestDirectResume(t *testing.T) {
	dir := t.TempDir()
	dpath, bpath := filepath.Join(dir, "direct.log"), filepath.Join(dir, "buffered.log")
	prefix := bytes.Repeat([]byte("0123456789abcde\n"), 313) // 5008 bytes
	for _, p := range []string{dpath, bpath} {
		if err := os.WriteFile(p, prefix, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		for _, direct := range []bool{true, false} {
			path := bpath
			if direct {
				path = dpath
			}
			r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Direct: direct})
			if errors.Is(err, ErrDirectUnsupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			writeRandom(t, r, uint64(round), 500, 9000)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, d := readFile(t, bpath), readFile(t, dpath)
	if !bytes.Equal(b, d) {
		t.Fatalf("files differ: buffered %d bytes, O_DIRECT %d, first difference at %d", len(b), len(d), firstDiff(b, d))
	}
	if !bytes.HasPrefix(d, prefix) {
		t.Fatal("O_DIRECT file lost its original content")
	}
}

// TestDirectZeroCopy pins that the O_DIRECT Ring writes from the ring: per
// flush it copies at most the head of the carried block and the new tail
// block into its stage, even when appending to a file of unaligned length.
func TestDirectZeroCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.log")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFile(path, &RingOptions{Size: 1 << 20, Direct: true})
	if errors.Is(err, ErrDirectUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte("0123456789abcdef"), 64)
	for i := range 4000 {
		if _, err := r.Write(rec[:1+i%len(rec)]); err != nil {
			t.Fatal(err)
		}
	}
	ds := r.sink.(*directSink)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if max := int64(st.Flushes) * 2 * sys.BlockSize; ds.copied > max {
		t.Errorf("copied %d bytes into the stage over %d flushes (%d bytes written); want <= %d", ds.copied, st.Flushes, st.WrittenBytes, max)
	}
	if st.WrittenBytes < 8*uint64(ds.copied) {
		t.Errorf("copied %d of %d bytes: the flushes were too small to show zero copy", ds.copied, st.WrittenBytes)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 5000+int64(st.WrittenBytes) {
		t.Fatalf("file size %v (%v), want %d", fi.Size(), err, 5000+st.WrittenBytes)
	}
}

// TestDirectSinkUnalignedMemory drives the O_DIRECT sink with ranges that
// are not aligned in memory and split at odd places: it bounces them
// through its stage and the file still holds exactly the bytes given.
func TestDirectSinkUnalignedMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.log")
	s, err := openDirectSink(path, 0o644, sys.SyncDir)
	if errors.Is(err, ErrDirectUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	src := make([]byte, 1<<20+1)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	var want []byte
	pos := uint64(0)
	for _, n := range []int{1, 4095, 4097, 3 * _directStage / 2, 70000, 5, 2*_directStage + 3} {
		data := src[1 : 1+n] // one byte past an aligned start
		cut := rng.IntN(n + 1)
		if err := s.Write(pos, data[:cut], data[cut:]); err != nil {
			t.Fatal(err)
		}
		want = append(want, data...)
		pos += uint64(n)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatalf("file %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

// slowFile writes to a file, sleeping before every write.
type slowFile struct {
	f     *os.File
	delay time.Duration
}

func (s slowFile) Write(p []byte) (int, error) {
	time.Sleep(s.delay)
	return s.f.Write(p)
}

// TestDropAccounting overloads a Ring whose sink takes 1 ms per write and
// checks that accepted = written + dropped exactly, against the file.
func TestDropAccounting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    RingOptions
		markers bool
	}{
		{"drop", RingOptions{Full: Drop}, false},
		{"drop-markers", RingOptions{Full: Drop, DropMarkers: true}, true},
		{"timeout-markers", RingOptions{Full: Block, BlockTimeout: 200 * time.Microsecond, DropMarkers: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := openAppend(t, "drop.log")
			opts := tc.opts
			opts.Size = 64 << 10
			r, err := NewRing(slowFile{f, time.Millisecond}, &opts)
			if err != nil {
				t.Fatal(err)
			}
			const producers, per = 8, 3000
			var offeredBytes atomic.Uint64
			var wg sync.WaitGroup
			for id := range producers {
				wg.Go(func() {
					var b []byte
					for c := range per {
						b = appendRecord(b[:0], id, c)
						if n, err := r.Write(b); err != nil || n != len(b) {
							t.Errorf("write: %d, %v", n, err)
							return
						}
						offeredBytes.Add(uint64(len(b)))
					}
				})
			}
			wg.Wait()
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			data := fileOutput(t, f)()
			res := verifyRecords(t, data, producers, false, tc.markers, nil)
			s := r.Stats()
			t.Logf("written %d, dropped %d, markers %d", s.WrittenRecords, s.DroppedRecords, s.Markers)
			if s.Records != producers*per {
				t.Errorf("Records = %d, want %d", s.Records, producers*per)
			}
			if s.DroppedRecords == 0 {
				t.Errorf("nothing was dropped; the test did not overload the ring")
			}
			if uint64(res.records) != s.WrittenRecords || s.WrittenRecords+s.DroppedRecords != s.Records {
				t.Errorf("file has %d records; stats: written %d + dropped %d != accepted %d",
					res.records, s.WrittenRecords, s.DroppedRecords, s.Records)
			}
			if s.Bytes != offeredBytes.Load() || s.WrittenBytes+s.DroppedBytes != s.Bytes {
				t.Errorf("bytes: accepted %d (offered %d), written %d + dropped %d", s.Bytes, offeredBytes.Load(), s.WrittenBytes, s.DroppedBytes)
			}
			if uint64(len(data)) != s.WrittenBytes+s.MarkerBytes {
				t.Errorf("file has %d bytes; written %d + markers %d", len(data), s.WrittenBytes, s.MarkerBytes)
			}
			if tc.markers {
				if res.markedDrops != s.DroppedRecords || uint64(res.markers) != s.Markers {
					t.Errorf("markers in file report %d drops in %d lines; stats: %d dropped, %d markers",
						res.markedDrops, res.markers, s.DroppedRecords, s.Markers)
				}
			}
		})
	}
}

func faultyFS(inj vfs.Injector) *RingOptions {
	return &RingOptions{fsys: vfs.WithFaults(vfs.OS(), inj)}
}

// TestFsyncErrorSticky: an fdatasync error fails the Ring for good.
func TestFsyncErrorSticky(t *testing.T) {
	r, path := openRingFile(t, faultyFS(vfs.FailAfter(vfs.OpSync, 1, syscall.EIO)))
	if _, err := r.Write([]byte("a record\n")); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err) // writing is fine; only the sync fails
	}
	err := r.Sync()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync = %v, want EIO", err)
	}
	checkNamesOnce(t, err, path)
	if _, err := r.Write([]byte("later\n")); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after failed sync = %v, want EIO", err)
	}
	if err := r.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("second sync = %v, want EIO (never retried)", err)
	}
	if err := r.Flush(context.Background()); !errors.Is(err, syscall.EIO) {
		t.Errorf("flush = %v, want EIO", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("second close = %v, want EIO", err)
	}
	if !errors.Is(r.Err(), syscall.EIO) {
		t.Errorf("Err() = %v", r.Err())
	}
}

// TestFileWriteErrorSticky: a failed file write fails the Ring.
func TestFileWriteErrorSticky(t *testing.T) {
	r, path := openRingFile(t, faultyFS(vfs.ENOSPCAfter(100)))
	mustWrite(t, r, bytes.Repeat([]byte("x"), 99))
	mustWrite(t, r, []byte("\n"))
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("does not fit\n")) // buffered; the flush fails
	err := r.Flush(context.Background())
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush = %v, want ENOSPC", err)
	}
	checkNamesOnce(t, err, path)
	if !strings.Contains(err.Error(), "offset 100") {
		t.Errorf("error %q does not name the offset", err)
	}
	if _, err := r.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write = %v, want ENOSPC", err)
	}
	if err := r.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("close = %v, want ENOSPC", err)
	}
	if n := len(readFile(t, path)); n != 100 {
		t.Errorf("file has %d bytes, want 100", n)
	}
}

// TestStreamRetry: a sink that fails for a while (including a short write)
// gets every byte exactly once, in order, after it recovers; failures are
// counted and reported.
func TestStreamRetry(t *testing.T) {
	w := &collectWriter{fail: func(call, n int) (int, error) {
		switch {
		case call == 2:
			return n / 2, syscall.ECONNRESET // short write, then error
		case call > 2 && call <= 6:
			return 0, syscall.EPIPE
		}
		return n, nil
	}}
	var reported atomic.Int32
	r, err := NewRing(w, &RingOptions{
		Size:         64 << 10,
		RetryBackoff: time.Millisecond, RetryMaxBackoff: 4 * time.Millisecond,
		OnError: func(error) { reported.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	const producers, per = 4, 1500
	var wg sync.WaitGroup
	for id := range producers {
		wg.Go(func() {
			var b []byte
			for c := range per {
				b = appendRecord(b[:0], id, c)
				if _, err := r.Write(b); err != nil {
					t.Error(err)
					return
				}
				if c%100 == 0 {
					// Make many sink writes.
					if err := r.Flush(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	verifyRecords(t, w.bytes(), producers, true, false, []int{per, per, per, per})
	if s := r.Stats(); s.Retries != 5 || reported.Load() != 5 {
		t.Errorf("Retries = %d, OnError calls = %d; want 5", s.Retries, reported.Load())
	}
}

// TestStreamGiveUpOnClose: a sink that never recovers does not hang Close;
// the error becomes sticky.
func TestStreamGiveUpOnClose(t *testing.T) {
	w := &collectWriter{fail: func(call, n int) (int, error) { return 0, syscall.EHOSTUNREACH }}
	r, err := NewRing(w, &RingOptions{
		Size: 64 << 10, RetryBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond,
		CloseTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := r.Write([]byte("lost\n")); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	err = r.Close()
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("close = %v, want EHOSTUNREACH", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("close took %v", d)
	}
	if _, err := r.Write([]byte("x\n")); !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Errorf("write after = %v", err)
	}
	if s := r.Stats(); s.QueuedBytes != 50 || s.Retries == 0 || s.WrittenRecords != 0 {
		t.Errorf("stats: queued %d, retries %d, written %d", s.QueuedBytes, s.Retries, s.WrittenRecords)
	}
}

// TestStreamRetryLimit: with RetryLimit the Ring gives up by itself.
func TestStreamRetryLimit(t *testing.T) {
	w := &collectWriter{fail: func(call, n int) (int, error) { return 0, syscall.ECONNREFUSED }}
	var reported atomic.Int32
	r, err := NewRing(w, &RingOptions{RetryLimit: 3, RetryBackoff: time.Millisecond, OnError: func(error) { reported.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("x\n"))
	if err := r.Flush(context.Background()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("flush = %v", err)
	}
	if s := r.Stats(); s.Retries != 2 {
		t.Errorf("Retries = %d; want 2", s.Retries)
	}
	if err := r.Close(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("close = %v", err)
	}
	// OnError runs on a goroutine of its own, which Close joins.
	if n := reported.Load(); n != 3 {
		t.Errorf("OnError calls = %d; want 3", n)
	}
}

// TestStreamClosedWriterNotRetried: a writer that says it is closed is not
// retried.
func TestStreamClosedWriterNotRetried(t *testing.T) {
	w := &collectWriter{fail: func(call, n int) (int, error) { return 0, net.ErrClosed }}
	r, err := NewRing(w, &RingOptions{RetryBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("x\n"))
	if err := r.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("close = %v", err)
	}
	if s := r.Stats(); s.Retries != 0 {
		t.Errorf("Retries = %d", s.Retries)
	}
}

// gateWriter blocks every Write until open is closed.
type gateWriter struct {
	open chan struct{}
	collectWriter
}

func (g *gateWriter) Write(p []byte) (int, error) {
	<-g.open
	return g.collectWriter.Write(p)
}

// TestCloseWithBlockedProducers: producers blocked on a full ring while
// Close runs either get their record written or ErrClosed; nothing hangs
// and nothing is lost silently.
func TestCloseWithBlockedProducers(t *testing.T) {
	const size = 64 << 10
	g := &gateWriter{open: make(chan struct{})}
	r, err := NewRing(g, &RingOptions{Size: size})
	if err != nil {
		t.Fatal(err)
	}
	const producers = 4
	ok := make([]int, producers)
	// writing[id] is the length of the record producer id is writing, 0
	// between Writes.
	var writing [producers]atomic.Int64
	var wg sync.WaitGroup
	for id := range producers {
		wg.Go(func() {
			var b []byte
			for c := 0; ; c++ {
				b = appendRecord(b[:0], id, c)
				writing[id].Store(int64(len(b)))
				_, err := r.Write(b)
				writing[id].Store(0)
				if err != nil {
					if err != ErrClosed {
						t.Errorf("write: %v", err)
					}
					return
				}
				ok[id]++
			}
		})
	}
	// The sink never returns while the gate is shut, so nothing is
	// released: a producer inside Write with a record larger than the free
	// space is blocked for good. Wait until all are.
	blocked := func() bool {
		free := size - int64(r.Stats().QueuedBytes)
		for id := range producers {
			if n := writing[id].Load(); n == 0 || n <= free {
				return false
			}
		}
		return true
	}
	waitFor(t, "every producer blocked on the full ring", blocked)
	closed := make(chan error)
	go func() { closed <- r.Close() }()
	waitFor(t, "Close begun", r.closed.Load)
	close(g.open)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	res := verifyRecords(t, g.bytes(), producers, true, false, ok)
	if s := r.Stats(); s.WrittenRecords != uint64(res.records) || s.Records != uint64(res.records) {
		t.Errorf("stats %+v, %d records in output", s, res.records)
	}
}

// TestIdleFlush: a record written to an idle ring reaches the file within
// FlushInterval without Flush: the flusher arms a timer no later than the
// interval, and writes the record when it fires. The clock is fake, so the
// test advances it instead of sleeping.
func TestIdleFlush(t *testing.T) {
	const interval = 5 * time.Millisecond // below both defaults, so a lost setting shows
	clk := newFakeClock()
	r, path := openRingFile(t, &RingOptions{FlushInterval: interval, clock: clk})
	closeAtEnd(t, r)
	start := clk.Now()
	mustWrite(t, r, []byte("idle\n"))
	written := func() bool { return string(readFile(t, path)) == "idle\n" }
	waitFor(t, "a flush timer", func() bool {
		_, ok := clk.Next()
		return ok
	})
	if at, _ := clk.Next(); at.After(start.Add(interval)) {
		t.Errorf("the flush timer fires %v after the write, later than FlushInterval %v", at.Sub(start), interval)
	}
	advanceUntil(t, clk, "the record written", written)
	if d := clk.Now().Sub(start); d > interval {
		t.Errorf("written %v (fake time) after the write, later than FlushInterval %v", d, interval)
	}
}

// TestFlushReachesFile: when Flush returns the bytes are in the file.
func TestFlushReachesFile(t *testing.T) {
	r, path := openRingFile(t, &RingOptions{FlushInterval: time.Hour})
	closeAtEnd(t, r)
	for i := range 100 {
		mustWrite(t, r, fmt.Appendf(nil, "line %d\n", i))
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("line %d\n", i); !bytes.HasSuffix(readFile(t, path), []byte(want)) {
			t.Fatalf("after Flush the file does not end with %q", want)
		}
	}
	if s := r.Stats(); s.WrittenRecords != 100 || s.Flushes < 100 || s.FlushLatency.Count() != s.Flushes {
		t.Errorf("stats: written %d, flushes %d, latency count %d", s.WrittenRecords, s.Flushes, s.FlushLatency.Count())
	}
}

// TestSyncEvery: with SyncEvery the flusher syncs by itself, not before
// SyncEvery has passed on its clock.
func TestSyncEvery(t *testing.T) {
	const every = 5 * time.Millisecond
	clk := newFakeClock()
	r, _ := openRingFile(t, &RingOptions{FlushInterval: time.Millisecond, SyncEvery: every, clock: clk})
	closeAtEnd(t, r)
	start := clk.Now()
	mustWrite(t, r, []byte("x\n"))
	advanceUntil(t, clk, "a background sync", func() bool { return r.Stats().Syncs > 0 })
	if d := clk.Now().Sub(start); d < every {
		t.Errorf("synced %v (fake time) after the write, before SyncEvery %v", d, every)
	}
}

// TestSyncPipe: Sync on a sink that cannot be synced (a pipe) is not an
// error.
func TestSyncPipe(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	done := make(chan []byte)
	var readErr error
	go func() {
		b, err := io.ReadAll(pr)
		readErr = err
		done <- b
	}()
	r, err := NewRing(pw, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("piped\n"))
	if err := r.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if got := string(<-done); got != "piped\n" || readErr != nil {
		t.Errorf("got %q, %v", got, readErr)
	}
}

func TestTooLargeAndEmpty(t *testing.T) {
	r, path := openRingFile(t, &RingOptions{Size: 64 << 10})
	max := 64<<10 - 4<<10
	if r.MaxRecord() != max {
		t.Errorf("MaxRecord = %d, want %d", r.MaxRecord(), max)
	}
	if n, err := r.Write(make([]byte, max+1)); err != ErrTooLarge || n != 0 {
		t.Errorf("write of %d = %d, %v; want ErrTooLarge", max+1, n, err)
	}
	if n, err := r.Write(bytes.Repeat([]byte{'y'}, max)); err != nil || n != max {
		t.Errorf("write of %d = %d, %v", max, n, err)
	}
	if n, err := r.Write(nil); err != nil || n != 0 {
		t.Errorf("empty write = %d, %v", n, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Write(nil); err != ErrClosed || n != 0 {
		t.Errorf("empty write after close = %d, %v", n, err)
	}
	if s := r.Stats(); s.Records != 1 || len(readFile(t, path)) != max {
		t.Errorf("records %d, file %d bytes", s.Records, len(readFile(t, path)))
	}
}

func TestRingOptionsValidate(t *testing.T) {
	for _, o := range []RingOptions{
		{Size: 1000},
		{Size: 32 << 10},
		{Size: 1 << 30},
		{Full: 7},
		{FlushInterval: -1},
		{RetryLimit: -1},
	} {
		if _, err := NewRing(io.Discard, &o); err == nil {
			t.Errorf("NewRing accepted %+v", o)
		}
		if _, err := OpenFile(filepath.Join(t.TempDir(), "x"), &o); err == nil {
			t.Errorf("OpenFile accepted %+v", o)
		}
	}
	var nilOpts *RingOptions
	if err := nilOpts.Validate(); err != nil {
		t.Error(err)
	}
}

func TestOpenFileErrors(t *testing.T) {
	if _, err := OpenFile(filepath.Join(t.TempDir(), "no", "such", "dir"), nil); err == nil {
		t.Error("OpenFile in a missing directory succeeded")
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "no", "such", "dir"), &RingOptions{Direct: true}); err == nil {
		t.Error("OpenFile Direct in a missing directory succeeded")
	}
}

// TestOptionsCopied: changing the caller's options after NewRing has no
// effect.
func TestOptionsCopied(t *testing.T) {
	o := &RingOptions{Full: Drop}
	r, err := NewRing(io.Discard, o)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, r)
	o.Full = Block
	if !r.drop {
		t.Error("options not copied")
	}
	if o.Size != 0 {
		t.Error("caller's options modified")
	}
}

func TestHistogram(t *testing.T) {
	var h Histogram
	for i := range 1000 {
		h.Record(time.Duration(i + 1)) // 1..1000 ns
	}
	h.Record(0)
	h.Record(time.Hour)
	if h.Count() != 1002 {
		t.Fatalf("count %d", h.Count())
	}
	if q := h.Quantile(0.5); q != 512 {
		t.Errorf("median bound %v, want 512ns", q)
	}
	if q := h.Quantile(1); q != time.Duration(1)<<(HistogramBuckets-1) {
		t.Errorf("max bound %v", q)
	}
	if q := h.Quantile(0); q != 0 {
		t.Errorf("min bound %v", q)
	}
	var m Histogram
	m.Merge(&h)
	m.Merge(&h)
	if m.Count() != 2004 {
		t.Errorf("merged count %d", m.Count())
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 {
		t.Error("empty quantile")
	}
}

func TestFullPolicyString(t *testing.T) {
	if Block.String() != "block" || Drop.String() != "drop" || FullPolicy(9).String() != "FullPolicy(9)" {
		t.Error("FullPolicy.String")
	}
}

// TestCloseInterruptsBlockedConn: a peer that stops reading blocks the
// flusher in conn.Write; Close gives up after CloseTimeout instead of
// hanging.
func TestCloseInterruptsBlockedConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c // never read from
		}
		close(accepted)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A small send buffer (and a peer that never reads, so its receive
	// buffer is not grown) keeps what the socket path absorbs far below the
	// 1 MiB the ring accepts before it starts dropping, however few of the
	// writes below get through on a loaded machine.
	if err := conn.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer != nil {
		defer peer.Close()
	}
	r, err := NewRing(conn, &RingOptions{Size: 1 << 20, Full: Drop, CloseTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte("z"), 4095)
	rec = append(rec, '\n')
	for range 64 << 20 / len(rec) { // far more than the socket buffers hold
		mustWrite(t, r, rec) // stored or dropped
	}
	start := time.Now()
	if err := r.Close(); err == nil {
		t.Fatal("close succeeded although the peer never read")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("close took %v", d)
	}
}

// waitFor waits until cond, an observation of state other goroutines
// change, holds, looking every 100 µs; it fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// checkNamesOnce checks that err's message names the file at path exactly
// once.
func checkNamesOnce(t *testing.T, err error, path string) {
	t.Helper()
	if n := strings.Count(err.Error(), path); n != 1 {
		t.Errorf("error %q names %s %d times, want once", err, path, n)
	}
}

// newFakeClock returns a fake clock for a Ring (RingOptions.clock).
func newFakeClock() *clock.Fake { return clock.NewFake(time.Unix(1e9, 0)) }

// advanceUntil moves clk to the deadline of its earliest armed timer, over
// and over, until cond, an observation of what the flusher does, holds;
// with no timer armed it looks again every 100 µs. It fails the test after
// 10 s of real time.
func advanceUntil(t *testing.T, clk *clock.Fake, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s (fake time %v)", what, clk.Now())
		}
		if at, ok := clk.Next(); ok {
			clk.Advance(at.Sub(clk.Now()))
			continue
		}
		time.Sleep(100 * time.Microsecond)
	}
}
