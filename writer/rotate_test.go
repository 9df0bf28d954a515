package writer

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/vfs"
)

// rotateFiles returns the contents of the log at path and its backups,
// oldest first (backups sort by the time in their names; the current file
// is last), gzipped backups decompressed.
func rotateFiles(t testing.TB, fsys vfs.FS, path string) (names []string, contents [][]byte) {
	t.Helper()
	dir := filepath.Dir(path)
	list, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list {
		if _, ok := backupTime(path, n, false); ok {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		a, _ = trimCompressed(a)
		b, _ = trimCompressed(b)
		return strings.Compare(a, b)
	})
	names = append(names, filepath.Base(path))
	for _, n := range names {
		b, err := decompressed(n, readVFS(t, fsys, filepath.Join(dir, n)))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		contents = append(contents, b)
	}
	return names, contents
}

func readVFS(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

// writeRecords has each of producers goroutines write n payload records of
// 40 to 295 bytes to w, and returns the per-writer counts.
func writeRecords(t testing.TB, w io.Writer, producers, n int) []uint64 {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for c := range n {
				var err error
				buf, err = payload.Append(buf[:0], p, uint64(c), 40+(c*7+p)%256)
				if err != nil {
					errs <- err
					return
				}
				if _, err := w.Write(buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	expect := make([]uint64, producers)
	for i := range expect {
		expect[i] = uint64(n)
	}
	return expect
}

// checkRotated checks that the files hold every record exactly once, whole
// and in per-producer order, that no file splits a record (each ends with
// a newline and starts with a record), and that no file exceeds maxBytes.
func checkRotated(t *testing.T, names []string, contents [][]byte, expect []uint64, maxBytes int64) {
	t.Helper()
	k, err := payload.NewChecker(payload.Options{Expect: expect})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range contents {
		if int64(len(b)) > maxBytes {
			t.Errorf("%s holds %d bytes, above MaxBytes %d", names[i], len(b), maxBytes)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Errorf("%s ends inside a record: %q", names[i], b[max(0, len(b)-20):])
		}
		if len(b) > 0 {
			line, _, _ := bytes.Cut(b, []byte("\n"))
			if _, _, err := payload.Decode(append(line, '\n')); err != nil {
				t.Errorf("%s starts inside a record: %v", names[i], err)
			}
		}
		k.Write(b)
	}
	if res := k.Finish(); !res.OK() {
		t.Fatalf("records across %d files: %v", len(contents), res.Err())
	}
}

// TestRotateProducers writes from 8 and 64 goroutines through a Ring that
// rotates hundreds of times, compressed and not, and checks that the files
// together hold every record exactly once, whole, in per-producer order.
func TestRotateProducers(t *testing.T) {
	for _, producers := range []int{8, 64} {
		for _, codec := range []Compression{NoCompression, Gzip, Zstd} {
			compress := codec != NoCompression
			if compress && producers > 8 {
				continue // compression does not depend on the producers
			}
			t.Run(fmt.Sprintf("producers=%d/compression=%d", producers, codec), func(t *testing.T) {
				path := filepath.Join(memTempDir(t), "app.log")
				rot := &Rotate{MaxBytes: MinRotateBytes, Compression: codec}
				r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: rot})
				if err != nil {
					t.Fatal(err)
				}
				n := 24000 / producers * 10
				if compress {
					n /= 4 // gzip under the race detector is slow
				}
				expect := writeRecords(t, r, producers, n)
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				st := r.Stats()
				if st.Rotations < uint64(200*n/(24000/producers*10)) {
					t.Errorf("%d rotations, want hundreds", st.Rotations)
				}
				if st.RotationErrors != 0 {
					t.Errorf("%d rotation errors", st.RotationErrors)
				}
				names, contents := rotateFiles(t, vfs.OS(), path)
				if uint64(len(names)) != st.Rotations+1 {
					t.Errorf("%d files after %d rotations", len(names), st.Rotations)
				}
				for _, n := range names[:len(names)-1] {
					if want := compressedExt(codec); !strings.HasSuffix(n, ".log"+want) {
						t.Errorf("backup %s with Compression %d, want suffix .log%s", n, codec, want)
					}
				}
				checkRotated(t, names, contents, expect, rot.MaxBytes)
			})
		}
	}
}

// TestRotatePrune checks that backups are pruned to MaxBackups and that the
// records in the files kept are the newest ones, whole and in order.
func TestRotatePrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	rot := &Rotate{MaxBytes: MinRotateBytes, MaxBackups: 3, Compress: true}
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: rot})
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, r, 1, 5000)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := r.Stats().Rotations; n < 10 {
		t.Fatalf("%d rotations", n)
	}
	names, contents := rotateFiles(t, vfs.OS(), path)
	if len(names) != rot.MaxBackups+1 {
		t.Fatalf("files %v, want %d backups and the log", names, rot.MaxBackups)
	}
	// The kept files continue each other and end with the last record.
	k, err := payload.NewChecker(payload.Options{Writers: 1, Gaps: true})
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, b := range contents {
		all = append(all, b...)
	}
	k.Write(all)
	if res := k.Finish(); !res.OK() {
		t.Fatal(res.Err())
	}
	if k.Next(0) != 5000 {
		t.Errorf("the kept files end before record %d, want 5000", k.Next(0))
	}
	first, _, _ := bytes.Cut(all, []byte("\n"))
	_, c, err := payload.Decode(append(first, '\n'))
	if err != nil {
		t.Fatal(err)
	}
	// Three full backups and the log hold more than 3 files' worth.
	if c == 0 || uint64(len(all)) < 3*uint64(rot.MaxBytes-1<<_markShift-300) {
		t.Errorf("kept files start at record %d, %d bytes", c, len(all))
	}
}

