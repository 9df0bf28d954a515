package main

import (
	"path/filepath"
	"testing"
)

// TestShipCLIFlagMisuse: flags ship used to ignore or misread are usage
// errors: an empty broker in --brokers (the client took it for
// localhost:9092), --group without --stream and --cursor with --stream
// (ship read through another consumer than the one named).
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
	} {
		r := runInProcess(append([]string{"ship"}, tc.args...)...)
		checkNoCrash(t, r)
		expect(t, r, exitUsage, tc.want)
	}
}
