//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBrokerKill SIGKILLs the broker workload at random moments and
// resumes it: every record confirmed before the kill is still in its
// stream, and the resumed run delivers every record from each group's
// checkpoint on exactly once, with no record that was never published.
// (Records below a group's checkpoint were acked before it was written.)
//
// A kill after a delay is timed from the first ack line, not from the
// start: under -race a start can take longer than any delay drawn, and
// kills that all land in start-ups check nothing. Each trial reports the
// records the resumed run found, and the test fails unless every kill
// landed after records were confirmed.
func TestBrokerKill(t *testing.T) {
	trials := 20
	if testing.Short() {
		trials = 5
	}
	rng := killRNG(t, 0x62726f6b)
	var worked int
	var found []uint64
	defer func() {
		t.Logf("records in the store after each kill: %v", found)
		if !t.Failed() && worked < trials {
			t.Errorf("only %d of %d broker runs were killed after confirming a record: the others died starting up", worked, trials)
		}
	}()
	modes := [][]string{
		{"--mode", "streams", "--streams", "3", "--publishers", "4", "--consumers", "6", "--sync", "batch"},
		{"--mode", "queue", "--publishers", "3", "--consumers", "4", "--sync", "always"},
		// Without syncs a stream's durable position moves only when a
		// segment is sealed: small segments keep an ack-count kill from
		// needing hundreds of megabytes (60 acks of 8 MiB segments once
		// took over 30 s on a loaded CI machine).
		{"--mode", "streams", "--streams", "2", "--publishers", "2", "--consumers", "2", "--sync", "never", "--segment-size", "1MiB"},
	}
	for i := range trials {
		args := modes[i%len(modes)]
		var k killAt
		if rng.IntN(2) == 0 {
			k.after = time.Duration(20+rng.IntN(400)) * time.Millisecond
		} else {
			k.acks = 1 + rng.IntN(60)
		}
		t.Run(fmt.Sprintf("trial=%d/%s/%v", i, args[1], k), func(t *testing.T) {
			confirmed, n := brokerKillTrial(t, k, args)
			found = append(found, n)
			if confirmed {
				worked++
			}
		})
	}
}

// brokerKillTrial runs one TestBrokerKill trial. It returns whether the
// killed run had confirmed a record, and how many records the resumed run
// found in the store.
func brokerKillTrial(t *testing.T, k killAt, args []string) (confirmed bool, found uint64) {
	dir := filepath.Join(t.TempDir(), "b")
	cmd := exec.Command(cliPath, append([]string{"broker", "--dir", dir, "--acks", "--duration", "1m", "--size", "64"}, args...)...)
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
	var (
		mu       sync.Mutex
		acked    = map[int]uint64{} // stream index -> confirmed seq
		lines    int
		badLine  string
		need     = max(k.acks, 1) // a kill after a delay waits for one
		enough   = make(chan struct{})
		readDone = make(chan struct{})
	)
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			mu.Lock()
			var si int
			var seq uint64
			var err1, err2 error
			if len(f) == 3 && f[0] == "durable" {
				si, err1 = strconv.Atoi(f[1])
				seq, err2 = strconv.ParseUint(f[2], 10, 64)
			}
			if len(f) != 3 || f[0] != "durable" || err1 != nil || err2 != nil || seq < acked[si] {
				if badLine == "" {
					badLine = sc.Text()
				}
			} else {
				acked[si] = seq
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
		t.Fatalf("broker was not killed: %v\nstderr:\n%s", err, &stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if badLine != "" {
		t.Fatalf("bad ack line %q", badLine)
	}

	r := cli(t, "broker", "--dir", dir, "--resume", "--records", "900", "--json")
	if r.code != exitOK && len(acked) == 0 && strings.Contains(r.stderr, "no broker run to resume") {
		return false, 0 // killed before it wrote its workload down: nothing was confirmed
	}
	expect(t, r, exitOK, "verified")
	lastLine := r.stdout[strings.LastIndexByte(strings.TrimSpace(r.stdout), '\n')+1:]
	var res brokerResult
	if err := jsonUnmarshal(lastLine, &res); err != nil {
		t.Fatalf("result: %v\n%s", err, r)
	}
	if !res.Verified || res.Lost != 0 || res.Duplicates != 0 || res.Published != 900 {
		t.Fatalf("resumed run: %+v", res)
	}
	for si, seq := range acked {
		if si >= len(res.ResumedNext) || res.ResumedNext[si] <= seq {
			t.Fatalf("stream %d: seq %d was confirmed before the kill, but the store resumed at %v", si, seq, res.ResumedNext)
		}
	}
	var from []string
	for g, f := range res.ResumedFrom {
		from = append(from, fmt.Sprintf("%s@%d", g, f))
	}
	t.Logf("killed after %d ack lines, confirmed %v; resumed at %v, groups from %s", lines, acked, res.ResumedNext, strings.Join(from, " "))
	for _, next := range res.ResumedNext {
		found += next - 1
	}
	return len(acked) > 0, found
}
