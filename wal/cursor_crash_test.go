package wal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// _cursorChildEnv makes the test binary run cursorCrashChild on the log
// directory it names instead of the tests.
const _cursorChildEnv = "APPENDLOG_WAL_CURSOR_CHILD"

// _cursorCrashRecords is how many records the crash test's log holds.
const _cursorCrashRecords = 100_000

// cursorCrashChild consumes the log in dir through cursor "c": it prints
// "start C" (the committed position it resumed at), then takes records
// with Next in batches, acks each batch in shuffled order, printing
// "ack S" before each Ack, and at random moments Commits, printing
// "ckpt C" once the checkpoint of C is written. Checkpoints also happen on
// their own every 500µs; each checkpoint file renamed into place, whoever
// wrote it, is printed as "wrote C" (see ckptReportFS). It runs until
// killed. Output goes straight to the pipe (no buffering, one write per
// line), so every line written before a SIGKILL reaches the parent.
func cursorCrashChild(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := os.Stdout
	report := &ckptReportFS{FS: vfs.OS(), path: filepath.Join(dir, cursorDir, "c"), out: out}
	l, err := Open(dir, &Options{CheckpointEvery: 500 * time.Microsecond, fsys: report})
	if err != nil {
		return err
	}
	defer l.Close()
	c, err := l.Cursor("c")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "start %d\n", c.Committed())
	report.started.Store(true)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	want := c.Committed()
	var batch []uint64
	var line []byte
	for {
		batch = batch[:0]
		for n := 1 + rng.IntN(64); len(batch) < n; {
			seq, _, err := c.Next(ctx)
			if err != nil {
				return err
			}
			if seq != want {
				return fmt.Errorf("delivered %d, want %d", seq, want)
			}
			want++
			batch = append(batch, seq)
		}
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for _, s := range batch {
			line = strconv.AppendUint(append(line[:0], "ack "...), s, 10)
			line = append(line, '\n')
			if _, err := out.Write(line); err != nil {
				return err
			}
			if err := c.Ack(s); err != nil {
				return err
			}
		}
		if rng.IntN(32) == 0 {
			f := c.Committed()
			if err := c.Commit(ctx); err != nil {
				return err
			}
			fmt.Fprintf(out, "ckpt %d\n", f)
		}
	}
}

// ckptReportFS is the crash child's file system: once started is set, it
// prints "wrote C" for each checkpoint of the cursor file path renamed into
// place, C read back from the file. The line is written inside the rename's
// checkpoint (under the cursor's write lock), so it comes after the "ack"
// lines of every record the checkpoint covers and before the "ckpt" line
// of a Commit that found it written.
type ckptReportFS struct {
	vfs.FS
	path    string
	out     *os.File
	started atomic.Bool
}

func (f *ckptReportFS) Rename(oldname, newname string) error {
	if err := f.FS.Rename(oldname, newname); err != nil || newname != f.path || !f.started.Load() {
		return err
	}
	b, err := os.ReadFile(newname)
	if err != nil {
		return err
	}
	_, committed, _, problem := decodeCursor(b)
	if problem != "" {
		return errors.New(problem)
	}
	_, err = fmt.Fprintf(f.out, "wrote %d\n", committed)
	return err
}