// TestRotatePruneKeepsLookalikes: files that time.Parse reads as a
// backup's name but that rotation never writes (a comma before the
// milliseconds) are someone else's: pruning to MaxBackups never deletes
// them.
func TestRotatePruneKeepsLookalikes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	lookalikes := []string{"app-2020-01-01T00-00-00,000.log", "app-2020-01-01T00-00-00,000.log.gz"}
	for _, n := range lookalikes {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("not a backup\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes, MaxBackups: 1}})
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, r, 1, 2000)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := r.Stats().Rotations; n < 3 {
		t.Fatalf("%d rotations", n)
	}
	for _, n := range lookalikes {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(b) != "not a backup\n" {
			t.Errorf("%s: %q, %v: pruning took it for a backup", n, b, err)
		}
	}
}

// TestRotateMaxAgeAndTotal checks the other pruning limits on backups
// made by hand: by age (the time in the name, on the Ring's clock) and by
// total size, oldest first.
func TestRotateMaxAgeAndTotal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := newFakeClockAt(now)
	ages := []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 50 * time.Hour}
	for _, a := range ages {
		if err := os.WriteFile(backupName(path, now.Add(-a)), bytes.Repeat([]byte("x\n"), 500), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenFile(path, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes, MaxAge: 24 * time.Hour, MaxTotalBytes: 2500}, clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, a := range ages {
		if _, err := os.Stat(backupName(path, now.Add(-a))); err == nil {
			kept = append(kept, a.String())
		}
	}
	// 50h is too old; 3h would take the total to 3000 bytes.
	if want := []string{"1h0m0s", "2h0m0s"}; !slices.Equal(kept, want) {
		t.Errorf("kept backups %v old, want %v", kept, want)
	}
}

// TestRotateNames checks lumberjack's naming and that names stay unique,
// and sort by age, when rotations come within one millisecond.
func TestRotateNames(t *testing.T) {
	at := time.Date(2026, 11, 23, 21, 5, 7, 123456789, time.UTC)
	if got, want := backupName("/var/log/app.log", at), "/var/log/app-2026-11-23T21-05-07.123.log"; got != want {
		t.Errorf("backupName = %s, want %s", got, want)
	}
	for _, n := range []string{"app-2026-11-23T21-05-07.123.log", "app-2026-11-23T21-05-07.123.log.gz"} {
		if got, ok := backupTime("/var/log/app.log", n, false); !ok || !got.Equal(at.Truncate(time.Millisecond)) {
			t.Errorf("backupTime(%s) = %v, %v", n, got, ok)
		}
	}
	for _, n := range []string{"app.log", "app-2026-11-23T21-05-07.123.log.gz.tmp", "other-2026-11-23T21-05-07.123.log", "app-2026-11-23T21-05-07.12x.log"} {
		if _, ok := backupTime("/var/log/app.log", n, false); ok {
			t.Errorf("backupTime(%s) took it for a backup", n)
		}
	}
	path := filepath.Join(t.TempDir(), "app.log")
	clk := newFakeClockAt(at) // never advanced: every rotation at one instant
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes}, clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	expect := writeRecords(t, r, 2, 2000)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	names, contents := rotateFiles(t, vfs.OS(), path)
	if len(names) < 10 {
		t.Fatalf("%d files", len(names))
	}
	checkRotated(t, names, contents, expect, MinRotateBytes)
}

