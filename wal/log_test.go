package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noErr fails the test at once if err is not nil.
func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t *testing.T, dir string, o *Options) *Log {
	t.Helper()
	l, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConcurrentAppendsOneTotalOrder(t *testing.T) {
	for _, g := range []int{1, 8, 64} {
		t.Run(fmt.Sprintf("goroutines=%d", g), func(t *testing.T) {
			dir := t.TempDir()
			o := &Options{SegmentSize: 128 << 10, BufferSize: 256 << 10}
			l := mustOpen(t, dir, o)
			per := 4000 / g * 4
			var wg sync.WaitGroup
			seqs := make([][]uint64, g)
			for id := range g {
				wg.Go(func() {
					for i := 0; i < per; i++ {
						var seq uint64
						var err error
						if i%7 == 0 {
							seq, err = l.AppendBatch([][]byte{testPayload(id, i, 40), testPayload(id, i+1, 90)})
							i++
							seqs[id] = append(seqs[id], seq, seq+1)
						} else {
							seq, err = l.Append(testPayload(id, i, 24+i%300))
							seqs[id] = append(seqs[id], seq)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, vfs.OS(), dir) // checks per-writer order and integrity
			total := 0
			for id, ss := range seqs {
				for k, s := range ss {
					p, ok := got[s]
					if !ok {
						t.Fatalf("writer %d: seq %d missing", id, s)
					}
					if g2, _, err := parsePayload(p); err != nil || g2 != id {
						t.Fatalf("seq %d returned to writer %d holds writer %d's record (%v)", s, id, g2, err)
					}
					if k > 0 && s <= ss[k-1] {
						t.Fatalf("writer %d got seq %d after %d", id, s, ss[k-1])
					}
				}
				total += len(ss)
			}
			if len(got) != total {
				t.Fatalf("log has %d records, %d appended", len(got), total)
			}
			rep, err := Verify(dir, nil)
			if err != nil || rep.Records != uint64(total) || rep.Segments < 2 {
				t.Fatalf("verify: %+v %v", rep, err)
			}
		})
	}
}

func TestReopenContinuesSequence(t *testing.T) {
	dir := t.TempDir()
	for round := range 3 {
		l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
		if want := uint64(round*500 + 1); l.NextSeq() != want {
			t.Fatalf("round %d: NextSeq %d, want %d", round, l.NextSeq(), want)
		}
		for i := range 500 {
			if _, err := l.Append(testPayload(round, i, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, vfs.OS(), dir); len(got) != 1500 {
		t.Fatalf("%d records", len(got))
	}
	// Reading from the middle.
	r, err := OpenReader(dir, 1234, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := uint64(1234)
	for r.Next() {
		if r.Seq() != want {
			t.Fatalf("reader from 1234: got seq %d, want %d", r.Seq(), want)
		}
		want++
	}
	if r.Err() != nil || want != 1501 {
		t.Fatalf("reader from 1234 ended at %d: %v", want, r.Err())
	}
}

func TestCloseSemantics(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	seq, err := l.Append([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	ctx := context.Background()
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if _, err := l.AppendBatch([][]byte{[]byte("x")}); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendBatch after Close: %v", err)
	}
	if err := l.Sync(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	if err := l.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if err := l.WaitDurable(ctx, seq); err != nil {
		t.Errorf("WaitDurable of a record Close made durable: %v", err)
	}
	// Close released the lock: the log opens again and holds the record.
	l2 := mustOpen(t, dir, nil)
	defer l2.Close()
	if l2.NextSeq() != 2 || l2.DurableSeq() != 1 {
		t.Fatalf("after reopen: next %d durable %d", l2.NextSeq(), l2.DurableSeq())
	}
}

func TestCloseRacingAppendsLosesNothing(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{BufferSize: 64 << 10})
	var ok atomic.Int64
	var wg sync.WaitGroup
	// running is done once every appender has appended 100 records: Close
	// then races appenders that are still going.
	var running sync.WaitGroup
	running.Add(8)
	for id := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				if i == 100 {
					running.Done()
				}
				if _, err := l.Append(testPayload(id, i, 64)); err != nil {
					if i < 100 {
						running.Done()
					}
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
				ok.Add(1)
			}
		})
	}
	running.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := len(readAll(t, vfs.OS(), dir)); int64(got) != ok.Load() {
		t.Fatalf("%d appends succeeded, %d records in the log", ok.Load(), got)
	}
}

func TestSecondOpenIsLockedOut(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	defer l.Close()
	_, err := Open(dir, nil)
	if err == nil {
		t.Fatal("second Open succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, filepath.Join(dir, "LOCK")) || !strings.Contains(msg, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("lock error does not name the lock file and holder: %v", err)
	}
}

func TestAppendErrors(t *testing.T) {
	l := mustOpen(t, t.TempDir(), &Options{BufferSize: 64 << 10, MaxRecordSize: 1000})
	defer l.Close()
	if _, err := l.Append(make([]byte, 1001)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized Append: %v", err)
	}
	big := make([][]byte, 100)
	for i := range big {
		big[i] = make([]byte, 1000)
	}
	if _, err := l.AppendBatch(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized batch: %v", err)
	}
	if err := l.WaitDurable(context.Background(), 99); !errors.Is(err, ErrNotAppended) {
		t.Errorf("WaitDurable of a future seq: %v", err)
	}
	if first, err := l.AppendBatch(nil); first != 0 || err != nil {
		t.Errorf("empty batch: %d %v", first, err)
	}
	seq, err := l.Append(nil) // empty records are records
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.WaitDurable(ctx, seq); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled WaitDurable: %v", err)
	}
	if err := l.WaitDurable(context.Background(), seq); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{BufferSize: 1000}, {SegmentSize: 100}, {MaxRecordSize: DefaultBufferSize}, {Sync: 7}, {ReaderWindow: 100}} {
		if _, err := Open(t.TempDir(), &o); err == nil || !strings.Contains(err.Error(), "invalid options") {
			t.Errorf("Open(%+v): %v", o, err)
		}
	}
}

func TestSyncModesMakeRecordsDurableOnTheirOwn(t *testing.T) {
	const period = 50 * time.Millisecond
	for _, tc := range []struct {
		o       Options
		durable bool // within a second of fake time, with nobody waiting
	}{
		{Options{Sync: SyncBatch, BatchAge: period}, true},
		{Options{Sync: SyncInterval, SyncEvery: period}, true},
		{Options{Sync: SyncNever}, false},
	} {
		t.Run(tc.o.Sync.String(), func(t *testing.T) {
			fake := clock.NewFake(time.Unix(1000, 0))
			o := tc.o
			o.clock = fake
			l := mustOpen(t, t.TempDir(), &o)
			defer l.Close()
			start := fake.Now()
			seq, err := l.Append([]byte("x"))
			noErr(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Advance the fake clock timer by timer, letting the flusher
			// act on each before the next, until the record is durable, or
			// (SyncNever) it was written and no timer is left, or a second
			// has passed.
			for l.DurableSeq() < seq && fake.Now().Sub(start) < time.Second {
				progress, changed := l.eng.Progress(), fake.Changed()
				if l.DurableSeq() >= seq {
					break
				}
				if pos, _ := l.eng.Tail(); !tc.durable && l.eng.Written() >= pos && fake.Timers() == 0 {
					break
				}
				if at, ok := fake.Next(); ok {
					fake.Advance(at.Sub(fake.Now()))
					changed = nil // Advance changed the timers itself
				}
				select {
				case <-progress:
				case <-changed:
				case <-ctx.Done():
					t.Fatalf("%v: no progress at fake time +%v (durable %d)", o.Sync, fake.Now().Sub(start), l.DurableSeq())
				}
			}
			elapsed := fake.Now().Sub(start)
			switch {
			case tc.durable && l.DurableSeq() < seq:
				t.Fatalf("%v: record not durable after %v of fake time", o.Sync, elapsed)
			case tc.durable && elapsed < period:
				t.Fatalf("%v: record durable after %v, before its period %v", o.Sync, elapsed, period)
			case !tc.durable && l.DurableSeq() >= seq:
				t.Fatalf("%v: record durable with nobody asking", o.Sync)
			}
		})
	}
	if m, err := ParseSyncMode("interval"); err != nil || m != SyncInterval {
		t.Errorf("ParseSyncMode: %v %v", m, err)
	}
	if _, err := ParseSyncMode("sometimes"); err == nil {
		t.Errorf("ParseSyncMode accepted junk")
	}
}

// countingFaults counts operations of each kind and fails as inj says.
type countingFaults struct {
	mu  sync.Mutex
	ops map[vfs.Op]int
	inj vfs.Injector
}

func (c *countingFaults) injector() vfs.Injector {
	return func(op vfs.Op, name string, off int64, n int) (int, error) {
		c.mu.Lock()
		c.ops[op]++
		c.mu.Unlock()
		if c.inj != nil {
			return c.inj(op, name, off, n)
		}
		return n, nil
	}
}

func (c *countingFaults) count(op vfs.Op) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

func TestFsyncErrorIsStickyAndNeverRetried(t *testing.T) {
	mem := vfs.NewMem()
	failing, cf := syncFaults()
	l := mustOpen(t, "/log", &Options{fsys: vfs.WithFaults(mem, cf.injector())})
	ctx := context.Background()
	var durable []uint64
	for i := range 50 {
		seq, err := l.Append(testPayload(1, i, 100))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(ctx, seq); err != nil {
			t.Fatal(err)
		}
		durable = append(durable, seq)
	}
	failing.Store(true)
	seq, err := l.Append(testPayload(1, 50, 100))
	noErr(t, err)
	err = l.WaitDurable(ctx, seq)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable over a failing fsync: %v", err)
	}
	syncsAtFailure := cf.count(vfs.OpSync)
	failing.Store(false) // the disk "recovers": the log must not believe it
	for range 3 {
		if _, err := l.Append([]byte("x")); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Append after fsync failure: %v", err)
		}
		if err := l.Sync(ctx); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Sync after fsync failure: %v", err)
		}
		if err := l.WaitDurable(ctx, seq); !errors.Is(err, syscall.EIO) {
			t.Fatalf("WaitDurable after fsync failure: %v", err)
		}
	}
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close after fsync failure: %v", err)
	}
	if n := cf.count(vfs.OpSync); n != syncsAtFailure {
		t.Fatalf("fsync retried after failure: %d calls, %d at failure", n, syncsAtFailure)
	}
	// Everything acknowledged before the failure survives a power cut.
	crashed := mem.Crash(nil)
	got := readAll(t, crashed, "/log")
	for _, s := range durable {
		if _, ok := got[s]; !ok {
			t.Fatalf("acknowledged seq %d lost", s)
		}
	}
}

func TestWriteErrorsSurfaceAndLoseNothingAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name string
		inj  func() vfs.Injector
		want error
	}{
		{"ENOSPC", func() vfs.Injector { return vfs.ENOSPCAfter(300 << 10) }, syscall.ENOSPC},
		{"EIO-write", func() vfs.Injector { return vfs.FailAfter(vfs.OpWrite, 40, syscall.EIO) }, syscall.EIO},
		{"ENOSPC-preallocate", func() vfs.Injector { return vfs.FailAfter(vfs.OpPreallocate, 3, syscall.ENOSPC) }, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			l := mustOpen(t, "/log", &Options{fsys: vfs.WithFaults(mem, tc.inj()), SegmentSize: 64 << 10, BufferSize: 64 << 10})
			ctx := context.Background()
			var acked []uint64
			var lastErr error
			for i := range 20000 {
				seq, err := l.Append(testPayload(2, i, 200))
				if err == nil {
					err = l.WaitDurable(ctx, seq)
				}
				if err != nil {
					lastErr = err
					break
				}
				acked = append(acked, seq)
			}
			if !errors.Is(lastErr, tc.want) {
				t.Fatalf("after %d acks: error %v, want %v", len(acked), lastErr, tc.want)
			}
			if _, err := l.Append([]byte("x")); !errors.Is(err, tc.want) {
				t.Fatalf("Append after failure: %v", err)
			}
			if err := l.Close(); !errors.Is(err, tc.want) {
				t.Fatalf("Close after failure: %v, want %v", err, tc.want)
			}
			crashed := mem.Crash(nil)
			l2, err := Open("/log", &Options{fsys: crashed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatalf("Open after %v: %v", tc.want, err)
			}
			noErr(t, l2.Close())
			got := readAll(t, crashed, "/log")
			for _, s := range acked {
				if _, ok := got[s]; !ok {
					t.Fatalf("acknowledged seq %d lost after %v", s, tc.want)
				}
			}
			t.Logf("%d records acknowledged before %v, all present", len(acked), tc.want)
		})
	}
}

// buildLog writes n records in small segments and returns the segment names.
func buildLog(t *testing.T, dir string, n int) []string {
	t.Helper()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	for i := range n {
		if _, err := l.Append(testPayload(3, i, 200)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _, _, err := listSegments(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range segs {
		names = append(names, s.name)
	}
	return names
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestOpenAndVerifyBadInput(t *testing.T) {
	type check struct {
		openErr   string // substring; "" means Open must succeed
		verifyErr string
		torn      bool
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, segs []string)
		check
	}{
		{"clean", func(*testing.T, string, []string) {}, check{}},
		{"foreign-file", func(t *testing.T, dir string, _ []string) {
			noErr(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644))
		}, check{}},
		{"missing-middle-segment", func(t *testing.T, dir string, segs []string) {
			noErr(t, os.Remove(filepath.Join(dir, segs[2])))
		}, check{openErr: "a segment is missing", verifyErr: "a segment is missing"}},
		{"flipped-byte-sealed-segment", func(t *testing.T, dir string, segs []string) {
			flipByte(t, filepath.Join(dir, segs[1]), 9000)
		}, check{verifyErr: "00000000000000000"}}, // Open trusts sealed segments; Verify reads them
		{"flipped-footer", func(t *testing.T, dir string, segs []string) {
			p := filepath.Join(dir, segs[0])
			st, err := os.Stat(p)
			noErr(t, err)
			flipByte(t, p, st.Size()-10)
		}, check{openErr: "sealed segment is not whole", verifyErr: "no valid footer"}},
		{"flipped-byte-durable-tail", func(t *testing.T, dir string, segs []string) {
			flipByte(t, filepath.Join(dir, segs[len(segs)-1]), frame.FileHeaderSize+300)
		}, check{openErr: "were durable", verifyErr: "were durable"}},
		{"torn-tail", func(t *testing.T, dir string, segs []string) {
			// Append garbage after the last record and drop the mark, as a
			// crash between write and fdatasync would.
			p := filepath.Join(dir, segs[len(segs)-1])
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			noErr(t, err)
			defer f.Close()
			r, err := OpenReader(dir, 0, nil)
			noErr(t, err)
			for r.Next() {
			}
			end := r.Torn()
			r.Close()
			if end != nil {
				t.Fatalf("unexpected torn tail %+v", end)
			}
			var mark frame.Mark
			b := make([]byte, frame.MarkSize)
			_, err = f.ReadAt(b, frame.MarkOffset)
			noErr(t, err)
			mark, ok := frame.DecodeMark(b)
			if !ok {
				t.Fatal("no durable mark after Close")
			}
			frame.PutMark(b, frame.Mark{DurableEnd: mark.DurableEnd - 500, NextSeq: 1})
			_, err = f.WriteAt(b, frame.MarkOffset)
			noErr(t, err)
			_, err = f.WriteAt(bytes.Repeat([]byte{0xAB}, 77), mark.DurableEnd-10)
			noErr(t, err)
		}, check{torn: true}},
		{"random-bytes-segment", func(t *testing.T, dir string, segs []string) {
			noErr(t, os.WriteFile(filepath.Join(dir, segs[len(segs)-1]), bytes.Repeat([]byte("garbage!"), 1000), 0o644))
		}, check{openErr: "bad header", verifyErr: "bad header"}},
		{"stray-segment-name", func(t *testing.T, dir string, segs []string) {
			noErr(t, os.WriteFile(filepath.Join(dir, "00000000000099999999.seg"), make([]byte, 8192), 0o644))
		}, check{openErr: "sealed segment is not whole", verifyErr: "no valid footer but is followed by 00000000000099999999.seg"}},
		{"overflowing-segment-name-is-foreign", func(t *testing.T, dir string, segs []string) {
			noErr(t, os.WriteFile(filepath.Join(dir, "99999999999999999999.seg"), make([]byte, 8192), 0o644))
		}, check{}},
		{"unfinished-segment-creation", func(t *testing.T, dir string, segs []string) {
			// The crash state between sealing the tail and finishing the
			// next segment's creation: seal the tail by hand, then add an
			// all-zero file under the next segment's name.
			v, err := Verify(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			end := dataEnd(t, dir)
			last := segs[len(segs)-1]
			first, ok := parseSegmentName(last)
			if !ok {
				t.Fatalf("bad segment name %s", last)
			}
			f, err := os.OpenFile(filepath.Join(dir, last), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ft := make([]byte, frame.FooterSize)
			frame.PutFooter(ft, frame.Footer{FirstSeq: first, Count: v.NextSeq - first, DataEnd: end})
			_, err = f.WriteAt(ft, end)
			noErr(t, err)
			noErr(t, f.Truncate(end+frame.FooterSize))
			noErr(t, os.WriteFile(filepath.Join(dir, segmentName(v.NextSeq)), make([]byte, 6000), 0o644))
		}, check{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := buildLog(t, dir, 2000)
			if len(segs) < 4 {
				t.Fatalf("only %d segments", len(segs))
			}
			tc.damage(t, dir, segs)
			rep, verr := Verify(dir, nil)
			switch {
			case tc.verifyErr == "" && verr != nil:
				t.Fatalf("Verify: %v", verr)
			case tc.verifyErr != "" && (verr == nil || !strings.Contains(verr.Error(), tc.verifyErr)):
				t.Fatalf("Verify: %v, want error containing %q", verr, tc.verifyErr)
			case tc.verifyErr != "" && !IsCorrupt(verr):
				t.Fatalf("Verify error is not a CorruptionError: %v", verr)
			}
			if tc.torn != (rep != nil && rep.Torn != nil) {
				t.Fatalf("Verify torn tail = %+v, want torn %v", rep.Torn, tc.torn)
			}
			o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
			l, err := Open(dir, o)
			if tc.openErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.openErr) {
					t.Fatalf("Open: %v, want error containing %q", err, tc.openErr)
				}
				var ce *CorruptionError
				if !errors.As(err, &ce) || ce.Segment == "" {
					t.Fatalf("Open error does not name the segment: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			rec := l.Recovery()
			noErr(t, l.Close())
			if tc.torn && (rec.TruncatedBytes == 0 || rec.TruncatedAt < 0) {
				t.Fatalf("torn tail not reported: %+v", rec)
			}
			if tc.verifyErr == "" {
				if _, err := Verify(dir, nil); err != nil {
					t.Fatalf("Verify after Open: %v", err)
				}
			}
		})
	}
}

func TestRepair(t *testing.T) {
	t.Run("torn-tail", func(t *testing.T) {
		dir := t.TempDir()
		segs := buildLog(t, dir, 500)
		// Clear the mark, then scribble past the data: a torn tail.
		end := dataEnd(t, dir)
		f, err := os.OpenFile(filepath.Join(dir, segs[len(segs)-1]), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(make([]byte, frame.MarkSize), frame.MarkOffset)
		noErr(t, err)
		_, err = f.WriteAt([]byte("torn!torn!"), end+3)
		noErr(t, err)
		noErr(t, f.Close())
		rep, err := Repair(dir, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Cuts) != 1 || rep.CutBytes() != 13 || rep.Cuts[0].SideFile == "" || len(rep.Gaps) != 0 {
			t.Fatalf("repair: %+v", rep)
		}
		side, err := os.ReadFile(filepath.Join(dir, rep.Cuts[0].SideFile))
		noErr(t, err)
		if !bytes.Contains(side, []byte("torn!torn!")) {
			t.Fatalf("side file lacks the cut bytes: %q", side)
		}
		if v, err := Verify(dir, nil); err != nil || v.Torn != nil || v.Records != 500 {
			t.Fatalf("after repair: %+v %v", v, err)
		}
	})
	t.Run("mid-log-corruption", func(t *testing.T) {
		dir := t.TempDir()
		segs := buildLog(t, dir, 2000)
		flipByte(t, filepath.Join(dir, segs[1]), 20000)
		if _, err := Repair(dir, false, nil); !IsCorrupt(err) || !strings.Contains(err.Error(), "force") {
			t.Fatalf("unforced repair of corruption: %v", err)
		}
		rep, err := Repair(dir, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rebuilt) != 1 || rep.Rebuilt[0] != segs[1] || len(rep.RemovedSegments) != 0 || rep.Corruption == nil ||
			len(rep.Gaps) != 1 || rep.Gaps[0].End-rep.Gaps[0].First != 1 {
			t.Fatalf("forced repair: %+v", rep)
		}
		v, err := Verify(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Every record but the damaged one is kept, and the log opens.
		l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
		if l.NextSeq() != 2001 || v.NextSeq != 2001 || v.Records != 1999 || len(v.Gaps) != 1 {
			t.Fatalf("after repair next %d, verify %+v", l.NextSeq(), v)
		}
		if _, err := l.Append([]byte("after repair")); err != nil {
			t.Fatal(err)
		}
		noErr(t, l.Close())
		if v, err := Verify(dir, nil); err != nil || v.Records != 2000 || len(v.Gaps) != 1 {
			t.Fatalf("after append: %+v %v", v, err)
		}
	})
}

// dataEnd returns the end offset of the valid data in the last segment.
func dataEnd(t *testing.T, dir string) int64 {
	t.Helper()
	r, err := OpenReader(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
	}
	return r.dataEnd
}

func TestRecoveryAfterKilledProcessIsDurable(t *testing.T) {
	// Records found by recovery are fsynced before Open returns, so
	// DurableSeq can honestly report them: a power cut right after the
	// Open keeps them, although the process that appended them never
	// synced them.
	mem := vfs.NewMem()
	l := mustOpen(t, "/log", &Options{fsys: mem, Sync: SyncNever})
	for i := range 100 {
		_, err := l.Append(testPayload(4, i, 50))
		noErr(t, err)
	}
	noErr(t, l.Flush(context.Background()))
	if d := l.DurableSeq(); d != 0 {
		t.Fatalf("the process made %d records durable before it died: only recovery may", d)
	}
	// The process "dies": no Close. The page cache survives a process
	// death, so reopen on the same FS after releasing the lock by hand.
	l.lock.Close()
	l2 := mustOpen(t, "/log", &Options{fsys: mem})
	if l2.DurableSeq() != 100 {
		t.Fatalf("DurableSeq after recovery %d", l2.DurableSeq())
	}
	// The power goes before anything else syncs: l2's Close would.
	crashed := mem.Crash(nil)
	l2.Close() // fails: the file system is gone
	l.eng.Close()
	l.w.closeFile(false) // join the dead log's sealer
	if got := readAll(t, crashed, "/log"); len(got) != 100 {
		t.Fatalf("%d records survived a power cut after recovery", len(got))
	}
}

// TestParkedSync: Options.ParkedSync selects the parked file system, and
// a log whose syncs are parked acks durable appends from many goroutines
// and reopens with every one of them.
func TestParkedSync(t *testing.T) {
	if got := (&Options{ParkedSync: true}).withDefaults().fsys; got != vfs.OSParked() {
		t.Fatalf("ParkedSync: file system %#v, want vfs.OSParked()", got)
	}
	if got := (&Options{}).withDefaults().fsys; got != vfs.OS() {
		t.Fatalf("default: file system %#v, want vfs.OS()", got)
	}
	dir := t.TempDir()
	l, err := Open(dir, &Options{ParkedSync: true, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				seq, err := l.Append(testPayload(g, i, 32))
				if err == nil {
					err = l.WaitDurable(context.Background(), seq)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, vfs.OS(), dir); len(got) != goroutines*each { // checks order and integrity
		t.Fatalf("reopened log: %d records of %d", len(got), goroutines*each)
	}
}

// TestRotationDoesNotWaitForSync: a rotation while an fdatasync of the
// segment it seals is in flight hands the wait to the sealer: appends go
// on into the next segment, are handed to the OS and read, while the sync
// is held; once it is released the seal completes and everything is
// durable across a reopen. (Before, the flusher waited in the rotation,
// and every append waited with it for the sync.)
func TestRotationDoesNotWaitForSync(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	var gate sync.Once
	var armed atomic.Bool // after Open, which syncs its new segment
	held := make(chan struct{})
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && armed.Load() && strings.HasSuffix(name, segSuffix) {
			first := false
			gate.Do(func() { first = true })
			if first {
				close(held)
				<-release // hold the first segment sync until told
			}
		}
		return n, nil
	})
	o := WithFS(Options{SegmentSize: 64 << 10, Sync: SyncNever}, fsys)
	l := mustOpen(t, dir, &o)
	armed.Store(true)
	rec := bytes.Repeat([]byte("r"), 1000)
	_, err := l.Append(rec)
	noErr(t, err)
	syncDone := make(chan error, 1)
	go func() { syncDone <- l.Sync(context.Background()) }()
	<-held // the sync of the first segment is in flight, and stays

	// Enough to seal the first segment and go on in the second, not to
	// fill that one too: one seal is in flight at a time, and the first
	// waits for the held sync.
	const n = 100
	for range n {
		_, err := l.Append(rec)
		noErr(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		close(release)
		t.Fatalf("Flush while a sync is held: %v (the rotation waited for the sync)", err)
	}
	if st := l.Stats(); st.SegmentsCreated < 1 {
		close(release)
		t.Fatalf("%d segments created after %d KiB: no rotation", st.SegmentsCreated, (n+1)*len(rec)>>10)
	}
	r, err := l.NewReader(0, nil)
	noErr(t, err)
	for want := uint64(1); want <= n+1; want++ {
		if !r.Next() {
			close(release)
			t.Fatalf("record %d not readable while the sync is held: %v", want, r.Err())
		}
	}
	noErr(t, r.Close())
	select {
	case err := <-syncDone:
		t.Fatalf("Sync returned %v while its fdatasync was held", err)
	default:
	}
	close(release)
	noErr(t, <-syncDone)
	noErr(t, l.Sync(context.Background()))
	noErr(t, l.Close())

	l = mustOpen(t, dir, nil)
	defer l.Close()
	r, err = l.NewReader(0, nil)
	noErr(t, err)
	defer r.Close()
	got := 0
	for r.Next() {
		if !bytes.Equal(r.Record(), rec) {
			t.Fatalf("record %d differs after reopen", r.Seq())
		}
		got++
	}
	if got != n+1 || r.Err() != nil {
		t.Fatalf("%d records after reopen, want %d: %v", got, n+1, r.Err())
	}
}

// TestSealAfterFailedSyncDoesNotRetry: an fdatasync of a segment fails
// while a rotation seals that segment (the rotation hands the wait for
// the sync to the sealer). The sealer must not fdatasync the segment
// again: on Linux a second fsync after EIO returns 0 though the page
// cache dropped the data, so a seal that did would report the failed
// segment's records durable, and WaitDurable would acknowledge them.
func TestSealAfterFailedSyncDoesNotRetry(t *testing.T) {
	eio := syscall.EIO
	release := make(chan struct{})
	held := make(chan struct{})
	var armed atomic.Bool // after Open, which syncs its new segment
	var mu sync.Mutex
	failedName := "" // the segment whose sync failed; Protected by mu.
	retries := 0     // later syncs of it; Protected by mu.
	fsys := vfs.WithFaults(vfs.NewMem(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op != vfs.OpSync || !armed.Load() || !strings.HasSuffix(name, segSuffix) {
			return n, nil
		}
		mu.Lock()
		switch failedName {
		case "":
			failedName = name
			mu.Unlock()
			close(held)
			<-release // hold the first segment sync, then fail it
			return 0, eio
		case name:
			retries++
		}
		mu.Unlock()
		return n, nil // as Linux: the fsync after the failed one succeeds
	})
	o := WithFS(Options{SegmentSize: 64 << 10, Sync: SyncNever}, fsys)
	l := mustOpen(t, "/log", &o)
	armed.Store(true)
	rec := bytes.Repeat([]byte("r"), 1000)
	_, err := l.Append(rec)
	noErr(t, err)
	syncDone := make(chan error, 1)
	go func() { syncDone <- l.Sync(context.Background()) }()
	<-held

	// Seal the first segment while its sync is held.
	for range 100 {
		_, err := l.Append(rec)
		noErr(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		close(release)
		t.Fatalf("Flush while a sync is held: %v", err)
	}
	if st := l.Stats(); st.SegmentsCreated < 1 {
		close(release)
		t.Fatalf("no rotation while the sync was held")
	}
	close(release)
	if err := <-syncDone; !errors.Is(err, eio) {
		t.Fatalf("Sync over a failed fdatasync: %v, want EIO", err)
	}
	if err := l.Close(); !errors.Is(err, eio) {
		t.Fatalf("Close after a failed fdatasync: %v, want EIO", err)
	}
	// Close joined the sealer: whatever it did is done.
	mu.Lock()
	n := retries
	mu.Unlock()
	if n != 0 {
		t.Errorf("the segment whose fdatasync failed was synced %d more times", n)
	}
	if d := l.DurableSeq(); d != 0 {
		t.Errorf("DurableSeq %d after the only fdatasync of those records failed", d)
	}
	if err := l.WaitDurable(context.Background(), 1); err == nil {
		t.Errorf("WaitDurable acknowledged a record whose fdatasync failed")
	}
}

// TestMarkAfterInlineSync: a lone waiter's sync (engine.SyncInline) is in
// flight when the flusher makes a pass, so the sink's TickIn has no mark
// due yet; the log then goes quiet. The flusher must come round (its timer,
// or the sync's end waking it), so that the mark covering the record is
// written within about the mark interval. A round whose held sync was the
// flusher's is run again. TestMarkAfterQuietInlineSyncs: the same after a
// run of inline syncs with no pass during them.
func TestMarkAfterInlineSync(t *testing.T) {
	for range 20 {
		if markAfterInlineSync(t) {
			return
		}
	}
	t.Fatal("in 20 rounds the wait never ran its sync itself")
}

func TestMarkAfterQuietInlineSyncs(t *testing.T) {
	dir := t.TempDir()
	o := WithMarkEvery(Options{Sync: SyncNever}, 5*time.Millisecond)
	l := mustOpen(t, dir, &o)
	defer func() { noErr(t, l.Close()) }()
	var seq uint64
	for i := range 50 {
		var err error
		seq, err = l.Append(testPayload(1, i, 100))
		noErr(t, err)
		noErr(t, l.WaitDurable(context.Background(), seq))
	}
	if l.Stats().InlineSyncs == 0 {
		t.Skip("no sync ran on the waiter's goroutine")
	}
	f, err := vfs.OS().OpenFile(filepath.Join(dir, segmentName(1)), os.O_RDONLY, 0)
	noErr(t, err)
	defer f.Close()
	var m frame.Mark
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var b [frame.MarkSize]byte
		_, err := f.ReadAt(b[:], frame.MarkOffset)
		noErr(t, err)
		if m, _ = frame.DecodeMark(b[:]); m.NextSeq > seq {
			return
		}
	}
	t.Fatalf("mark %+v two seconds after seq %d was durable on a quiet log", m, seq)
}

// markAfterInlineSync runs one round of TestMarkAfterInlineSync and
// reports whether the held sync ran on the waiter's goroutine.
func markAfterInlineSync(t *testing.T) (inline bool) {
	dir := t.TempDir()
	release := make(chan struct{})
	held := make(chan struct{})
	var gate sync.Once
	var armed atomic.Bool // after Open, which syncs its new segment
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && armed.Load() && strings.HasSuffix(name, segSuffix) {
			gate.Do(func() {
				close(held)
				<-release // hold the first segment sync until told
			})
		}
		return n, nil
	})
	o := WithMarkEvery(WithFS(Options{Sync: SyncNever}, fsys), 5*time.Millisecond)
	l := mustOpen(t, dir, &o)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer func() {
		free()
		noErr(t, l.Close())
	}()
	armed.Store(true)
	seq, err := l.Append(bytes.Repeat([]byte("r"), 100))
	noErr(t, err)
	done := make(chan error, 1)
	go func() { done <- l.WaitDurable(context.Background(), seq) }()
	<-held
	// Bring the flusher round while the sync is held, and give it time to
	// make its pass and park (idle, or with a timer; either way its pass
	// saw no mark due). Without the time the pass may come after the
	// sync, which is the easy case.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	noErr(t, l.Flush(ctx))
	time.Sleep(20 * time.Millisecond)
	free()
	noErr(t, <-done)
	if l.Stats().InlineSyncs == 0 {
		return false
	}
	f, err := vfs.OS().OpenFile(filepath.Join(dir, segmentName(1)), os.O_RDONLY, 0)
	noErr(t, err)
	defer f.Close()
	var m frame.Mark
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var b [frame.MarkSize]byte
		_, err := f.ReadAt(b[:], frame.MarkOffset)
		noErr(t, err)
		if m, _ = frame.DecodeMark(b[:]); m.NextSeq > seq {
			return true
		}
	}
	t.Fatalf("mark %+v two seconds after seq %d was durable on a quiet log", m, seq)
	return true
}
