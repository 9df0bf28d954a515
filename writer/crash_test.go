package writer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/internal/vfs"
)

// _crashChildEnv names the environment variable that makes the test binary
// run crashChild instead of the tests: "<kind> <path>".
const _crashChildEnv = "APPENDLOG_WRITER_CRASH_CHILD"

// _crashProducers is the number of producer goroutines in a crash child.
const _crashProducers = 4

// _crashChildLife bounds a crash child's life if its parent never kills it.
const _crashChildLife = 20 * time.Second

// _exitDirectUnsupported is a crash child's exit code when O_DIRECT is not
// supported where it was asked to write.
const _exitDirectUnsupported = 4

// producerCounts counts, per producer, the records whose Write returned.
type producerCounts [_crashProducers]atomic.Int64

// snapshot returns the counts now.
func (c *producerCounts) snapshot() []int {
	s := make([]int, len(c))
	for id := range c {
		s[id] = int(c[id].Load())
	}
	return s
}

// total returns the sum of counts.
func total(counts []int) (n int) {
	for _, c := range counts {
		n += c
	}
	return n
}

// crashKind is a file-backed writer the crash test kills mid-stream, and
// what its documented crash state may hold past the whole records.
type crashKind struct {
	name string
	tail tornTail
	open func(path string) (Writer, error)
}

// tornTail is what a crashed file may hold after its whole records.
type tornTail struct {
	// zeros is how many zero bytes may end the file.
	zeros int
	// inPlace: the record being written when the process died may have
	// any of its bytes still zero, not only a suffix. Mmap copies records
	// into the file's pages, and a kill stops the copy at any instruction
	// (memmove need not store front to back).
	inPlace bool
}

func crashKinds() []crashKind {
	return []crashKind{
		{"ring-file", tornTail{}, func(path string) (Writer, error) {
			return OpenFile(path, &RingOptions{Size: 256 << 10})
		}},
		{"ring-direct", tornTail{zeros: sys.BlockSize - 1}, func(path string) (Writer, error) {
			return OpenFile(path, &RingOptions{Size: 256 << 10, Direct: true})
		}},
		{"buffered", tornTail{}, func(path string) (Writer, error) {
			f, err := appendFile(path)
			if err != nil {
				return nil, err
			}
			return NewBuffered(f, 4096), nil
		}},
		{"slab", tornTail{}, func(path string) (Writer, error) {
			f, err := appendFile(path)
			if err != nil {
				return nil, err
			}
			return NewSlab(f, &SlabOptions{Slabs: 2, SlabSize: 16 << 10})
		}},
		{"direct", tornTail{}, func(path string) (Writer, error) {
			f, err := appendFile(path)
			if err != nil {
				return nil, err
			}
			return NewDirect(f), nil
		}},
		{"mmap", tornTail{zeros: 64 << 10, inPlace: true}, func(path string) (Writer, error) {
			return OpenMmap(path, &MmapOptions{ChunkSize: 64 << 10})
		}},
	}
}