// TestRotateReopenFull checks that OpenFile with Rotate on a file already
// at MaxBytes rotates it before writing, and that rotation carries on from
// the backups a previous Ring left.
func TestRotateReopenFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	old := bytes.Repeat([]byte("old line\n"), MinRotateBytes/9+1)
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFile(path, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("new line\n"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	names, contents := rotateFiles(t, vfs.OS(), path)
	if len(names) != 2 || !bytes.Equal(contents[0], old) || string(contents[1]) != "new line\n" {
		t.Fatalf("files %v: %d and %q bytes", names, len(contents[0]), contents[len(contents)-1])
	}
}

// TestRotateFullDisk runs out of space during rotations and compressions:
// the error is reported (sticky for the log's own writes, counted and
// passed to OnError for compression), and nothing already written is
// deleted: every record written before the failure is still in a file.
func TestRotateFullDisk(t *testing.T) {
	for _, limit := range []int64{3 * MinRotateBytes, 6 * MinRotateBytes, 9*MinRotateBytes + 100} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			mem := vfs.NewMem()
			if err := mem.MkdirAll("/log", 0o755); err != nil {
				t.Fatal(err)
			}
			fsys := vfs.WithFaults(mem, vfs.ENOSPCAfter(limit))
			var mu sync.Mutex
			var reported []error
			path := "/log/app.log"
			r, err := OpenFile(path, &RingOptions{
				Size:     64 << 10,
				Rotate:   &Rotate{MaxBytes: MinRotateBytes, Compress: true},
				OnError:  func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() },
				fsys:     fsys,
				lockFile: noLock,
			})
			if err != nil {
				t.Fatal(err)
			}
			var buf []byte
			synced := 0 // records acknowledged by a Sync
			for c := range 3000 {
				buf, _ = payload.Append(buf[:0], 0, uint64(c), 100)
				if _, err := r.Write(buf); err != nil {
					break
				}
				if c%100 == 99 {
					if err := r.Sync(); err != nil {
						break
					}
					synced = c + 1
				}
			}
			cerr := r.Close()
			if cerr == nil || !errors.Is(cerr, syscall.ENOSPC) {
				t.Fatalf("Close = %v, want ENOSPC", cerr)
			}
			mu.Lock()
			for _, e := range reported {
				if !errors.Is(e, syscall.ENOSPC) {
					t.Errorf("reported %v, want ENOSPC", e)
				}
			}
			mu.Unlock()
			// Every record acknowledged by a Sync is in the files, once.
			names, contents := rotateFiles(t, mem, path)
			k, err := payload.NewChecker(payload.Options{Writers: 1, Gaps: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range contents {
				// The last file may end with a torn record (ENOSPC
				// mid-write); whole lines only.
				if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
					k.Write(b[:i+1])
				}
			}
			res := k.Finish()
			if !res.OK() || k.Next(0) < uint64(synced) || synced == 0 {
				t.Fatalf("files %v: next record %d, %d synced: %v", names, k.Next(0), synced, res.Err())
			}
		})
	}
}

