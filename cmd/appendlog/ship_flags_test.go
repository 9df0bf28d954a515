package main

import (
	"path/filepath"
	"testing"
)

// TestShipCLIFlagMisuse: flags ship used to ignore or misread are usage
// errors: an empty broker in --brokers (the client took it for
// localhost:9092), --group without --stream and --cursor with --stream
// (ship read through another consumer than the one named), an empty
// --cursor, --group, --stream, --source or --transactional-id (ship read
// through the default cursor, shipped the directory as a log, or shipped as
// the default source, fencing no earlier ship of the one meant), and
// --partitions without --create-topic (ship wrote to the topic as it was).
func TestShipCLIFlagMisuse(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 10)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1,", "--topic", "t"}, "broker 2 is empty"},
		{[]string{"--dir", d, "--brokers", ",", "--topic", "t"}, "broker 1 is empty"},
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--group", "g"}, "--group reads a stream"},
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--stream", "s", "--cursor", "c"}, "not --cursor"},
		// An empty name (an unset variable in a script) read through the
		// default cursor, moving it, and shipped a store as a log.
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--cursor", ""}, "--cursor: empty name"},
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--stream", "s", "--group", ""}, "--group: empty name"},
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--stream", ""}, "--stream: empty name"},
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--source", ""}, "--source: empty name"},
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--transactional", "--transactional-id", ""}, "--transactional-id: empty name"},
		// --partitions only counts the partitions of a topic ship makes.
		{[]string{"--dir", d, "--brokers", "127.0.0.1:1", "--topic", "t", "--partitions", "3"}, "--partitions is the partition count of the topic --create-topic makes"},
	} {
		r := runInProcess(append([]string{"ship"}, tc.args...)...)
		checkNoCrash(t, r)
		expect(t, r, exitUsage, tc.want)
	}
}

// TestShipCLIStreamNotAStore: --stream with a --dir that holds no store
// fails and leaves the directory as it was. An empty one was made a
// stream store (LOCK, STORE, streams/) before ship said it had no such
// stream.
func TestShipCLIStreamNotAStore(t *testing.T) {
	empty := t.TempDir()
	logDir := filepath.Join(t.TempDir(), "log")
	smallLog(t, logDir, 10)
	for _, d := range []string{empty, logDir} {
		before := snapshot(t, d)
		r := runInProcess("ship", "--dir", d, "--stream", "orders", "--brokers", "127.0.0.1:1", "--topic", "t")
		checkNoCrash(t, r)
		expect(t, r, exitFailure, d+": not a stream store")
		if after := snapshot(t, d); after != before {
			t.Fatalf("ship --stream changed %s:\nbefore:\n%s\nafter:\n%s", d, before, after)
		}
	}
}
