package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/appendlog/appendlog/internal/kafkatest"
	"github.com/appendlog/appendlog/wal"
)

// TestShipKillRealKafka SIGKILLs `appendlog ship` at random moments while
// it ships to a real Kafka broker, ten times, then lets a last run finish:
// the topic holds every record of the log exactly once, in order.
func TestShipKillRealKafka(t *testing.T) {
	b := kafkatest.Start(t)
	b.CreateTopic("t", 1)
	d := filepath.Join(t.TempDir(), "log")
	n := 0
	appendMore := func(k int) {
		t.Helper()
		l, err := wal.Open(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range k {
			n++
			if _, err := l.Append(fmt.Appendf(nil, "record %d", n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rng := killRNG(t, 16)
	args := []string{"ship", "--dir", d, "--brokers", b.Addr, "--topic", "t", "--source", "kill-test", "--json"}
	// Each trial has 100,000 new records to ship, and is killed after 50 to
	// 350 ms: most runs die mid-shipping. Ten must.
	killed := 0
	for trial := 0; killed < 10; trial++ {
		if trial == 40 {
			t.Fatalf("only %d of 40 runs were killed while shipping", killed)
		}
		appendMore(100_000)
		cmd := exec.Command(cliPath, args...)
		cmd.Env = cliEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == -1 { // ended by a signal: ours
			killed++
		} else if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
	}
	r := cli(t, args...)
	expect(t, r, exitOK)
	var res shipResult
	if err := jsonUnmarshal(lastLine(r.stdout), &res); err != nil || res.Committed != uint64(n)+1 {
		t.Fatalf("the last run: %v %+v\n%s", err, res, r)
	}
	t.Logf("%d runs killed while shipping %d records; the last run shipped %d and skipped %d already in Kafka", killed, n, res.Shipped, res.DuplicatesSkipped)

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	next := uint64(1)
	for next <= uint64(n) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", next-1, n)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch: %v", fe.Err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			var seq uint64
			for _, h := range rec.Headers {
				if h.Key == "appendlog-seq" {
					seq, _ = strconv.ParseUint(string(h.Value), 10, 64)
				}
			}
			if seq != next || string(rec.Value) != fmt.Sprintf("record %d", seq) {
				t.Fatalf("offset %d: seq %d %q, want seq %d (lost or duplicated)", rec.Offset, seq, rec.Value, next)
			}
			next++
		})
	}
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if fs := cl.PollFetches(short); fs.NumRecords() != 0 {
		t.Fatalf("%d records after the last one: duplicates", fs.NumRecords())
	}
}
