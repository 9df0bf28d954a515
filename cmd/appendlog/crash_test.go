//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/wal"
)

// TestKill runs "appendlog load --acks --sync always" and SIGKILLs it at a
// random moment, then checks the durability contract from outside: every
// record the process acknowledged as durable is present and intact, the
// records present are exactly what the writers appended, in each writer's
// order, and the log recovers and accepts appends. Every third trial has
// one writer, whose waits write and sync on its own goroutine (the wal's
// inline sync); the others have _killWriters, whose waits group-commit on
// the flusher.
//
// A kill after a delay is timed from the first ack line, not from the
// start: under -race a start can take longer than any delay drawn, and
// kills that all land in start-ups check nothing. Each trial reports what
// the killed load had made durable, and the test fails unless every kill
// landed after records were acknowledged.
func TestKill(t *testing.T) {
	trials := 20
	if testing.Short() {
		trials = 5
	}
	rng := killRNG(t, 0x6b696c6c)
	var worked int
	var durable []uint64
	defer func() {
		t.Logf("records durable when each load was killed: %v", durable)
		if !t.Failed() && worked < trials {
			t.Errorf("only %d of %d loads were killed after acknowledging a record: the others died starting up", worked, trials)
		}
	}()
	for i := range trials {
		var k killAt
		if rng.IntN(2) == 0 {
			k.after = time.Duration(5+rng.IntN(296)) * time.Millisecond
		} else {
			k.acks = 1 + rng.IntN(100)
		}
		writers := _killWriters
		if i%3 == 2 {
			writers = 1
		}
		t.Run(fmt.Sprintf("trial=%d/writers=%d/%v", i, writers, k), func(t *testing.T) {
			acked := killTrial(t, k, writers)
			durable = append(durable, acked)
			if acked > 0 {
				worked++
			}
		})
	}
}

// killRNG returns the random source of a kill test: seeded from the clock,
// or from APPENDLOG_KILL_SEED to repeat a run, with the seed logged.
func killRNG(t *testing.T, stream uint64) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("APPENDLOG_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (set APPENDLOG_KILL_SEED to repeat)", seed)
	return rand.New(rand.NewPCG(seed, stream))
}

// killAt says when to kill: after a number of ack lines, or a delay after
// the first one.
type killAt struct {
	after time.Duration
	acks  int
}

func (k killAt) String() string {
	if k.acks > 0 {
		return fmt.Sprintf("after-%d-acks", k.acks)
	}
	return "after-" + k.after.String()
}

// _killWriters is the most writers a kill trial's load has; the records
// appended after the kill are writer _killWriters's.
const _killWriters = 8

// killTrial runs one TestKill trial and returns the last sequence number
// the killed load acknowledged as durable (0: none, it died starting up).
func killTrial(t *testing.T, k killAt, writers int) uint64 {
	dir := filepath.Join(t.TempDir(), "log")
	mkdir(t, dir)
	cmd := exec.Command(cliPath, "load", "--acks", "--sync", "always", "--writers", strconv.Itoa(writers),
		"--records", "1000000", "--size", "100", "--dir", dir)
	cmd.Env = cliEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// Read acks live. Every complete line was printed before the kill,
	// so every one of them is a promise the log must keep. A kill after a
	// delay waits for the first one: the load is appending by then.
	var (
		mu       sync.Mutex
		durable  uint64
		lines    int
		badLine  string
		need     = max(k.acks, 1)
		enough   = make(chan struct{})
		readDone = make(chan struct{})
	)
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			n, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "durable "), 10, 64)
			mu.Lock()
			if err != nil || !strings.HasPrefix(sc.Text(), "durable ") || n < durable {
				if badLine == "" {
					badLine = sc.Text()
				}
			} else {
				durable = n
			}
			lines++
			if lines == need {
				close(enough)
			}
			mu.Unlock()
		}
	}()

	select {
	case <-enough:
		time.Sleep(k.after)
	case <-readDone:
	case <-time.After(30 * time.Second):
		t.Errorf("no %d ack lines after 30s", need)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-readDone
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Exited() {
		t.Fatalf("load was not killed: %v\nstderr:\n%s", err, &stderr)
	}
	checkNoCrash(t, result{args: cmd.Args, stderr: stderr.String()})
	mu.Lock()
	acked, nlines := durable, lines
	mu.Unlock()
	if badLine != "" {
		t.Fatalf("bad ack line %q", badLine)
	}
	t.Logf("killed after %d ack lines; durable %d", nlines, acked)

	// Every acknowledged record is present and intact; so is everything
	// else present, in each writer's order.
	last := checkKilledLog(t, dir, acked)

	expect(t, cli(t, "verify", dir), exitOK)
	expect(t, cli(t, "verify", "--payloads", dir), exitOK)

	// The log recovers and takes appends that survive.
	l, err := wal.Open(dir, nil)
	if err != nil {
		t.Fatalf("wal.Open after kill: %v", err)
	}
	if rec := l.Recovery(); rec.NextSeq != last+1 {
		l.Close()
		t.Fatalf("recovery: next seq %d, but the reader saw records up to %d (%+v)", rec.NextSeq, last, rec)
	}
	p := make([]byte, 100)
	for c := range uint64(100) {
		if err := payload.Encode(p, _killWriters, c); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(p); err != nil {
			l.Close()
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := checkKilledLog(t, dir, last+100); got != last+100 {
		t.Fatalf("after reopen and 100 appends the log ends at seq %d, want %d", got, last+100)
	}
	expect(t, cli(t, "verify", "--payloads", dir), exitOK, fmt.Sprintf("%d records", last+100))
	return acked
}

// checkKilledLog reads the whole log in dir and checks that it holds
// records 1..n with n >= acked, each a valid load payload, with each
// writer's counters consecutive from 0. It returns n.
func checkKilledLog(t *testing.T, dir string, acked uint64) uint64 {
	t.Helper()
	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		if acked == 0 {
			return 0 // killed before the log was created
		}
		t.Fatalf("OpenReader: %v (acked %d)", err, acked)
	}
	defer r.Close()
	k, err := payload.NewChecker(payload.Options{Writers: _killWriters + 1})
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for r.Next() {
		n++
		if r.Seq() != n {
			t.Fatalf("record seq %d, want %d", r.Seq(), n)
		}
		if pr := k.Check(r.Record(), -1, n); pr != nil {
			t.Fatal(pr)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reader stopped after seq %d: %v", n, err)
	}
	if n < acked {
		t.Fatalf("log ends at seq %d, but seq %d was acknowledged as durable", n, acked)
	}
	return n
}