// crashChild runs in a child process. Producers write tagged records
// without end; the main goroutine loops: it reads how many records each
// producer's Write has returned for, calls Sync, and prints those counts on
// stdout as "ack c0 c1 c2 c3". Every acked record must survive a kill. The
// parent kills it; it gives up by itself after _crashChildLife.
func crashChild(spec string) {
	fail := func(code int, err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(code)
	}
	name, path, ok := strings.Cut(spec, " ")
	if !ok {
		fail(2, fmt.Errorf("bad %s %q", _crashChildEnv, spec))
	}
	var w Writer
	for _, k := range append(crashKinds(), rotateCrashKind()) {
		if k.name == name {
			var err error
			if w, err = k.open(path); errors.Is(err, ErrDirectUnsupported) {
				fail(_exitDirectUnsupported, err)
			} else if err != nil {
				fail(2, err)
			}
		}
	}
	if w == nil {
		fail(2, fmt.Errorf("unknown writer kind %q", name))
	}
	var counts producerCounts
	for id := range _crashProducers {
		go func() {
			var b []byte
			for c := 0; ; c++ {
				b = appendRecord(b[:0], id, c)
				if _, err := w.Write(b); err != nil {
					fail(2, fmt.Errorf("producer %d, record %d: %w", id, c, err))
				}
				counts[id].Store(int64(c + 1))
				if c%64 == 63 {
					time.Sleep(time.Millisecond) // about 50 MB/s in all
				}
			}
		}()
	}
	end := time.Now().Add(_crashChildLife)
	for time.Now().Before(end) {
		acked := counts.snapshot()
		if err := w.Sync(); err != nil {
			fail(2, fmt.Errorf("sync: %w", err))
		}
		if _, err := fmt.Println("ack", strings.Trim(fmt.Sprint(acked), "[]")); err != nil {
			fail(2, err) // the parent is gone
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	}
	fail(2, errors.New("not killed in time"))
}

// TestKillKeepsEverySyncedRecord kills (SIGKILL) a process that writes
// through each file-backed writer from 4 goroutines while it syncs in a
// loop, at a random moment, and checks the file it leaves: every record
// whose Write returned before an acknowledged Sync is there; the file is a
// prefix of every producer's stream, whole records in per-producer order,
// then at most one torn record (the next one in claim order: a prefix of
// it, or for Mmap, which copies into the file's pages, the record with any
// of its bytes still zero), then no more zero bytes than the writer
// documents (O_DIRECT: the rest of the last 4 KiB block; Mmap: the rest of
// the last chunk), and no hole anywhere else.
//
// Each kill must hit a child at work: one that has acknowledged records,
// whose file grew after the last acknowledgement read, and that was alive
// until the kill (see runCrashChild). Only such kills count, and each kind
// needs _crashTrials of them.
//
// A kill leaves the page cache intact, so this checks what each writer
// handed to the OS and when it acknowledged, not the disk's durability;
// the power-cut model (TestPowerCutKeepsEverySyncedRecord) checks that.
func TestKillKeepsEverySyncedRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for _, k := range crashKinds() {
		t.Run(k.name, func(t *testing.T) {
			hits := 0
			for trial := 0; hits < _crashTrials; trial++ {
				if trial == _crashMaxTrials {
					t.Fatalf("%d of %d kills hit a child at work, want %d", hits, trial, _crashTrials)
				}
				path := filepath.Join(t.TempDir(), fmt.Sprintf("crash-%d.log", trial))
				acks := 3 + rng.IntN(10)
				pause := time.Duration(rng.IntN(3000)) * time.Microsecond
				run := runCrashChild(t, k.name, path, acks, pause, fileSize(path))
				data := readFile(t, path)
				got := verifyCrashed(t, data, k.tail, run.acked)
				if run.working {
					hits++
				}
				t.Logf("trial %d: %d bytes at ack %d, then grew (working: %v), killed %v later: %d bytes, %d records (%d acked: %v)",
					trial, run.before, acks, run.working, pause, run.after, got, total(run.acked), run.acked)
			}
		})
	}
}

// _crashTrials is the number of kills that must hit a child at work, per
// writer kind; _crashMaxTrials bounds the trials run to get them.
const (
	_crashTrials    = 4
	_crashMaxTrials = 8
)

// _crashWorkWait bounds the wait for a crash child's progress after its
// last acknowledgement read.
const _crashWorkWait = 5 * time.Second

// fileSize returns a progress probe for runCrashChild: the size of the
// file at path (0 while it does not exist).
func fileSize(path string) func() int64 {
	return func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
}

// crashRun is what runCrashChild saw of a child it killed.
type crashRun struct {
	acked []int // the counts of the last acknowledgement read
	// before is the child's progress when the last acknowledgement was
	// read; after, once the child was dead.
	before, after int64
	// working: the progress went past before while the child lived, and
	// the kill found the child alive. The kill then hit a child at work,
	// not one starting up (it had acknowledged records) nor one already
	// gone.
	working bool
}

