package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupFailureJSON: load --json, broker --json, shm load --json, ship
// --json and stat --json that cannot start (a bad flag or argument, a bad
// combination of flags found after parsing, a directory that cannot be
// made, is not empty or is not a log, a broker run with nothing to resume)
// still end stdout with one JSON object, whose "error" is the message on
// stderr, as stat --json does; the exit status is unchanged.
func TestSetupFailureJSON(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(tmp, "full")
	mkdir(t, full)
	if err := os.WriteFile(filepath.Join(full, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"load/bad-size", []string{"load", "--size", "3"}, exitUsage, "--size must be at least"},
		{"load/dir-under-file", []string{"load", "--records", "10", "--dir", filepath.Join(file, "log")}, exitFailure, file},
		{"broker/records-and-duration", []string{"broker", "--records", "10", "--duration", "1s"}, exitUsage, "exclusive"},
		{"broker/nan-rate", []string{"broker", "--rate", "NaN"}, exitUsage, "--rate must be finite"},
		{"broker/not-empty", []string{"broker", "--dir", full}, exitUsage, "not empty"},
		{"broker/dir-under-file", []string{"broker", "--dir", filepath.Join(file, "b")}, exitFailure, file},
		{"broker/nothing-to-resume", []string{"broker", "--resume", "--dir", tmp}, exitFailure, "no broker run to resume"},
		// A bad command line that the flag parser or an argument check
		// refuses, before the command runs; --json given before the bad
		// flag (it is parsed) or after it (it is not).
		{"load/bad-flag-value", []string{"load", "--records", "many"}, exitUsage, `invalid argument "many" for "--records" flag`},
		{"load/json-first", []string{"load", "--json", "--size", "-1", "--records", "10"}, exitUsage, `negative size "-1"`},
		{"load/extra-argument", []string{"load", "extra"}, exitUsage, "extra"},
		{"broker/unknown-flag", []string{"broker", "--nope"}, exitUsage, "unknown flag: --nope"},
		{"stat/two-dirs", []string{"stat", tmp, tmp}, exitUsage, "want one log directory, got 2 arguments"},
		{"stat/unknown-flag", []string{"stat", "--nope", tmp}, exitUsage, "unknown flag: --nope"},
		{"shm-load/no-file", []string{"shm", "load"}, exitUsage, "--file is required"},
		{"shm-load/file-exists", []string{"shm", "load", "--file", file}, exitUsage, file + " exists"},
		{"ship/missing-flags", []string{"ship", "--dir", tmp}, exitUsage, "--dir, --brokers and --topic are required"},
		{"ship/dir-under-file", []string{"ship", "--dir", filepath.Join(file, "log"), "--brokers", "127.0.0.1:1", "--topic", "t"}, exitFailure, file},
		{"ship/not-a-log", []string{"ship", "--dir", full, "--brokers", "127.0.0.1:1", "--topic", "t"}, exitFailure, "not an appendlog log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runInProcess(append(tc.args, "--json")...)
			expect(t, r, tc.code, tc.want)
			last := lastLine(r.stdout)
			var got struct {
				Error    *string `json:"error"`
				Verified *bool   `json:"verified"`
			}
			if err := json.Unmarshal([]byte(last), &got); err != nil || got.Error == nil {
				t.Fatalf("last stdout line is not a JSON object with an error: %v: %q\n%s", err, last, r)
			}
			if !strings.Contains(*got.Error, tc.want) || !strings.Contains(r.stderr, *got.Error) {
				t.Fatalf("JSON error %q: want it to name %q and to be the message on stderr\n%s", *got.Error, tc.want, r)
			}
			if (tc.args[0] == "broker" || tc.args[0] == "shm") && (got.Verified == nil || *got.Verified) {
				t.Fatalf("a broker run that did not start has verified %v, want false\n%s", got.Verified, r)
			}
			if strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
				t.Fatalf("stdout has more than the JSON object:\n%s", r)
			}
		})
	}
}
