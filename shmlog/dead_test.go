package shmlog_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

// started is a running child with a pipe to its stdin and its stdout lines.
type started struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startChild(t *testing.T, j job) *started {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), _childEnv+"="+j.String(), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &started{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(out)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return c
}

func (c *started) expect(t *testing.T, prefix string) string {
	t.Helper()
	if !c.lines.Scan() {
		t.Fatalf("child ended before printing %q", prefix)
	}
	if l := c.lines.Text(); strings.HasPrefix(l, prefix) {
		return l
	}
	t.Fatalf("child printed %q, want %q", c.lines.Text(), prefix)
	return ""
}

func (c *started) kill(t *testing.T) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait() // reaped: no zombie left to look alive
}

// readAll reads n records from r, waiting up to d for each.
func readN(t *testing.T, r *shmlog.Reader, n int, d time.Duration) []shmlog.Record {
	t.Helper()
	var recs []shmlog.Record
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := r.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("record %d of %d: %v", len(recs), n, err)
		}
		rec, ok, err := r.Next()
		if !ok || err != nil {
			t.Fatalf("Next after Wait: %v %v", ok, err)
		}
		recs = append(recs, shmlog.Record{Pos: rec.Pos, Payload: append([]byte(nil), rec.Payload...)})
	}
	return recs
}

