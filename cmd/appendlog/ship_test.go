package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/appendlog/appendlog/stream"
)

// kafkaCluster starts an in-process Kafka (kfake) on 127.0.0.1 with the
// given topics of one partition each.
func kafkaCluster(t *testing.T, topics ...string) string {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.1:0")
	})}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(1, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// topicRecords counts the records of topic on the broker at addr.
func topicRecords(t *testing.T, addr, topic string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			return n
		}
		n += fs.NumRecords()
	}
}

// TestShipCLI ships a log, then ships it again (nothing new), and creates
// a missing topic with --create-topic.
func TestShipCLI(t *testing.T) {
	addr := kafkaCluster(t, "events")
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 3000)
	var res shipResult
	r := runInProcess("ship", "--dir", d, "--brokers", addr, "--topic", "events", "--json")
	expect(t, r, exitOK, "appendlog ship: 3000 records")
	if err := jsonUnmarshal(lastLine(r.stdout), &res); err != nil || res.Shipped != 3000 || res.Committed != 3001 || res.DuplicatesSkipped != 0 {
		t.Fatalf("ship --json: %v %+v\n%s", err, res, r)
	}
	r = runInProcess("ship", "--dir", d, "--brokers", addr, "--topic", "events", "--json")
	expect(t, r, exitOK)
	if err := jsonUnmarshal(lastLine(r.stdout), &res); err != nil || res.Shipped != 0 || res.Committed != 3001 {
		t.Fatalf("second ship: %v %+v", err, res)
	}
	if n := topicRecords(t, addr, "events"); n != 3000 {
		t.Fatalf("topic holds %d records, want 3000", n)
	}
	st := cli(t, "stat", d)
	expect(t, st, exitOK, "cursor ship-kafka: committed 3001, lag 0 records")

	r = runInProcess("ship", "--dir", d, "--brokers", addr, "--topic", "fresh", "--cursor", "c2")
	expect(t, r, exitFailure, `the topic does not exist: "fresh"`, "--create-topic")
	r = runInProcess("ship", "--dir", d, "--brokers", addr, "--topic", "fresh", "--cursor", "c2", "--create-topic")
	expect(t, r, exitOK, "appendlog ship: 3000 records")
	if n := topicRecords(t, addr, "fresh"); n != 3000 {
		t.Fatalf("created topic holds %d records, want 3000", n)
	}
}

// TestShipCLIMisuse: missing flags, a bad compression, an unreachable
// broker and a directory that is not a log are clear errors.
func TestShipCLIMisuse(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 10)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if err := os.MkdirAll(filepath.Join(d, "cursors"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "cursors", "broken"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--dir", d, "--topic", "t"}, exitUsage, "--brokers and --topic are required"},
		{[]string{"--dir", d, "--brokers", dead}, exitUsage, "--brokers and --topic are required"},
		{[]string{"--dir", d, "--brokers", dead, "--topic", "t", "--partition", "-1"}, exitUsage, "--partition must not be negative"},
		{[]string{"--dir", d, "--brokers", dead, "--topic", "t", "--compression", "gzip9"}, exitUsage, `--compression "gzip9"`},
		{[]string{"--dir", d, "--brokers", dead, "--topic", "t", "--transactional-id", "x"}, exitUsage, "need --transactional"},
		{[]string{"--dir", d, "--brokers", dead, "--topic", "t", "--transactional", "--commit-interval", "0s"}, exitUsage, "--commit-interval 0s"},
		{[]string{"--dir", d, "--brokers", dead, "--topic", "t"}, exitFailure, "cannot reach Kafka at [" + dead + "]"},
		{[]string{"--dir", filepath.Join(d, "nope"), "--brokers", dead, "--topic", "t"}, exitFailure, "no such directory"},
		{[]string{"--dir", d, "--brokers", dead, "--topic", "t", "--cursor", "broken"}, exitFailure, "bad cursor file " + filepath.Join(d, "cursors", "broken")},
		{[]string{"--dir", d, "--brokers", dead, "--topic", "t", "--cursor", "../x"}, exitFailure, "invalid cursor name"},
		{[]string{"--dir", t.TempDir(), "--brokers", dead, "--topic", "t"}, exitFailure, "cannot reach Kafka"},
	} {
		r := runInProcess(append([]string{"ship"}, tc.args...)...)
		expect(t, r, tc.code, tc.want)
		checkNoCrash(t, r)
	}
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestShipCLIStream ships a stream of a store through its consumer group.
func TestShipCLIStream(t *testing.T) {
	addr := kafkaCluster(t, "orders", "beside")
	d := filepath.Join(t.TempDir(), "store")
	st, err := stream.Open(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := s.Publish([]byte(fmt.Sprintf("order %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r := runInProcess("ship", "--dir", d, "--stream", "orders", "--brokers", addr, "--topic", "orders", "--json")
	expect(t, r, exitOK, "appendlog ship: 2000 records")
	var res shipResult
	if err := jsonUnmarshal(lastLine(r.stdout), &res); err != nil || res.Shipped != 2000 || res.Committed != 2001 {
		t.Fatalf("ship --stream: %v %+v\n%s", err, res, r)
	}
	if n := topicRecords(t, addr, "orders"); n != 2000 {
		t.Fatalf("topic holds %d records, want 2000", n)
	}
	expect(t, cli(t, "stat", d), exitOK, "cursor ship-kafka: committed 2001, lag 0 records")
	r = runInProcess("ship", "--dir", d, "--stream", "nope", "--brokers", addr, "--topic", "orders")
	expect(t, r, exitFailure, "nope")

	// Beside a process that holds the store: the error says how, and the
	// way it gives works while the store stays open.
	st, err = stream.Open(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logDir := filepath.Join(d, "streams", "orders", "log")
	r = runInProcess("ship", "--dir", d, "--stream", "orders", "--brokers", addr, "--topic", "beside")
	expect(t, r, exitFailure, "store is in use", "--dir "+logDir+" --cursor ship-orders")
	r = runInProcess("ship", "--dir", d, "--stream", "nope", "--brokers", addr, "--topic", "beside")
	expect(t, r, exitFailure, "store is in use", `no stream "nope"`)
	r = runInProcess("ship", "--dir", logDir, "--cursor", "ship-orders", "--brokers", addr, "--topic", "beside", "--json")
	expect(t, r, exitOK, "appendlog ship: 2000 records")
	if n := topicRecords(t, addr, "beside"); n != 2000 {
		t.Fatalf("topic holds %d records, want 2000", n)
	}
}
