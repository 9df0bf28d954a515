package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/appendlog/appendlog/internal/kafkatest"
	"github.com/appendlog/appendlog/wal"
)

// TestShipKillRealKafka SIGKILLs `appendlog ship` at random moments while
// it ships to a real Kafka broker, ten times, then lets a last run finish:
// the topic holds every record of the log exactly once, in order. It runs
// with and without --transactional, each on a topic of its own.
func TestShipKillRealKafka(t *testing.T) {
	b := kafkatest.Start(t)
	for _, mode := range []struct {
		name, topic string
		args        []string
	}{
		{"idempotent", "t", nil},
		{"transactional", "tx", []string{"--transactional"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			b.CreateTopic(mode.topic, 1)
			shipKillTrials(t, b.Addr, mode.topic, mode.args)
		})
	}
}

// shipKillTrials is a TestShipKillRealKafka trial series on topic.
func shipKillTrials(t *testing.T, addr, topic string, extra []string) {
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
	args := append([]string{"ship", "--dir", d, "--brokers", addr, "--topic", topic, "--source", "kill-test", "--json"}, extra...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// The last stable offset: records Kafka acknowledged, and with
	// --transactional committed, so that a run killed after it grew left
	// work behind that the next run must find.
	endOffset := func() int64 {
		t.Helper()
		ends, err := adm.ListCommittedOffsets(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := ends.Lookup(topic, 0)
		return e.Offset
	}
	// Each trial has 100,000 new records to ship, and is killed 0 to 300
	// ms after its first records reached Kafka (committed, with
	// --transactional; a start takes longer than that under -race: a kill
	// at a fixed time would only ever hit starts). Ten must die so,
	// mid-shipping.
	killed := 0
	for trial := 0; killed < 10; trial++ {
		if trial == 40 {
			t.Fatalf("only %d of 40 runs were killed while shipping", killed)
		}
		appendMore(100_000)
		before := endOffset()
		cmd := exec.Command(cliPath, args...)
		cmd.Env = cliEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		shipping := false
		for deadline := time.Now().Add(time.Minute); !shipping && time.Now().Before(deadline); {
			select {
			case <-exited:
			case <-time.After(5 * time.Millisecond):
				shipping = endOffset() > before
				continue
			}
			break
		}
		if shipping {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if ee, ok := waitErr.(*exec.ExitError); ok && ee.ExitCode() == -1 { // ended by a signal: ours
			if shipping {
				killed++
			}
		} else if waitErr != nil {
			t.Fatalf("trial %d: %v\n%s", trial, waitErr, stderr.Bytes())
		}
	}
	r := cli(t, args...)
	expect(t, r, exitOK)
	var res shipResult
	if err := jsonUnmarshal(lastLine(r.stdout), &res); err != nil || res.Committed != uint64(n)+1 {
		t.Fatalf("the last run: %v %+v\n%s", err, res, r)
	}
	t.Logf("%d runs killed while shipping %d records; the last run shipped %d and skipped %d already in Kafka", killed, n, res.Shipped, res.DuplicatesSkipped)
	if res.Shipped >= uint64(n) {
		t.Fatalf("the killed runs left nothing the last run could use (it shipped all %d records): the kills did not test a restart", n)
	}
	if slices.Contains(extra, "--transactional") && res.Transactions == 0 && res.Shipped > 0 {
		t.Fatalf("the last run shipped through no transaction: %+v", res)
	}
	checkTopicOnce(t, addr, topic, n)
}

// checkTopicOnce reads topic back and checks it holds the records
// "record 1" to "record n" exactly once each, in order, with their
// appendlog-seq headers. It reads as a consumer of a topic shipped with
// --transactional must, read_committed.
func checkTopicOnce(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
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

// TestShipFollowKillRealKafka: `appendlog ship --follow` ships a live log
// that this process keeps appending to (ship takes no lock on it), and is
// SIGKILLed ten times at random moments and stopped by SIGTERM three times
// (exit 0, in-flight records finished and committed). After the writer
// stops, a last run ships to the end: a real Kafka broker holds every
// record exactly once, in order.
func TestShipFollowKillRealKafka(t *testing.T) {
	b := kafkatest.Start(t)
	b.CreateTopic("f", 1)
	d := filepath.Join(t.TempDir(), "log")
	l, err := wal.Open(d, &wal.Options{SegmentSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		// About 200k records/s, in bursts of 200, until stop.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				werr <- l.Close()
				return
			case <-tick.C:
			}
			for range 200 {
				if _, err := l.Append(fmt.Appendf(nil, "record %d", n.Load()+1)); err != nil {
					l.Close()
					werr <- err
					return
				}
				n.Add(1)
			}
		}
	}()
	rng := killRNG(t, 17)
	args := []string{"ship", "--dir", d, "--brokers", b.Addr, "--topic", "f", "--source", "follow-kill", "--json"}
	var lastCommitted uint64
	for trial := range 13 {
		cmd := exec.Command(cliPath, append(args, "--follow")...)
		cmd.Env = cliEnv()
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		term := trial%4 == 3
		sig := syscall.SIGKILL
		if term {
			// A SIGTERM before ship installed its handler ends it as
			// the default action would, which tests nothing of ship: a
			// start under -race on a loaded machine can take longer
			// than the sleep below.
			waitOpenedIn(t, cmd.Process.Pid, d)
			sig = syscall.SIGTERM
		}
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		_ = cmd.Process.Signal(sig)
		err := cmd.Wait()
		if !term {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
				t.Fatalf("trial %d: ship --follow ended before the SIGKILL: %v\n%s", trial, err, out.String())
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: ship --follow stopped by SIGTERM: %v\n%s", trial, err, out.String())
		}
		var res shipResult
		// A SIGTERM before Kafka first answered stops it with nothing
		// sent: the cursor stays where it was.
		if err := jsonUnmarshal(lastLine(out.String()), &res); err != nil || res.Committed < lastCommitted || res.Committed > uint64(n.Load())+1 ||
			res.Committed == lastCommitted && res.Shipped != 0 {
			t.Fatalf("trial %d: SIGTERM summary %v %+v (last committed %d, appended %d)", trial, err, res, lastCommitted, n.Load())
		}
		lastCommitted = res.Committed
	}
	close(stop)
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	total := int(n.Load())
	r := cli(t, args...)
	expect(t, r, exitOK)
	var res shipResult
	if err := jsonUnmarshal(lastLine(r.stdout), &res); err != nil || res.Committed != uint64(total)+1 {
		t.Fatalf("the last run: %v %+v\n%s", err, res, r)
	}
	t.Logf("%d records appended while ship --follow was killed 10 times and stopped 3 times; the last run shipped %d and skipped %d already in Kafka", total, res.Shipped, res.DuplicatesSkipped)
	checkTopicOnce(t, b.Addr, "f", total)
}

// waitOpenedIn waits until process pid holds a file under dir open. ship
// opens the log (its cursor and the cursor's lock) only once it has
// installed its SIGINT and SIGTERM handler.
func waitOpenedIn(t *testing.T, pid int, dir string) {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ents, err := os.ReadDir(fds)
		if err != nil {
			t.Fatalf("list the open files of ship (pid %d): %v", pid, err)
		}
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && strings.HasPrefix(l, dir+string(filepath.Separator)) {
				return
			}
		}
	}
	t.Fatalf("ship (pid %d) opened no file in %s within a minute", pid, dir)
}