// TestDeadWriter kills a writer between its claim and its commit (after
// the in-progress header: "hold"; before it: "hole"). While it lives the
// reader waits at its frame; once it is dead the reader pads the frame
// over within CommitTimeout and goes on.
func TestDeadWriter(t *testing.T) {
	for _, hook := range []string{"hold", "hole"} {
		t.Run(hook, func(t *testing.T) {
			const timeout = 100 * time.Millisecond
			path := logPath(t)
			l, err := shmlog.Open(path, &shmlog.Options{CommitTimeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			r, err := l.NewReader(0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			c := startChild(t, job{path: path, goroutines: 1, records: 1, size: 40, fileSize: shmlog.DefaultMaxFileSize, writers: 2, hook: hook})
			if hook == "hold" {
				c.expect(t, "held")
			} else {
				c.expect(t, "claimed")
			}
			rec := make([]byte, 40)
			for i := range 3 {
				fillRecord(rec, 1, uint64(i), 2)
				if _, err := l.Append(rec); err != nil {
					t.Fatal(err)
				}
			}
			// The writer lives: the reader waits well past CommitTimeout.
			ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
			err = r.Wait(ctx)
			cancel()
			if err != context.DeadlineExceeded || r.Padded() != 0 {
				t.Fatalf("Wait while the writer lives: %v, %d padded", err, r.Padded())
			}
			c.kill(t)
			start := time.Now()
			recs := readN(t, r, 3, 10*time.Second)
			took := time.Since(start)
			if r.Padded() != 1 {
				t.Fatalf("padded %d frames, want 1", r.Padded())
			}
			if st := l.Stats(); st.Padded != 1 || st.Claims != 3 {
				t.Fatalf("Log Stats %+v, want 1 padded and this Log's 3 claims", st)
			}
			t.Logf("passed the dead writer's frame %v after the kill", took)
			for i, rec := range recs {
				if w, c, err := payload.Decode(rec.Payload); err != nil || w != 1 || c != uint64(i) {
					t.Fatalf("record %d: %d %d %v", i, w, c, err)
				}
			}
			// Appends go on, and the file verifies.
			if _, err := l.Append(rec); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStoppedWriter stops a writer holding a claim past CommitTimeout:
// without LiveTimeout its record stands when it resumes; with LiveTimeout
// a reader pads it over and the writer's Commit fails cleanly.
func TestStoppedWriter(t *testing.T) {
	for _, live := range []time.Duration{0, 150 * time.Millisecond} {
		t.Run(fmt.Sprint("LiveTimeout=", live), func(t *testing.T) {
			const timeout = 50 * time.Millisecond
			path := logPath(t)
			o := &shmlog.Options{CommitTimeout: timeout, LiveTimeout: live}
			l, err := shmlog.Open(path, o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			r, err := l.NewReader(0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			c := startChild(t, job{path: path, goroutines: 1, records: 1, size: 40, fileSize: shmlog.DefaultMaxFileSize, writers: 2, hook: "hold"})
			c.expect(t, "held")
			c.cmd.Process.Signal(syscall.SIGSTOP)
			rec := make([]byte, 40)
			fillRecord(rec, 1, 0, 2)
			if _, err := l.Append(rec); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 6*timeout)
			err = r.Wait(ctx)
			cancel()
			c.cmd.Process.Signal(syscall.SIGCONT)
			c.stdin.Write([]byte("\n"))
			if live == 0 {
				if err != context.DeadlineExceeded {
					t.Fatalf("reader went past a stopped live writer: %v", err)
				}
				c.expect(t, "committed")
				recs := readN(t, r, 2, 10*time.Second)
				if w, _, _ := payload.Decode(recs[0].Payload); w != 0 {
					t.Fatalf("first record is writer %d's, want the resumed writer's", w)
				}
			} else {
				if err != nil {
					t.Fatalf("reader did not pass after LiveTimeout: %v", err)
				}
				c.expect(t, "commit: ")
				recs := readN(t, r, 1, 10*time.Second)
				if w, _, _ := payload.Decode(recs[0].Payload); w != 1 {
					t.Fatalf("record is writer %d's, want 1", w)
				}
				if r.Padded() != 1 {
					t.Fatalf("padded %d", r.Padded())
				}
			}
			c.cmd.Wait()
			if _, ok, err := r.Next(); ok || err != nil {
				t.Fatalf("more after: %v %v", ok, err)
			}
		})
	}
}

// TestRandomKills kills one of three appending processes at a random
// point of its run, 20 times: the others finish, every record in the file
// is whole, each writer's records are 0, 1, 2, ... with nothing missing,
// the killed writers' records are a prefix of what they appended, and
// every record a reader saw committed before the kill is among them.
//
// A kill at a random moment after start-up is no kill of a writer at work
// if it lands before the victim's first append or after its last (under
// the race detector a child's start-up can take longer than the moment),
// and such a trial cannot fail. So each trial waits until a reader has
// seen a random number of the victim's records, then kills it, and the
// test checks that most kills landed before the victim was done. The
// victim has more records to append than the others, so that the kill
// lands before its last one even when the reader lags behind.
func TestRandomKills(t *testing.T) {
	const trials, procs, goroutines, records, victimRecs, size = 20, 3, 2, 2000, 20 * 2000, 64
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	midRun := 0
	for trial := range trials {
		path := logPath(t)
		victim := rng.IntN(procs)
		var cs []*started
		for p := range procs {
			j := job{path: path, first: p * goroutines, goroutines: goroutines, records: records, size: size, fileSize: 256 << 10, writers: procs * goroutines}
			if p == victim {
				j.records = victimRecs
			}
			cs = append(cs, startChild(t, j))
		}
		for _, c := range cs {
			c.expect(t, "open")
		}
		seen := victimRecords(t, path, victim, goroutines, 1+rng.IntN(200))
		cs[victim].kill(t)
		for p, c := range cs {
			if p != victim {
				if err := c.cmd.Wait(); err != nil {
					t.Fatalf("trial %d: survivor %d: %v", trial, p, err)
				}
			}
		}
		next := make([]uint64, procs*goroutines)
		st, err := shmlog.Verify(path, func(r shmlog.Record) error {
			w, c, err := payload.Decode(r.Payload)
			if err != nil {
				return fmt.Errorf("record at %#x: %v", r.Pos, err)
			}
			if w >= len(next) || c != next[w] {
				return fmt.Errorf("record at %#x: writer %d counter %d, want %d", r.Pos, w, c, next[w])
			}
			next[w]++
			return nil
		})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for w, n := range next {
			if w/goroutines != victim && n != records {
				t.Fatalf("trial %d: survivor writer %d has %d records, want %d", trial, w, n, records)
			}
		}
		did := next[victim*goroutines] + next[victim*goroutines+1]
		if did < uint64(seen) {
			t.Fatalf("trial %d: the killed process has %d records in the log, but a reader saw %d of them committed before the kill", trial, did, seen)
		}
		if did < goroutines*victimRecs {
			midRun++
		}
		t.Logf("trial %d: killed process %d after a reader saw %d of its records; it had %d+%d, %d padded", trial, victim, seen, next[victim*goroutines], next[victim*goroutines+1], st.Padded)
	}
	t.Logf("%d of %d kills landed before the victim had appended all its records", midRun, trials)
	if midRun < trials/2 {
		t.Fatalf("only %d of %d kills landed before the victim had appended all its %d records: the trials test little of a writer killed at work", midRun, trials, goroutines*victimRecs)
	}
}

// victimRecords reads the log at path until it has seen n records of
// process victim (writers victim*goroutines and the next goroutines-1),
// and returns n.
func victimRecords(t *testing.T, path string, victim, goroutines, n int) int {
	t.Helper()
	r, err := shmlog.OpenReader(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for seen := 0; seen < n; {
		if err := r.Wait(ctx); err != nil {
			t.Fatalf("waiting for record %d of %d of process %d: %v", seen, n, victim, err)
		}
		rec, ok, err := r.Next()
		if !ok || err != nil {
			t.Fatalf("Next after Wait: %v %v", ok, err)
		}
		if w, _, err := payload.Decode(rec.Payload); err == nil && w/goroutines == victim {
			seen++
		}
	}
	return n
}
