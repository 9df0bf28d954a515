package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// brokerJSON runs broker with args and --json and decodes its last line.
func brokerJSON(t *testing.T, code int, args ...string) brokerResult {
	t.Helper()
	r := cli(t, append([]string{"broker", "--json"}, args...)...)
	expect(t, r, code)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var res brokerResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last stdout line is not the result: %v\n%s", err, r)
	}
	return res
}

// TestBrokerModes: both workloads verify, and the counts add up: in
// streams mode each of a stream's groups gets every record of it.
func TestBrokerModes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		consumed int64
	}{
		{"streams", []string{"--streams", "4", "--publishers", "3", "--consumers", "8"}, 2 * 6000},
		{"streams-more-publishers", []string{"--streams", "2", "--publishers", "5", "--consumers", "2", "--sync", "always"}, 6000},
		{"direct-sync", []string{"--streams", "1", "--publishers", "2", "--consumers", "1", "--sync", "always", "--direct-sync"}, 6000},
		{"queue", []string{"--mode", "queue", "--publishers", "4", "--consumers", "6", "--sync", "never"}, 6000},
		{"backlog", []string{"--streams", "3", "--publishers", "3", "--consumers", "3", "--backlog"}, 6000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := brokerJSON(t, exitOK, append(tc.args, "--records", "6000", "--size", "64")...)
			if !res.Verified || res.Published != 6000 || res.Consumed != tc.consumed || res.Lost != 0 || res.Duplicates != 0 {
				t.Fatalf("result %+v", res)
			}
			if res.E2EP50us <= 0 || res.E2EP999us < res.E2EP50us || res.PeakRSSBytes <= 0 || res.DiskBytes <= 0 {
				t.Fatalf("figures missing: %+v", res)
			}
			// CPU time: some, and no more than every CPU busy for the
			// whole run (a unit slip would be off by 1e3 or more).
			if res.CPUSeconds <= 0 || res.CPUSeconds > res.Seconds*float64(runtime.NumCPU())+0.1 ||
				math.Abs(res.CPUPerMsgNs-res.CPUSeconds*1e9/float64(res.Published)) > 1 {
				t.Fatalf("CPU %.3f s (%.0f ns per message) in %.3f s on %d CPUs", res.CPUSeconds, res.CPUPerMsgNs, res.Seconds, runtime.NumCPU())
			}
			if res.Kept {
				t.Fatalf("temporary directory kept: %+v", res)
			}
			if _, err := os.Stat(res.Dir); !os.IsNotExist(err) {
				t.Fatalf("temporary directory %s not removed: %v", res.Dir, err)
			}
		})
	}
}

// TestBrokerDuration: --duration publishes until it has passed, then the
// groups drain what is left.
func TestBrokerDuration(t *testing.T) {
	res := brokerJSON(t, exitOK, "--duration", "300ms", "--streams", "2", "--consumers", "2", "--publishers", "2", "--size", "100")
	if !res.Verified || res.Published == 0 || res.Consumed != res.Published || res.EndLagRecords != 0 {
		t.Fatalf("result %+v", res)
	}
}

// TestBrokerRate: --rate paces the publishers: a second at 4,000 msg/s
// publishes about 4,000, where unpaced publishers publish far more.
func TestBrokerRate(t *testing.T) {
	res := brokerJSON(t, exitOK, "--duration", "1s", "--rate", "4000", "--streams", "4", "--consumers", "4", "--publishers", "4", "--size", "100")
	if !res.Verified || res.Rate != 4000 || res.Published < 3000 || res.Published > 4400 {
		t.Fatalf("a second at 4000 msg/s published %d: %+v", res.Published, res)
	}
}

// TestBrokerResume: a second run on the same directory goes on with the
// first one's streams, publisher counters and group positions.
func TestBrokerResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	first := brokerJSON(t, exitOK, "--dir", dir, "--streams", "3", "--publishers", "3", "--consumers", "3", "--records", "3000")
	if !first.Verified || !first.Kept {
		t.Fatalf("first run %+v", first)
	}
	st := cli(t, "stat", filepath.Join(dir, "store"))
	expect(t, st, exitOK, "store ", "3 streams", "stream s00002: sync batch", "cursor g000: committed 1001, lag 0 records")
	var sj storeStat
	r := cli(t, "stat", "--json", filepath.Join(dir, "store"))
	expect(t, r, exitOK)
	if err := jsonUnmarshal(r.stdout, &sj); err != nil || len(sj.Streams) != 3 || sj.Streams[0].Log.Records != 1000 {
		t.Fatalf("stat --json of the store: %v\n%s", err, r.stdout)
	}
	res := brokerJSON(t, exitOK, "--dir", dir, "--resume", "--records", "1500")
	if !res.Verified || !res.Resumed || res.Published != 1500 || res.Consumed != 1500 {
		t.Fatalf("resumed run %+v", res)
	}
	for i, next := range res.ResumedNext {
		if next != 1001 {
			t.Errorf("stream %d resumed at next seq %d, want 1001", i, next)
		}
	}
	for g, from := range res.ResumedFrom {
		if from != 1001 {
			t.Errorf("group %s resumed from %d, want 1001 (it acked everything and closed)", g, from)
		}
	}
}