// newFakeClockAt returns a fake clock that reads t until advanced.
func newFakeClockAt(t time.Time) *clock.Fake { return clock.NewFake(t) }

// memTempDir returns a new directory in /dev/shm (a tmpfs, where fsync
// costs nothing) if there is one, else t.TempDir(): for tests that rotate
// hundreds of times and check records, not durability.
func memTempDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "appendlog-rotate-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// rotateCrashKind is the crash child's Ring that rotates every 32 KiB and
// compresses its backups (see TestKillMidRotation).
func rotateCrashKind() crashKind {
	return crashKind{"ring-rotate", tornTail{}, func(path string) (Writer, error) {
		return OpenFile(path, &RingOptions{Size: 256 << 10, Rotate: crashRotate()})
	}}
}

func crashRotate() *Rotate { return &Rotate{MaxBytes: 32 << 10, Compress: true} }

// TestKillMidRotation kills (SIGKILL) a process writing from 4 goroutines
// through a Ring that rotates and compresses every 32 KiB while it syncs
// in a loop, then opens the log again (which finishes an interrupted
// compression) and checks the files: read oldest first, they hold every
// record acknowledged by a Sync exactly once, whole, in per-producer
// order, with at most one torn record at the very end.
//
// Each kill must hit a child rotating: one that rotated after the last
// acknowledgement read (a new backup appeared) and was alive until the
// kill. Only such kills count, and the test needs _crashTrials of them.
func TestKillMidRotation(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	hits := 0
	for trial := 0; hits < _crashTrials; trial++ {
		if trial == _crashMaxTrials {
			t.Fatalf("%d of %d kills hit a child rotating, want %d", hits, trial, _crashTrials)
		}
		path := filepath.Join(t.TempDir(), "app.log")
		acks := 3 + rng.IntN(10)
		pause := time.Duration(rng.IntN(3000)) * time.Microsecond
		run := runCrashChild(t, "ring-rotate", path, acks, pause, backupCount(path))
		r, err := OpenFile(path, &RingOptions{Rotate: crashRotate()})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		names, contents := rotateFiles(t, vfs.OS(), path)
		var data []byte
		for i, b := range contents {
			if i < len(contents)-1 && len(b) > 0 && b[len(b)-1] != '\n' {
				t.Fatalf("backup %s ends inside a record", names[i])
			}
			data = append(data, b...)
		}
		got := verifyCrashed(t, data, tornTail{}, run.acked)
		if run.working {
			hits++
		}
		t.Logf("trial %d: %d backups at ack %d, then a rotation (working: %v), killed %v later: %d backups; %d files, %d bytes, %d records (%d acked: %v)",
			trial, run.before, acks, run.working, pause, run.after, len(names), len(data), got, total(run.acked), run.acked)
	}
}

// backupCount returns a progress probe for runCrashChild: the number of
// backups of the log at path, compressed or not (crashRotate prunes
// none, so the count only grows).
func backupCount(path string) func() int64 {
	return func() int64 {
		ents, err := os.ReadDir(filepath.Dir(path))
		if err != nil {
			return 0
		}
		seen := make(map[string]bool)
		for _, e := range ents {
			if _, ok := backupTime(path, e.Name(), false); ok {
				name, _ := trimCompressed(e.Name())
				seen[name] = true
			}
		}
		return int64(len(seen))
	}
}

