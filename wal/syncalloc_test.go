package wal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/wal"
)

// TestSyncedAppendAllocs pins the allocations of one synced append at a
// time (Append, then WaitDurable) on a warm log: none. The sync handed to
// the engine's syncer is one reused job, and the waiter waits on a pooled
// engine.Waiter rather than a channel made per wait.
func TestSyncedAppendAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("syncs a few hundred times")
	}
	l := openLog(t, t.TempDir(), nil) // SyncBatch
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	p := payloadTemplate(128)
	var opErr error
	appendSync := func() {
		seq, err := l.Append(p)
		if err == nil {
			err = l.WaitDurable(ctx, seq)
		}
		if err != nil && opErr == nil {
			opErr = err
		}
	}
	for range 50 {
		appendSync()
	}
	allocs := testing.AllocsPerRun(200, appendSync)
	if opErr != nil {
		t.Fatal(opErr)
	}
	if allocs != 0 {
		t.Errorf("Append + WaitDurable of 128 bytes: %v allocs per call, want 0", allocs)
	}
}

// TestSyncedAppendSyscalls counts, through the file system, what one
// synced append at a time costs on a warm log: one write (the record,
// with any zero padding in the same call) and one fdatasync, and nothing
// else. The durable mark trails the syncs (its interval is set out of
// reach here); the sync that writes one is the only one with two writes.
// (Once per 256 KiB of records the padding adds three writes of zeros,
// see TestZeroPadding; the counted appends stay inside one such span.)
func TestSyncedAppendSyscalls(t *testing.T) {
	if testing.Short() {
		t.Skip("syncs a few hundred times")
	}
	var counting atomic.Bool
	var writes, syncs, other atomic.Int64
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if !counting.Load() {
			return n, nil
		}
		switch {
		case op == vfs.OpWrite && strings.HasSuffix(name, ".seg"):
			writes.Add(1)
		case op == vfs.OpSync && strings.HasSuffix(name, ".seg"):
			syncs.Add(1)
		default:
			other.Add(1)
		}
		return n, nil
	})
	o := wal.WithMarkEvery(wal.WithFS(wal.Options{Sync: wal.SyncBatch}, fsys), time.Hour)
	dir := t.TempDir()
	l := openLog(t, dir, &o)
	p := payloadTemplate(128)
	for range 3 {
		appendDurable(t, l, p) // the first sync's mark is written by the second
	}
	const n = 300 // 300 × 144 B crosses no segment and no padding boundary
	counting.Store(true)
	for range n {
		appendDurable(t, l, p)
	}
	counting.Store(false)
	if w, s, x := writes.Load(), syncs.Load(), other.Load(); w != n || s != n || x != 0 {
		t.Errorf("%d synced appends: %d writes, %d fdatasyncs and %d other file operations; want %d, %d and 0", n, w, s, x, n, n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Close writes the final mark.
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	m := readMark(t, segs[0])
	if m.NextSeq != n+3+1 {
		t.Errorf("mark after Close: next seq %d, want %d", m.NextSeq, n+3+1)
	}
}

// readMark returns the durable mark in the header of the segment file at path.
func readMark(t *testing.T, path string) frame.Mark {
	t.Helper()
	f, err := vfs.OS().OpenFile(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [frame.MarkSize]byte
	if _, err := f.ReadAt(b[:], frame.MarkOffset); err != nil {
		t.Fatal(err)
	}
	m, ok := frame.DecodeMark(b[:])
	if !ok {
		t.Fatalf("%s: no valid durable mark", path)
	}
	return m
}

// TestDurableMarkTrailsSyncs: a log that goes quiet after a synced append
// gets the mark covering it written within about the mark interval, with
// no further sync and no Close; with the interval out of reach it is not
// (the mark is written by syncs and timers, not by every sync).
func TestDurableMarkTrailsSyncs(t *testing.T) {
	for _, every := range []time.Duration{5 * time.Millisecond, time.Hour} {
		o := wal.WithMarkEvery(wal.Options{Sync: wal.SyncBatch}, every)
		dir := t.TempDir()
		l := openLog(t, dir, &o)
		var last uint64
		for range 3 {
			last = appendDurable(t, l, payloadTemplate(128))
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		deadline := time.Now().Add(2 * time.Second)
		if every == time.Hour {
			deadline = time.Now().Add(50 * time.Millisecond)
		}
		var m frame.Mark
		for time.Now().Before(deadline) {
			if m = readMark(t, segs[0]); m.NextSeq > last {
				break
			}
			time.Sleep(time.Millisecond)
		}
		covered := m.NextSeq > last
		if want := every != time.Hour; covered != want {
			t.Errorf("mark interval %v: mark %+v after seq %d was durable: covers it %v, want %v", every, m, last, covered, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestZeroPadding: while the log's syncs are small, a small write that
// enters space the segment file has not had written is followed, in the
// same call, by zeros up to the next 256 KiB (one extent conversion for
// many syncs); writes inside that space are not padded, nor is a large
// write, nor a write before any sync or after a sync that covered 64 KiB
// or more; the file never grows past its preallocated size; and the log
// reads back whole.
func TestZeroPadding(t *testing.T) {
	const zeroAhead = 256 << 10
	type write struct{ off, n int64 }
	var mu sync.Mutex
	var writes []write
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpWrite && strings.HasSuffix(name, ".seg") && off >= 4096 {
			mu.Lock()
			writes = append(writes, write{off, int64(n)})
			mu.Unlock()
		}
		return n, nil
	})
	const segSize = 4 << 20
	o := wal.WithFS(wal.Options{Sync: wal.SyncBatch, SegmentSize: segSize}, fsys)
	dir := t.TempDir()
	l := openLog(t, dir, &o)
	ctx := context.Background()
	p := payloadTemplate(128)
	const rec = 128 + frame.HeaderSize
	small := (zeroAhead + 4096) / rec // crosses the first 256 KiB boundary
	for range small {
		appendDurable(t, l, p)
	}
	big := make([][]byte, 2048) // 288 KiB in one batch: one large write, past the padding
	for i := range big {
		big[i] = p
	}
	seq, err := l.AppendBatch(big)
	if err == nil {
		err = l.WaitDurable(ctx, seq+uint64(len(big))-1)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The sync of the batch covered 288 KiB: the next write is not padded;
	// the sync of that one covered a record: the one after it is.
	appendDurable(t, l, p)
	appendDurable(t, l, p)
	mu.Lock()
	got := slices.Clone(writes)
	mu.Unlock()
	// What each write into new space was, in order, and how many writes
	// stayed inside the written space. Padding is a write of records and
	// zeros up to a multiple of padPiece, then writes of zeros alone, each
	// at most padPiece, the last ending on a multiple of zeroAhead.
	const padPiece = 64 << 10
	var entered []string
	plain := 0
	end := int64(0) // the file offset every earlier write reached
	for _, w := range got {
		e := w.off + w.n
		padding := len(entered) > 0 && entered[len(entered)-1] == "padding"
		switch {
		case e <= end && w.n%rec != 0:
			t.Errorf("write at %d of %d bytes inside the written space: padded (not whole records)", w.off, w.n)
		case e <= end:
			plain++
		case padding && w.off == end && w.off%padPiece == 0 && w.n <= padPiece && e%padPiece == 0:
			// a piece of zeros: the padding goes on
		case padding:
			t.Errorf("write at %d of %d bytes after padding that ended at %d, not on a multiple of %d", w.off, w.n, end, zeroAhead)
		case e%padPiece == 0 && w.n%rec != 0:
			if w.n >= 2*padPiece { // small records, then zeros to the next multiple of padPiece
				t.Errorf("write at %d of %d bytes: records and more than a piece of zeros in one write", w.off, w.n)
			}
			entered = append(entered, "padding")
		case w.n%rec != 0:
			t.Errorf("write at %d of %d bytes entered new space and ends at %d: padded, but not to a multiple of %d", w.off, w.n, e, padPiece)
		case w.n >= 64<<10:
			entered = append(entered, "large")
		default:
			entered = append(entered, "unpadded")
		}
		end = max(end, e)
		if len(entered) > 0 && entered[len(entered)-1] == "padding" && end%zeroAhead == 0 {
			entered[len(entered)-1] = "padded"
		}
	}
	want := []string{
		"unpadded", // before any sync
		"padded",   // after a small sync
		"padded",   // crossing 256 KiB
		"large",    // the batch
		"unpadded", // after the batch's sync
		"padded",   // after a small sync again
	}
	if !slices.Equal(entered, want) || plain < small-3 {
		t.Errorf("%d writes: into new space %q, want %q; %d inside the written space, want about %d",
			len(got), entered, want, plain, small)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if fi, err := os.Stat(segs[0]); err != nil || fi.Size() != segSize {
		t.Errorf("segment size %v (%v), want the preallocated %d", fi.Size(), err, segSize)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	total := uint64(small + len(big) + 2)
	rep, err := wal.Verify(dir, nil)
	if err != nil || rep.Records != total || rep.Torn != nil {
		t.Fatalf("verify: %+v, %v; want %d records, no torn tail", rep, err, total)
	}
}

// TestDurableMarkNeverClaimsAFailedSync: once an fdatasync fails, no mark
// written afterwards (by a later sync, the quiet-log timer, or Close)
// claims the records that sync was to make durable: the header still names
// the last record a sync made durable.
func TestDurableMarkNeverClaimsAFailedSync(t *testing.T) {
	var failing atomic.Bool
	fsys := vfs.WithFaults(vfs.OS(), func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && failing.Load() && strings.HasSuffix(name, ".seg") {
			return 0, syscall.EIO
		}
		return n, nil
	})
	o := wal.WithMarkEvery(wal.WithFS(wal.Options{Sync: wal.SyncBatch}, fsys), time.Millisecond)
	dir := t.TempDir()
	l := openLog(t, dir, &o)
	ctx := context.Background()
	p := payloadTemplate(128)
	for range 3 {
		appendDurable(t, l, p)
	}
	// The quiet-log timer writes the mark of record 3.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	for deadline := time.Now().Add(5 * time.Second); readMark(t, segs[0]).NextSeq != 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("mark before the failure: next seq %d, want 4", readMark(t, segs[0]).NextSeq)
		}
	}
	failing.Store(true)
	for range 2 {
		seq, err := l.Append(p)
		if err == nil {
			err = l.WaitDurable(ctx, seq)
		}
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("append after a failed fdatasync: %v, want EIO", err)
		}
	}
	time.Sleep(20 * time.Millisecond) // time for any timer to write a mark
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close after a failed fdatasync: %v, want EIO", err)
	}
	if m := readMark(t, segs[0]); m.NextSeq != 4 {
		t.Fatalf("mark after the failed sync and Close: next seq %d, want 4 (no record after 3 was made durable)", m.NextSeq)
	}
}

// appendDurable appends p to l and waits until it is durable.
func appendDurable(tb testing.TB, l *wal.Log, p []byte) uint64 {
	tb.Helper()
	seq, err := l.Append(p)
	if err == nil {
		err = l.WaitDurable(context.Background(), seq)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return seq
}