// runCrashChild starts a crash child writing path through the writer kind
// name and reads acks acknowledgements. Then it waits until progress, a
// measure of the child's work that only grows (a file's size, a count of
// rotations), goes past its value at the last acknowledgement, waits
// pause more and kills the child. A child that ended by itself before the
// kill fails the test: the kill would have hit nothing.
func runCrashChild(t *testing.T, name, path string, acks int, pause time.Duration, progress func() int64) crashRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), _crashChildEnv+"="+name+" "+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := crashRun{acked: make([]int, _crashProducers)}
	sc := bufio.NewScanner(out)
	n := 0
	for n < acks && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 1+_crashProducers || f[0] != "ack" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child printed %q", sc.Text())
		}
		for id := range run.acked {
			c, err := strconv.Atoi(f[1+id])
			if err != nil || c < run.acked[id] {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child printed %q after %v", sc.Text(), run.acked)
			}
			run.acked[id] = c
		}
		n++
	}
	if n < acks {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == _exitDirectUnsupported {
			t.Skipf("O_DIRECT unsupported: %s", stderr.Bytes())
		}
		t.Fatalf("child ended after %d acks: %v\n%s", n, err, stderr.Bytes())
	}
	run.before = progress()
	for deadline := time.Now().Add(_crashWorkWait); time.Now().Before(deadline); {
		if progress() > run.before {
			run.working = true
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	time.Sleep(pause)
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	err = cmd.Wait()
	// Killed by a signal, the only one the child gets: ExitCode is -1. A
	// child that exited (an error, or _crashChildLife passed) was not
	// killed at work.
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("the child ended by itself before the kill (%v)\n%s", err, stderr.Bytes())
	}
	run.after = progress()
	if total(run.acked) == 0 {
		t.Fatalf("no record acknowledged in %d acks", acks)
	}
	return run
}

// verifyCrashed checks what a killed (or power-cut) writer left, as
// TestKillKeepsEverySyncedRecord describes, and returns the number of whole
// records.
func verifyCrashed(t *testing.T, data []byte, tail tornTail, acked []int) int {
	t.Helper()
	whole := wholeRecords(data)
	res := verifyRecords(t, whole, len(acked), false, false, nil)
	// Lossless with the counts found: each producer's records are 0, 1, ...
	// with none missing, so the whole records are a prefix of every stream.
	verifyRecords(t, whole, len(acked), true, false, res.perProducer)
	for id, n := range acked {
		if res.perProducer[id] < n {
			t.Fatalf("producer %d: %d records in the file, %d acknowledged by Sync", id, res.perProducer[id], n)
		}
	}
	rest := data[len(whole):]
	torn := bytes.TrimRight(rest, "\x00")
	if z := len(rest) - len(torn); z > tail.zeros {
		t.Fatalf("the file ends with %d zero bytes after offset %d; at most %d allowed", z, len(data)-z, tail.zeros)
	}
	if len(torn) > 0 && !nextRecordTorn(torn, res.perProducer, tail.inPlace) {
		t.Fatalf("after %d whole records at offset %d: %d bytes that are not one torn record (a hole, or garbage): %q",
			res.records, len(whole), len(torn), clip(torn))
	}
	return res.records
}

// nextRecordTorn reports whether b is part of the next record of one of
// the producers, which have written next[id] records: a prefix of it, or,
// with inPlace, the record with any of its bytes still zero.
func nextRecordTorn(b []byte, next []int, inPlace bool) bool {
	for id, ctr := range next {
		rec := appendRecord(nil, id, ctr)
		if len(b) > len(rec) {
			continue
		}
		if bytes.HasPrefix(rec, b) {
			return true
		}
		if inPlace && zeroOr(b, rec) {
			return true
		}
	}
	return false
}

// zeroOr reports whether every byte of b is zero or equal to rec's.
func zeroOr(b, rec []byte) bool {
	for i, c := range b {
		if c != 0 && c != rec[i] {
			return false
		}
	}
	return true
}