// TestRotateRecover: OpenFile finishes a compression a crash interrupted.
// A backup whose .gz is in place (renamed there only once complete and
// synced) loses the original; a .gz.tmp is removed; other files are kept.
func TestRotateRecover(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	done := backupName(path, at)                     // compressed, original left
	half := backupName(path, at.Add(time.Second))    // compression under way
	zdone := backupName(path, at.Add(2*time.Second)) // the same with zstd
	zhalf := backupName(path, at.Add(3*time.Second)) //
	other := filepath.Join(dir, "app-notes.log")     // not a backup
	stray := filepath.Join(dir, "app-notes.log.tmp") // not a backup's temporary file
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("a\n"))
	zw.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zst := enc.EncodeAll([]byte("a\n"), nil)
	enc.Close()
	for name, data := range map[string][]byte{
		done: []byte("a\n"), done + ".gz": gz.Bytes(),
		half: []byte("b\n"), half + ".gz.tmp": gz.Bytes()[:5],
		zdone: []byte("a\n"), zdone + ".zst": zst,
		zhalf: []byte("b\n"), zhalf + ".zst.tmp": zst[:3],
		other: []byte("c\n"), stray: []byte("d\n"),
	} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenFile(path, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := []string{filepath.Base(done) + ".gz", filepath.Base(half), filepath.Base(zdone) + ".zst", filepath.Base(zhalf), "app-notes.log", "app-notes.log.tmp", "app.log"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
}

// TestPowerCutMidRotation cuts the power (vfs.MemFS.Crash: only synced
// data and directory entries survive) under a Ring that rotates every 16
// KiB while 4 goroutines write, after a few acknowledged Syncs, and checks
// that the files left, oldest first, hold every acknowledged record once,
// whole and in per-producer order: Sync covers the files rotated away
// from (their data and their renames), not only the current one.
func TestPowerCutMidRotation(t *testing.T) {
	for trial := range 8 {
		rng := rand.New(rand.NewPCG(uint64(trial), 5))
		mem := vfs.NewMem()
		if err := vfs.MkdirAllDurable(mem, "/logs"); err != nil {
			t.Fatal(err)
		}
		const path = "/logs/app.log"
		r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes}, fsys: mem, lockFile: noLock})
		if err != nil {
			t.Fatal(err)
		}
		var counts producerCounts
		var stop atomic.Bool
		var wg sync.WaitGroup
		cleanup := func() { stop.Store(true); wg.Wait() }
		defer cleanup() // on a failure too: the producers write to memory
		for id := range _crashProducers {
			wg.Go(func() {
				var b []byte
				for c := 0; c < 1_000_000 && !stop.Load(); c++ {
					b = appendRecord(b[:0], id, c)
					if _, err := r.Write(b); err != nil {
						return // the file system is gone
					}
					counts[id].Store(int64(c + 1))
				}
			})
		}
		var acked []int
		for range 2 + rng.IntN(5) {
			for prev := total(counts.snapshot()); total(counts.snapshot()) < prev+300 && r.Err() == nil; {
				runtime.Gosched()
			}
			snap := counts.snapshot()
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			acked = snap
		}
		crashed := mem.Crash(nil)
		stop.Store(true)
		if err := r.Close(); err == nil {
			t.Fatal("Close succeeded on a file system that lost power")
		}
		wg.Wait()
		if _, err := crashed.Stat(path); errors.Is(err, fs.ErrNotExist) {
			// The cut came after a rotation's rename was made durable
			// (by the closer's or the janitor's directory sync) and
			// before the new file's creation was: every record is in the
			// backups, and OpenFile makes the file anew.
			f, err := crashed.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		names, contents := rotateFiles(t, crashed, path)
		var data []byte
		for _, b := range contents {
			data = append(data, b...)
		}
		got := verifyCrashed(t, data, tornTail{}, acked)
		t.Logf("trial %d: %d files, %d records kept, acked %v, %d rotations", trial, len(names), got, acked, r.Stats().Rotations)
	}
}

// waitDeadline waits until clk has a timer armed for at, or fails.
func waitDeadline(t *testing.T, clk *clock.Fake, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		ch := clk.Changed()
		if slices.ContainsFunc(clk.Deadlines(), at.Equal) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no timer armed for %v (armed: %v)", at, clk.Deadlines())
		}
	}
}