// TestCursorCrashSIGKILL kills a consuming, acking process at random
// moments and restarts it, at least 20 times. Each kill comes a random
// number of the child's lines after a sign of work (its start, its first
// checkpoint, its first Commit, by turns), so every killed run acked
// records and two in three wrote a checkpoint first. The checks, line by
// line: a checkpoint covers only records its run had acked when it was
// written and never goes back, and a Commit returns with its position
// written. After each kill: the checkpoint on disk is at or after the last
// one reported and covers only records the run acked, and the next run
// (after the last kill, this process) resumes exactly there: nothing
// before it is delivered again, nothing after it is skipped.
func TestCursorCrashSIGKILL(t *testing.T) {
	if dir := os.Getenv(_cursorChildEnv); dir != "" {
		if err := cursorCrashChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	recs := make([][]byte, 1000)
	for i := range recs {
		recs[i] = []byte("record")
	}
	for range _cursorCrashRecords / len(recs) {
		_, err := l.AppendBatch(recs)
		noErr(t, err)
	}
	noErr(t, l.Close())

	rng := rand.New(rand.NewPCG(7, 13))
	// ackedBy[s] is 1 + the round whose run printed an ack of record s
	// last.
	ackedBy := make([]int, _cursorCrashRecords+2)
	// cur is the last checkpoint written: reported by a run, or found on
	// disk after its kill.
	cur := uint64(1)
	// killed checks the checkpoint on disk after the kill of the run of
	// round that resumed at start: it is at or after the last one the run
	// reported (a checkpoint never goes back) and the run acked every
	// record below it (even one written just before the kill, whose line
	// never came). The next run must resume exactly there.
	killed := func(round int, start uint64) error {
		onDisk, err := readCursorFile(vfs.OS(), dir, "c", frame.LogID{})
		if err != nil {
			return err
		}
		if onDisk < cur {
			return fmt.Errorf("checkpoint %d on disk, before the checkpoint %d the run wrote", onDisk, cur)
		}
		for s := start; s < onDisk; s++ {
			if ackedBy[s] != round+1 {
				return fmt.Errorf("checkpoint %d on disk, but the run (from %d) never acked record %d", onDisk, start, s)
			}
		}
		cur = onDisk
		return nil
	}
	tmp := filepath.Join(dir, cursorDir, cursorAux("c", "tmp"))
	var acks, writes, commits, ckptRounds, commitRounds, midCkpt int
	const rounds = 20
	for round := range rounds {
		before, _ := os.Stat(tmp) // left by a kill mid-checkpoint
		cmd := exec.Command(os.Args[0], "-test.run=^TestCursorCrashSIGKILL$")
		cmd.Env = append(os.Environ(), _cursorChildEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		pipe, err := cmd.StdoutPipe()
		noErr(t, err)
		noErr(t, cmd.Start())
		sc := bufio.NewScanner(pipe)
		// The kill comes a random number of lines after a line that shows
		// the run at work: its start (the acks follow at once), its first
		// checkpoint written, or its first Commit, by turns; so every run
		// acks before it dies, and two in three die after a checkpoint.
		trigger := [...]string{"start", "wrote", "ckpt"}[round%3]
		killAfter := 20 + rng.IntN(1500)
		triggered := false
		// n counts the run's lines, lines those from the trigger on; low
		// is the lowest record the run has not acked.
		var n, lines, racks, rwrites, rcommits int
		var start, low uint64
		step := func(kind string, v uint64) error {
			switch {
			case kind == "start":
				if start != 0 {
					return errors.New("started twice")
				}
				// Nothing the checkpoint covers is delivered again, and
				// nothing after it is skipped.
				if v != cur {
					return fmt.Errorf("resumed at %d, the checkpoint the last run left is %d", v, cur)
				}
				start, low = v, v
			case start == 0:
				return fmt.Errorf("%q before the start line", kind)
			case kind == "ack":
				if v < start || v >= uint64(len(ackedBy)) {
					return fmt.Errorf("ack of record %d, outside [%d, %d)", v, start, len(ackedBy))
				}
				ackedBy[v] = round + 1
				racks++
				for low < uint64(len(ackedBy)) && ackedBy[low] == round+1 {
					low++
				}
			case kind == "wrote":
				if v < cur {
					return fmt.Errorf("checkpoint %d written after %d: it went back", v, cur)
				}
				if v > low {
					return fmt.Errorf("checkpoint %d written before record %d was acked", v, low)
				}
				cur = v
				rwrites++
			case kind == "ckpt":
				if v > cur {
					return fmt.Errorf("Commit returned at %d, but the last checkpoint written is %d", v, cur)
				}
				rcommits++
			default:
				return fmt.Errorf("unknown line kind %q", kind)
			}
			return nil
		}
		var fail error
		for sc.Scan() {
			n++
			kind, arg, _ := strings.Cut(sc.Text(), " ")
			if triggered = triggered || kind == trigger; triggered {
				if lines++; lines == killAfter {
					cmd.Process.Kill() // SIGKILL; the lines already written still come
				}
			}
			if fail != nil {
				continue
			}
			v, err := strconv.ParseUint(arg, 10, 64)
			if err != nil {
				fail = err
			} else {
				fail = step(kind, v)
			}
			if fail != nil {
				fail = fmt.Errorf("line %d %q: %w", n, sc.Text(), fail)
				cmd.Process.Kill()
			}
		}
		werr := cmd.Wait()
		if fail != nil {
			t.Fatalf("round %d: %v", round, fail)
		}
		if lines < killAfter {
			t.Fatalf("round %d: the child exited by itself, %d lines after its first %q line (%v):\n%s", round, lines, trigger, werr, stderr.String())
		}
		if err := killed(round, start); err != nil {
			t.Fatalf("round %d: after the kill: %v", round, err)
		}
		if racks == 0 {
			t.Fatalf("round %d: killed before it acked anything", round)
		}
		if st, err := os.Stat(tmp); err == nil && (before == nil || !st.ModTime().Equal(before.ModTime())) {
			midCkpt++ // killed between creating the temporary file and renaming it
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		acks, writes, commits = acks+racks, writes+rwrites, commits+rcommits
		if rwrites > 0 {
			ckptRounds++
		}
		if rcommits > 0 {
			commitRounds++
		}
	}
	// After the last kill the cursor opens in this process at the
	// checkpoint too.
	l = mustOpen(t, dir, nil)
	c, err := l.Cursor("c")
	noErr(t, err)
	if got := c.Committed(); got != cur {
		t.Fatalf("after the last kill: the cursor opened at %d, the checkpoint the last run left is %d", got, cur)
	}
	noErr(t, c.Close())
	noErr(t, l.Close())
	t.Logf("%d runs killed after %d acks: %d wrote checkpoints before the kill (%d checkpoints), %d of them by Commit (%d); %d killed mid-checkpoint; resumed at %d of %d records",
		rounds, acks, ckptRounds, writes, commitRounds, commits, midCkpt, cur, _cursorCrashRecords)
	// Every run acked before its kill (checked above); the kills timed
	// after a checkpoint or a Commit came after one.
	if want := rounds * 2 / 3; ckptRounds < want || commitRounds < rounds/3 {
		t.Fatalf("too few killed runs wrote a checkpoint: %d of %d (want %d), %d by Commit (want %d)", ckptRounds, rounds, want, commitRounds, rounds/3)
	}
}