// TestPowerCutKeepsEverySyncedRecord cuts the power (vfs.MemFS.Crash) under
// a Ring writing a file from 4 goroutines, after a few acknowledged Syncs,
// and checks what the file system keeps: the file exists, and its whole
// records from the start are a prefix of every producer's stream that
// holds every acknowledged record. With only synced content surviving, that
// is the whole file but for one torn record at the end; when unsynced writes
// may survive in part (torn at a sector, or after a lost one, leaving a
// zero-filled hole), the check stops at the first damaged line.
func TestPowerCutKeepsEverySyncedRecord(t *testing.T) {
	for trial := range 16 {
		rng := rand.New(rand.NewPCG(uint64(trial), 3))
		mem := vfs.NewMem()
		if err := vfs.MkdirAllDurable(mem, "/logs"); err != nil {
			t.Fatal(err)
		}
		const path = "/logs/app.log"
		r, err := OpenFile(path, &RingOptions{Size: 64 << 10, fsys: mem, lockFile: noLock})
		if err != nil {
			t.Fatal(err)
		}
		var counts producerCounts
		var stop atomic.Bool
		var wg sync.WaitGroup
		for id := range _crashProducers {
			wg.Go(func() {
				var b []byte
				for c := 0; !stop.Load(); c++ {
					b = appendRecord(b[:0], id, c)
					if _, err := r.Write(b); err != nil {
						return // the file system is gone
					}
					counts[id].Store(int64(c + 1))
				}
			})
		}
		for deadline := time.Now().Add(5 * time.Second); total(counts.snapshot()) < 200; {
			if time.Now().After(deadline) {
				t.Fatal("producers wrote nothing in 5 s")
			}
			time.Sleep(100 * time.Microsecond)
		}
		var acked []int
		for range 1 + rng.IntN(5) {
			snap := counts.snapshot()
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			acked = snap
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
		var cutRNG *rand.Rand // nil: only synced content survives
		if trial%2 == 1 {
			cutRNG = rng
		}
		crashed := mem.Crash(cutRNG)
		stop.Store(true)
		if err := r.Close(); err == nil {
			t.Fatal("Close succeeded on a file system that lost power")
		}
		wg.Wait()
		data := readMem(t, crashed, path)
		if cutRNG != nil {
			data = wholeRecords(data) // unsynced writes may be torn or lost: check up to the first damage
		}
		got := verifyCrashed(t, data, tornTail{}, acked)
		t.Logf("trial %d: %d bytes, %d records kept, acked %v", trial, len(data), got, acked)
	}
}

// readMem returns the content of the file at path in fsys.
func readMem(t *testing.T, fsys vfs.FS, path string) []byte {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("after the power cut: %v", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return data
}

// wholeRecords returns the longest prefix of data made of whole, intact
// records.
func wholeRecords(data []byte) []byte {
	n := 0
	for line := range bytes.Lines(data) {
		if line[len(line)-1] != '\n' {
			break
		}
		if _, _, err := parseRecord(line); err != nil {
			break
		}
		n += len(line)
	}
	return data[:n]
}

// TestOpenSyncsTheDirectory: the writers that open their file themselves
// sync its directory before they accept a record, so a power cut cannot
// take a new log file, and every synced record in it, away with its
// directory entry; an error doing so fails the open. (The Ring's buffered
// file goes through vfs, which TestPowerCutKeepsEverySyncedRecord covers.)
func TestOpenSyncsTheDirectory(t *testing.T) {
	opens := map[string]func(path string, syncDir func(string) error) (io.Closer, error){
		"ring-direct": func(path string, syncDir func(string) error) (io.Closer, error) {
			return OpenFile(path, &RingOptions{Size: 64 << 10, Direct: true, syncDir: syncDir})
		},
		"mmap": func(path string, syncDir func(string) error) (io.Closer, error) {
			return OpenMmap(path, &MmapOptions{ChunkSize: 64 << 10, syncDir: syncDir})
		},
	}
	for name, open := range opens {
		dir := t.TempDir()
		var synced []string
		w, err := open(filepath.Join(dir, name+".log"), recordSyncDir(&synced))
		if errors.Is(err, ErrDirectUnsupported) {
			t.Logf("%s: O_DIRECT unsupported: %v", name, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if len(synced) != 1 || synced[0] != dir {
			t.Errorf("%s: synced directories %q, want [%q]", name, synced, dir)
		}
		boom := errors.New("boom")
		if w, err := open(filepath.Join(dir, name+"-2.log"), failSyncDir(boom)); !errors.Is(err, boom) {
			if err == nil {
				w.Close()
			}
			t.Errorf("%s: open with a failing directory sync: %v", name, err)
		}
		// The failed open released its lock on the file.
		w, err = open(filepath.Join(dir, name+"-2.log"), recordSyncDir(&synced))
		if err != nil {
			t.Fatalf("%s: open after a failed open: %v", name, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
