package wal

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// _cursorChildEnv makes the test binary run cursorCrashChild on the log
// directory it names instead of the tests.
const _cursorChildEnv = "APPENDLOG_WAL_CURSOR_CHILD"

// _cursorCrashRecords is how many records the crash test's log holds.
const _cursorCrashRecords = 40000

// cursorCrashChild consumes the log in dir through cursor "c": it prints
// "start C" (the committed position it resumed at), then takes records
// with Next in batches, acks each batch in shuffled order, printing
// "ack S" before each Ack, and at random moments Commits, printing
// "ckpt C" once the checkpoint of C is written. Checkpoints also happen on
// their own every 500µs. It runs until killed. Output goes straight to the
// pipe (no buffering), so every line written before a SIGKILL reaches the
// parent.
func cursorCrashChild(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Open(dir, &Options{CheckpointEvery: 500 * time.Microsecond})
	if err != nil {
		return err
	}
	defer l.Close()
	c, err := l.Cursor("c")
	if err != nil {
		return err
	}
	out := os.Stdout
	fmt.Fprintf(out, "start %d\n", c.Committed())
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

// TestCursorCrashSIGKILL kills a consuming, acking process at random
// moments and restarts it, at least 20 times: each restart resumes at or
// after the last checkpoint the killed process reported written (nothing
// before it is delivered again) and never past a record that was not acked
// (nothing is skipped).
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
	acked := make([]bool, _cursorCrashRecords+2)
	var lastCkpt, verified uint64 = 1, 1
	var ckpts, background int
	const rounds = 20
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCursorCrashSIGKILL$")
		cmd.Env = append(os.Environ(), _cursorChildEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		pipe, err := cmd.StdoutPipe()
		noErr(t, err)
		noErr(t, cmd.Start())
		sc := bufio.NewScanner(pipe)
		killAfter := 20 + rng.IntN(1500)
		var lines int
		start := uint64(0)
		prev := lastCkpt // the last checkpoint the runs before reported
		var parseErr error
		for sc.Scan() {
			lines++
			if lines == killAfter {
				cmd.Process.Kill() // SIGKILL; the lines already written still come
			}
			kind, arg, _ := strings.Cut(sc.Text(), " ")
			v, err := strconv.ParseUint(arg, 10, 64)
			if err != nil && parseErr == nil {
				parseErr = fmt.Errorf("line %q: %v", sc.Text(), err)
				continue
			}
			switch kind {
			case "start":
				start = v
			case "ack":
				if v < uint64(len(acked)) {
					acked[v] = true
				}
			case "ckpt":
				lastCkpt = max(lastCkpt, v)
				ckpts++
			}
		}
		werr := cmd.Wait()
		if parseErr != nil {
			t.Fatal(parseErr)
		}
		if lines < killAfter {
			t.Fatalf("round %d: the child exited by itself after %d lines (%v):\n%s", round, lines, werr, stderr.String())
		}
		if start == 0 {
			t.Fatalf("round %d: the child never started:\n%s", round, stderr.String())
		}
		// Nothing before the last reported checkpoint is delivered again.
		if start < prev {
			t.Fatalf("round %d: resumed at %d, before the checkpoint %d the last run reported written", round, start, prev)
		}
		// Nothing is skipped: every record below the resume point was acked.
		for ; verified < start; verified++ {
			if !acked[verified] {
				t.Fatalf("round %d: resumed at %d, but record %d was never acked", round, start, verified)
			}
		}
		if start > prev {
			background++ // a checkpoint the checkpointer wrote on its own
		}
		lastCkpt = max(lastCkpt, start)
	}
	t.Logf("%d rounds: resumed at %d of %d records; %d commits reported, %d resumes past the last reported one", rounds, lastCkpt, _cursorCrashRecords, ckpts, background)
	if lastCkpt <= 1 || ckpts == 0 {
		t.Fatalf("the crash test exercised nothing: resumed at %d, %d commits", lastCkpt, ckpts)
	}
}
