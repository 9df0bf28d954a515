package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupFailureJSON: load --json and broker --json that cannot start
// (a bad combination of flags found after parsing, a directory that cannot
// be made or is not empty, a broker run with nothing to resume) still end
// stdout with one JSON object, whose "error" is the message on stderr, as
// stat --json does; the exit status is unchanged.
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
			if tc.args[0] == "broker" && (got.Verified == nil || *got.Verified) {
				t.Fatalf("a broker run that did not start has verified %v, want false\n%s", got.Verified, r)
			}
			if strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
				t.Fatalf("stdout has more than the JSON object:\n%s", r)
			}
		})
	}
}