// TestRotateEvery checks the schedule (Rotate.Every with no size limit)
// on a fake clock: records written before an hour boundary end the old
// file and those after start the next, and a period with no record makes
// no file.
func TestRotateEvery(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 500e6, time.UTC)
	hour := func(n int) time.Time { return base.Truncate(time.Hour).Add(time.Duration(n) * time.Hour) }
	clk := newFakeClockAt(base)
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{Every: time.Hour}, clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	period := func(p int) []byte {
		var b []byte
		for i := range 300 {
			line := fmt.Appendf(nil, "period %d line %03d\n", p, i)
			mustWrite(t, r, line)
			b = append(b, line...)
		}
		if err := r.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		return b
	}
	next := func(n int) { // advance to hour n; the schedule then arms hour n+1
		waitDeadline(t, clk, hour(n))
		clk.Advance(hour(n).Sub(clk.Now()))
		waitDeadline(t, clk, hour(n+1))
	}
	// A boundary before the first record makes no file.
	next(1)
	want := [][]byte{period(1)}
	// Crossing 02:00 asks for a cut before the next record.
	next(2)
	want = append(want, period(2))
	// Two boundaries with nothing written: one cut, no empty file.
	next(3)
	next(4)
	want = append(want, period(4))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Rotations != 2 || st.RotationErrors != 0 {
		t.Errorf("%d rotations, %d errors; want 2, 0", st.Rotations, st.RotationErrors)
	}
	names, contents := rotateFiles(t, vfs.OS(), path)
	if len(contents) != len(want) {
		t.Fatalf("files %v, want %d", names, len(want))
	}
	for i := range want {
		if !bytes.Equal(contents[i], want[i]) {
			t.Errorf("%s holds %d bytes (%.40q…), want period %d's %d bytes", names[i], len(contents[i]), contents[i], i, len(want[i]))
		}
	}
}

// TestRotateEveryValidate checks the limits of Every and MaxBytes.
func TestRotateEveryValidate(t *testing.T) {
	for _, tc := range []struct {
		rot Rotate
		ok  bool
	}{
		{Rotate{Every: time.Hour}, true},
		{Rotate{Every: time.Hour, MaxBytes: MinRotateBytes}, true},
		{Rotate{Every: time.Millisecond}, false},
		{Rotate{}, false},
		{Rotate{MaxBytes: MinRotateBytes, Compression: Zstd + 1}, false},
	} {
		if err := tc.rot.validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: validate = %v", tc.rot, err)
		}
	}
}

// TestRotateRenamedWhileOpened renames the file a rotation just locked
// before the rotation opens it, as logrotate's rename may: the Ring must
// not write a file other than the one it locked, and the Reopen that
// follows must not take that file for a new one (it did, and the next
// backup held MaxBytes plus everything written before the Reopen).
func TestRotateRenamedWhileOpened(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	locks := 0
	lock := func(p string, perm os.FileMode) (io.Closer, error) {
		l, err := lockFile(p, perm)
		if locks++; locks == 2 { // the first rotation's next file
			if err := os.Rename(p, filepath.Join(dir, "app.log.1")); err != nil {
				t.Error(err)
			}
		}
		return l, err
	}
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes}, lockFile: lock})
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for c := range 600 {
		if c == 200 {
			if err := r.Reopen(); err != nil {
				t.Fatal(err)
			}
		}
		buf, _ = payload.Append(buf[:0], 0, uint64(c), 100)
		mustWrite(t, r, buf)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	names, contents := rotateFiles(t, vfs.OS(), path)
	checkRotated(t, names, contents, []uint64{600}, MinRotateBytes)
	if b := readFile(t, filepath.Join(dir, "app.log.1")); len(b) != 0 {
		t.Errorf("the file renamed away holds %d bytes", len(b))
	}
}
