package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/vfs"
)

// testPayload returns record i of writer g, of size bytes (at least
// payload.MinSize): a package payload record, which proves its writer,
// counter and every byte.
func testPayload(g, i int, size int) []byte {
	p, err := payload.Append(nil, g, uint64(i), max(size, payload.MinSize))
	if err != nil {
		panic(fmt.Sprintf("testPayload(%d, %d, %d): %v", g, i, size, err))
	}
	return p
}

// parsePayload checks a record testPayload made and returns its writer
// and counter.
func parsePayload(p []byte) (g, i int, err error) {
	w, c, err := payload.Decode(p)
	return w, int(c), err
}

// readAll reads every record and checks the log's invariants: payloads
// intact, each writer's counters strictly increasing.
func readAll(t *testing.T, fsys vfs.FS, dir string) map[uint64][]byte {
	t.Helper()
	r, err := OpenReader(dir, 0, &Options{fsys: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k, err := payload.NewChecker(payload.Options{Gaps: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]byte{}
	for r.Next() {
		if pr := k.Check(r.Record(), -1, r.Seq()); pr != nil {
			seg, off := r.Position()
			t.Fatalf("%s@%d: garbled or out-of-order record visible: %v", seg, off, pr)
		}
		out[r.Seq()] = append([]byte(nil), r.Record()...)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reader: %v", err)
	}
	return out
}

type ack struct {
	seq  uint64
	g, i int
}

// TestCrashRecoveryKeepsEveryDurableAck cuts the power (MemFS.Crash) at
// random moments while writers append. In SyncBatch and SyncInterval
// trials the writers wait for durability (WaitDurable), and every record
// acknowledged durable must survive. In SyncNever trials nothing but the
// rotations syncs: the writers only Flush, handing their records to the
// OS. A process kill taken at the same moment (killCopy, with the log's
// file operations paused) must keep every record Flush returned for; the
// power cut may lose them, but the log must open with a prefix of whole
// records that holds every record DurableSeq said was durable.
func TestCrashRecoveryKeepsEveryDurableAck(t *testing.T) {
	trials := 40
	if testing.Short() {
		trials = 10
	}
	var torn, ackedTotal, cutTotal, inFlight int
	var inline uint64 // syncs a lone waiter ran on its own goroutine
	var midSeal int   // process kills with records under spareName
	defer func() {
		t.Logf("%d trials: %d durable acks checked, %d cuts with unsynced bytes, %d torn tails cut (%d bytes), %d inline syncs, %d process kills mid-seal", trials, ackedTotal, inFlight, torn, cutTotal, inline, midSeal)
		if !t.Failed() && (torn == 0 || inFlight < trials/2 || inline == 0 || midSeal == 0 && !testing.Short()) {
			t.Errorf("the crash trials exercised too little: %d torn tails, %d of %d cuts with unsynced bytes (want %d), %d inline syncs, %d process kills mid-seal", torn, inFlight, trials, trials/2, inline, midSeal)
		}
	}()
	for trial := range trials {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(trial), 99))
			fsys := vfs.NewMem()
			// Slow fsyncs keep written-but-unsynced bytes in flight when the
			// power is cut, as on a real disk. pending counts, per file, the
			// bytes written since the last fsync of it began (a write racing
			// an fsync counts as pending).
			syncDelay := time.Duration(rng.IntN(2000)) * time.Microsecond
			var pmu sync.Mutex
			pending := map[string]int{}
			slow := vfs.WithFaults(fsys, func(op vfs.Op, name string, off int64, n int) (int, error) {
				switch op {
				case vfs.OpSync:
					time.Sleep(syncDelay)
					pmu.Lock()
					delete(pending, name)
					pmu.Unlock()
				case vfs.OpWrite:
					pmu.Lock()
					pending[name] += n
					pmu.Unlock()
				}
				return n, nil
			})
			gate := &pauseFS{FS: slow, mu: new(sync.RWMutex)}
			opts := &Options{fsys: gate, SegmentSize: 64 << 10, BufferSize: 64 << 10, BatchAge: time.Millisecond}
			never := trial%3 == 1
			if never {
				opts.Sync = SyncNever
			}
			if trial%3 == 2 {
				opts.Sync = SyncInterval
				opts.SyncEvery = time.Millisecond
			}
			const dir = "/log"
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var acks []ack
			var wg sync.WaitGroup
			working := make(chan struct{}) // closed at the first ack
			var once sync.Once
			// One writer waits alone for each record, and syncs it on its
			// own goroutine (engine.SyncInline); eight share group commits.
			writers := 8
			if trial%2 == 1 {
				writers = 1
			}
			for g := range writers {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), uint64(trial)))
					for i := 0; ; i++ {
						seq, err := l.Append(testPayload(g, i, 24+r.IntN(400)))
						if err != nil {
							return
						}
						if g%2 == 0 || i%10 == 0 {
							wait := func() error { return l.WaitDurable(context.Background(), seq) }
							if never {
								wait = func() error { return l.Flush(context.Background()) }
							}
							if err := wait(); err != nil {
								return
							}
							mu.Lock()
							acks = append(acks, ack{seq, g, i})
							mu.Unlock()
							once.Do(func() { close(working) })
						}
					}
				})
			}
			// The cut comes a random time after the first durable ack, so
			// that every trial has acks to check, with appends and syncs
			// going on.
			select {
			case <-working:
			case <-time.After(10 * time.Second):
				fsys.Crash(nil) // stops the writers
				wg.Wait()
				l.Close()
				t.Fatal("no durable ack in 10s")
			}
			time.Sleep(time.Duration(rng.IntN(30_000)) * time.Microsecond)
			mu.Lock()
			acked := append([]ack(nil), acks...) // acknowledged before the cut
			mu.Unlock()
			durableAtCut := l.DurableSeq()
			var killed *vfs.MemFS
			if never {
				// A process kill at this moment: what the files hold,
				// with no file operation of the log under way.
				gate.mu.Lock()
				killed = killCopy(t, fsys, dir)
				gate.mu.Unlock()
			}
			pmu.Lock()
			unsynced := 0
			for _, n := range pending {
				unsynced += n
			}
			crashed := fsys.Crash(rng)
			pmu.Unlock()
			if unsynced > 0 {
				inFlight++
			}
			wg.Wait()
			inline += l.Stats().InlineSyncs
			if err := l.Close(); err == nil {
				t.Log("Close after crash returned nil (nothing was pending)")
			}

			l2, err := Open(dir, &Options{fsys: crashed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatalf("Open after crash: %v", err)
			}
			rec := l2.Recovery()
			ackedTotal += len(acked)
			if rec.TruncatedBytes > 0 {
				torn++
				cutTotal += int(rec.TruncatedBytes)
			}
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, crashed, dir)
			if !never {
				checkAcked(t, "after the power cut", got, acked, rec)
			}
			for s := uint64(1); s <= durableAtCut; s++ {
				if _, ok := got[s]; !ok {
					t.Fatalf("seq %d lost, DurableSeq was %d before the power cut; recovery %+v", s, durableAtCut, rec)
				}
			}
			if uint64(len(got)) != rec.NextSeq-rec.FirstSeq {
				t.Fatalf("read %d records, recovery says [%d,%d)", len(got), rec.FirstSeq, rec.NextSeq)
			}
			if never {
				if rep, err := Verify(dir, &Options{fsys: killed}); err == nil && rep.unnamed != nil && rep.NextSeq > rep.unnamed.next.firstSeq {
					midSeal++ // a seal was under way, with records in the new segment
				}
				lk, err := Open(dir, &Options{fsys: killed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
				if err != nil {
					t.Fatalf("Open after the process kill: %v", err)
				}
				krec := lk.Recovery()
				noErr(t, lk.Close())
				kgot := readAll(t, killed, dir)
				checkAcked(t, "after the process kill", kgot, acked, krec)
				if uint64(len(kgot)) != krec.NextSeq-krec.FirstSeq {
					t.Fatalf("after the process kill: read %d records, recovery says [%d,%d)", len(kgot), krec.FirstSeq, krec.NextSeq)
				}
			}

			// Appends after recovery must survive a second crash.
			l3, err := Open(dir, &Options{fsys: crashed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			var after []ack
			for i := range 200 {
				seq, err := l3.Append(testPayload(100, i, 50+rng.IntN(300)))
				if err != nil {
					t.Fatal(err)
				}
				after = append(after, ack{seq, 100, i})
			}
			if err := l3.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i := 200; i < 260; i++ { // unsynced: may or may not survive
				if _, err := l3.Append(testPayload(100, i, 50)); err != nil {
					t.Fatal(err)
				}
			}
			crashed2 := crashed.Crash(rng)
			l3.Close()
			l4, err := Open(dir, &Options{fsys: crashed2, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatalf("Open after second crash: %v", err)
			}
			l4.Close()
			got = readAll(t, crashed2, dir)
			again := after
			if !never {
				again = append(acked, after...) // durable: they survive both cuts
			}
			for _, a := range again {
				p, ok := got[a.seq]
				if !ok {
					t.Fatalf("after second crash: durable seq %d lost", a.seq)
				}
				if g, i, err := parsePayload(p); err != nil || g != a.g || i != a.i {
					t.Fatalf("after second crash: seq %d holds writer %d #%d (%v), want %d #%d", a.seq, g, i, err, a.g, a.i)
				}
			}
		})
	}
}

// checkAcked fails the test unless every record of acked is in got, as
// its writer appended it.
func checkAcked(t *testing.T, when string, got map[uint64][]byte, acked []ack, rec Recovery) {
	t.Helper()
	for _, a := range acked {
		p, ok := got[a.seq]
		if !ok {
			t.Fatalf("%s: acknowledged seq %d (writer %d #%d) lost; recovery %+v", when, a.seq, a.g, a.i, rec)
		}
		if g, i, err := parsePayload(p); err != nil || g != a.g || i != a.i {
			t.Fatalf("%s: seq %d holds writer %d #%d (%v), acknowledged writer %d #%d", when, a.seq, g, i, err, a.g, a.i)
		}
	}
}

// pauseFS runs every operation on its FS, and on the files it opens,
// under a read lock of mu: whoever holds mu's write lock sees the files
// with no operation under way and none beginning, as a process kill
// leaves them. The locks FS.Lock returns are not wrapped.
type pauseFS struct {
	vfs.FS
	mu *sync.RWMutex
}

func (p *pauseFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	f, err := p.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &pauseFile{File: f, mu: p.mu}, nil
}

func (p *pauseFS) OpenRegular(name string, flag int, perm os.FileMode) (vfs.File, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	f, err := p.FS.OpenRegular(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &pauseFile{File: f, mu: p.mu}, nil
}

func (p *pauseFS) Remove(name string) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.FS.Remove(name)
}

func (p *pauseFS) Rename(oldname, newname string) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.FS.Rename(oldname, newname)
}