// TestBrokerMisuse: bad flags and directories are usage errors naming the
// problem, and nothing is written over.
func TestBrokerMisuse(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--mode", "fanout"}, exitUsage, "--mode must be streams or queue"},
		{[]string{"--sync", "sometimes"}, exitUsage, "--sync must be"},
		{[]string{"--size", "10"}, exitUsage, "--size must be between"},
		{[]string{"--streams", "0"}, exitUsage, "--streams must be"},
		{[]string{"--mode", "queue", "--streams", "4"}, exitUsage, "one stream"},
		{[]string{"--records", "-1"}, exitUsage, "must not be negative"},
		{[]string{"--rate", "-5"}, exitUsage, "must not be negative"},
		{[]string{"--rate", "NaN"}, exitUsage, "must not be negative"},
		{[]string{"--reader-window", "-1"}, exitUsage, "negative size"},
		{[]string{"--resume"}, exitUsage, "--resume needs the --dir"},
		{[]string{"--dir", full}, exitUsage, "not empty"},
		{[]string{"--dir", other, "--resume"}, exitFailure, "no broker run to resume"},
	} {
		r := runInProcess(append([]string{"broker"}, tc.args...)...)
		expect(t, r, tc.code, tc.want)
	}
	if b, err := os.ReadFile(filepath.Join(full, "data")); err != nil || string(b) != "x" {
		t.Fatalf("broker wrote over a non-empty directory: %q %v", b, err)
	}

	dir := filepath.Join(t.TempDir(), "b")
	expect(t, runInProcess("broker", "--dir", dir, "--records", "100", "--streams", "2", "--consumers", "2"), exitOK)
	expect(t, runInProcess("broker", "--dir", dir, "--resume", "--streams", "5"), exitUsage, "--streams is set by the run being resumed")
	if err := os.WriteFile(filepath.Join(dir, _brokerSpec), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, runInProcess("broker", "--dir", dir, "--resume"), exitFailure, _brokerSpec)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestBitset: the verification's set reports each counter once, from any
// number of goroutines, and end names one past the largest, across chunks
// made out of order (a resumed run starts its counters high).
func TestBitset(t *testing.T) {
	var s bitset
	if s.end() != 0 {
		t.Fatalf("empty end = %d", s.end())
	}
	const per, workers = 3 << _chunkBits, 4
	base := uint64(5<<_chunkBits + 17)
	var wg sync.WaitGroup
	var dups atomic.Int64
	for w := range workers {
		wg.Go(func() {
			// Each worker sets every counter; only one set of each is new.
			for i := range per {
				c := base + uint64((i*7+w*per/workers)%per)
				if s.set(c) {
					dups.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got, want := dups.Load(), int64((workers-1)*per); got != want {
		t.Fatalf("%d repeat sets reported, want %d", got, want)
	}
	if got, want := s.end(), base+per; got != want {
		t.Fatalf("end = %d, want %d", got, want)
	}
	if s.set(3) || !s.set(3) || s.end() != base+per {
		t.Fatal("a counter below the others: first set not new, or second new, or end moved")
	}
}

// TestBrokerThousandStreamsRSS: a store of 1,000 streams, each with its
// group and a reader at its tail, each written a little (1,000 records of
// 128 B), stays under 256 MiB of peak RSS with the default options. The
// race detector multiplies memory, so under -race the check runs a binary
// built without it.
func TestBrokerThousandStreamsRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 1,000 streams take about 10 s")
	}
	bin := cliPath
	if raceEnabled {
		bin = filepath.Join(t.TempDir(), "appendlog")
		if err := buildCLIRace(bin, false); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "broker", "--json", "--streams", "1000", "--consumers", "1000", "--records", "1000000", "--dir", t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("broker: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res brokerResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last stdout line is not the result: %v\n%s", err, stdout.String())
	}
	const limit = 256 << 20
	if !res.Verified || res.Consumed != 1000000 || res.PeakRSSBytes <= 0 || res.PeakRSSBytes > limit {
		t.Fatalf("1,000 streams: verified %v, %d consumed, peak RSS %d MiB (limit %d MiB)", res.Verified, res.Consumed, res.PeakRSSBytes>>20, limit>>20)
	}
	t.Logf("1,000 streams: peak RSS %d MiB, %.0f msg/s", res.PeakRSSBytes>>20, res.ConsumePerSec)
}