func (p *pauseFS) MkdirAll(dir string, perm os.FileMode) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.FS.MkdirAll(dir, perm)
}

func (p *pauseFS) SyncDir(dir string) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.FS.SyncDir(dir)
}

// pauseFile is a file of a pauseFS.
type pauseFile struct {
	vfs.File
	mu *sync.RWMutex
}

func (f *pauseFile) WriteAt(b []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.File.WriteAt(b, off)
}

func (f *pauseFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.File.WritevAt(bufs, off)
}

func (f *pauseFile) Sync() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.File.Sync()
}

func (f *pauseFile) Truncate(size int64) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.File.Truncate(size)
}

func (f *pauseFile) Preallocate(off, n int64) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.File.Preallocate(off, n)
}

// killCopy returns a new MemFS holding, durably, what the files under dir
// of fsys hold now: what a SIGKILL of the process that writes them leaves
// (the page cache keeps every write handed to it, synced or not). The
// caller keeps the writer from changing the files while it copies (see
// pauseFS).
func killCopy(t *testing.T, fsys vfs.FS, dir string) *vfs.MemFS {
	t.Helper()
	out := vfs.NewMem()
	var copyDir func(d string)
	copyDir = func(d string) {
		noErr(t, vfs.MkdirAllDurable(out, d))
		entries, err := fsys.ReadDir(d)
		noErr(t, err)
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			if e.IsDir() {
				copyDir(p)
				continue
			}
			f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
			noErr(t, err)
			size, err := f.Size()
			noErr(t, err)
			b := make([]byte, size)
			if size > 0 {
				_, err = f.ReadAt(b, 0)
				noErr(t, err)
			}
			noErr(t, f.Close())
			g, err := out.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
			noErr(t, err)
			_, err = g.WriteAt(b, 0)
			noErr(t, err)
			noErr(t, g.Sync())
			noErr(t, g.Close())
		}
		noErr(t, out.SyncDir(d))
	}
	copyDir(dir)
	return out
}

// TestKillDuringSealKeepsFlushedRecords kills the process (killCopy)
// while a rotation's seal is under way: the sealer's fdatasync of the
// sealed segment has not returned, so the new segment is still under
// its temporary name (spareName), and the flusher has written records
// into it and Flush has returned for them. A process kill keeps every
// byte handed to the OS: the next Open must keep those records, not
// remove the new segment as a spare that never held one.
func TestKillDuringSealKeepsFlushedRecords(t *testing.T) {
	mem := vfs.NewMem()
	sealing := make(chan struct{}) // closed when the sealer's fdatasync of a segment began
	release := make(chan struct{}) // closed to let it go on
	var once sync.Once
	var armed atomic.Bool // set once the log is open
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && armed.Load() && strings.HasSuffix(name, segSuffix) {
			once.Do(func() { close(sealing) })
			<-release
		}
		return n, nil
	}
	const dir = "/log"
	opts := &Options{fsys: vfs.WithFaults(mem, inj), SegmentSize: 64 << 10, BufferSize: 64 << 10, Sync: SyncNever}
	l := mustOpen(t, dir, opts)
	armed.Store(true)
	released := false
	defer func() {
		if !released {
			close(release)
		}
		l.Close()
	}()
	ctx := context.Background()
	want := map[uint64][]byte{}
	i := 0
	appendFlush := func() {
		p := testPayload(1, i, 200)
		i++
		seq, err := l.Append(p)
		noErr(t, err)
		noErr(t, l.Flush(ctx))
		want[seq] = p
	}
	for l.Stats().SegmentsCreated == 0 {
		appendFlush()
	}
	<-sealing
	// The seal of the first segment is stuck in its fdatasync: these go
	// into the new segment, still under its temporary name.
	for range 20 {
		appendFlush()
	}
	if _, err := mem.Stat(filepath.Join(dir, spareName)); err != nil {
		t.Fatalf("the new segment is not under %s: %v", spareName, err)
	}
	killed := killCopy(t, mem, dir)
	repaired := killCopy(t, mem, dir)
	followed := killCopy(t, mem, dir)
	cursored := killCopy(t, mem, dir)
	odd := killCopy(t, mem, dir)
	close(release)
	released = true
	noErr(t, l.Close())

	end := uint64(i) + 1 // the log's end after the kill
	check := func(when string, got map[uint64][]byte) {
		t.Helper()
		for seq, p := range want {
			if g, ok := got[seq]; !ok {
				t.Fatalf("%s: record %d, flushed before the kill, lost", when, seq)
			} else if string(g) != string(p) {
				t.Fatalf("%s: record %d holds other bytes", when, seq)
			}
		}
	}
	// Verify, and a Reader of the closed log, see what Open keeps.
	rep, err := Verify(dir, &Options{fsys: killed})
	noErr(t, err)
	if rep.NextSeq != end || rep.Torn != nil || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], spareName) {
		t.Fatalf("Verify after the kill: %+v, want the log to end before %d and a warning naming %s", rep, end, spareName)
	}
	check("OpenReader before Open", readAll(t, killed, dir))

	l2, err := Open(dir, &Options{fsys: killed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatalf("Open after the kill: %v", err)
	}
	rec := l2.Recovery()
	noErr(t, l2.Close())
	if rec.NextSeq != end || rec.TailSegment != segmentName(rec.NextSeq-20) {
		t.Fatalf("after the kill the log is [%d, %d) with tail %s, want it to end before %d in %s", rec.FirstSeq, rec.NextSeq, rec.TailSegment, end, segmentName(end-20))
	}
	check("after Open", readAll(t, killed, dir))
	// The new segment has its name now, and no spare is left.
	if _, err := killed.Stat(filepath.Join(dir, spareName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after Open: %v", spareName, err)
	}

	// A directory in the place of the new segment is not taken for it:
	// Open removes it, as it removes a spare, and starts the next segment.
	noErr(t, odd.Remove(filepath.Join(dir, spareName)))
	noErr(t, odd.MkdirAll(filepath.Join(dir, spareName), 0o755))
	lo, err := Open(dir, &Options{fsys: odd, SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatalf("Open with a directory named %s: %v", spareName, err)
	}
	if got := lo.NextSeq(); got != end-20 {
		t.Fatalf("Open with a directory named %s: the log ends before %d, want %d", spareName, got, end-20)
	}
	noErr(t, lo.Close())

	// Repair names it too, before it looks for damage.
	rr, err := Repair(dir, false, &Options{fsys: repaired})
	if err != nil || len(rr.Cuts) > 0 {
		t.Fatalf("Repair after the kill: %+v, %v", rr, err)
	}
	if _, err := repaired.Stat(filepath.Join(dir, segmentName(end-20))); err != nil {
		t.Fatalf("after Repair: %v", err)
	}
	check("after Repair", readAll(t, repaired, dir))

	// A cursor of another process (OpenCursor) checkpoints only what a
	// power cut keeps, and the segment without its name is not that (its
	// name is the writer's to make durable): it neither delivers nor
	// takes acks of its records.
	c, err := OpenCursor(dir, "c", &Options{fsys: cursored}, nil)
	noErr(t, err)
	for {
		seq, _, ok, err := c.Poll()
		noErr(t, err)
		if !ok {
			break
		}
		if seq >= end-20 {
			t.Fatalf("OpenCursor delivered record %d of the segment under %s", seq, spareName)
		}
		noErr(t, c.Ack(seq))
	}
	if err := c.Ack(end - 1); !errors.Is(err, ErrAckRange) {
		t.Fatalf("OpenCursor: Ack of record %d of the segment under %s: %v, want ErrAckRange", end-1, spareName, err)
	}
	noErr(t, c.Commit(context.Background()))
	noErr(t, c.Close())
	cut := cursored.Crash(nil)
	if got, err := readCursorFile(cut, dir, "c", frame.LogID{}); err != nil || got > end-20 {
		t.Fatalf("after a power cut the cursor's checkpoint is %d (%v), but the log's segments end before %d", got, err, end-20)
	}

	// A follower that read into the new segment before it had its name
	// goes on in it once an Open named it, with no record twice.
	r, err := OpenReader(dir, 0, &Options{fsys: followed})
	noErr(t, err)
	defer r.Close()
	got := map[uint64][]byte{}
	next := uint64(1)
	take := func() {
		t.Helper()
		for r.Next() {
			if r.Seq() != next {
				t.Fatalf("follower: record %d after %d", r.Seq(), next-1)
			}
			got[r.Seq()] = append([]byte(nil), r.Record()...)
			next++
		}
		noErr(t, r.Err())
	}
	take()
	check("OpenReader before Open", got)
	// It begins to follow while the segment has no name.
	ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	if err := r.Wait(ctx0); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("follower: Wait before Open: %v", err)
	}
	cancel0()
	take()
	l3 := mustOpen(t, dir, &Options{fsys: followed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
	defer l3.Close()
	for k := range 5 {
		_, err := l3.Append(testPayload(2, k, 100))
		noErr(t, err)
	}
	noErr(t, l3.Flush(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for next < end+5 {
		if err := r.Wait(ctx); err != nil {
			t.Fatalf("follower: Wait at %d: %v", next, err)
		}
		take()
	}
}
