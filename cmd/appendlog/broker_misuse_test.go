package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokerResumeMisuse: --resume of a run whose store or one of whose
// streams is gone fails (exit 1) instead of creating them anew and
// verifying that nothing was lost; a broker.json with a value out of
// range is a damaged file (exit 1), not a usage error (exit 2); --records
// with --duration is a usage error (--records was ignored), and so are an
// infinite --rate and sizes the store refuses.
func TestBrokerResumeMisuse(t *testing.T) {
	base := filepath.Join(t.TempDir(), "b")
	expect(t, runInProcess("broker", "--dir", base, "--records", "200", "--streams", "2", "--publishers", "2", "--consumers", "2"), exitOK)
	clone := func(name string) string {
		t.Helper()
		d := filepath.Join(t.TempDir(), name)
		if err := os.CopyFS(d, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		return d
	}

	// The store removed.
	d := clone("nostore")
	if err := os.RemoveAll(filepath.Join(d, _storeSub)); err != nil {
		t.Fatal(err)
	}
	r := runInProcess("broker", "--dir", d, "--resume", "--records", "10")
	checkNoCrash(t, r)
	expect(t, r, exitFailure, "the store of the run being resumed is gone")
	if _, err := os.Stat(filepath.Join(d, _storeSub)); !os.IsNotExist(err) {
		t.Fatalf("a refused --resume made a store: %v", err)
	}

	// One stream removed.
	d = clone("nostream")
	if err := os.RemoveAll(filepath.Join(d, _storeSub, "streams", "s00001")); err != nil {
		t.Fatal(err)
	}
	r = runInProcess("broker", "--dir", d, "--resume", "--records", "10")
	checkNoCrash(t, r)
	expect(t, r, exitFailure, "stream s00001 of the run being resumed is gone")

	// A run of a broker.json without "created" (killed while setting up)
	// still resumes, creating what is missing.
	d = clone("killedearly")
	spec := filepath.Join(d, _brokerSpec)
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"created": true`) {
		t.Fatalf("broker.json of a finished run:\n%s", b)
	}
	noCreated := strings.Replace(string(b), `"created": true`, `"created": false`, 1)
	if err := os.WriteFile(spec, []byte(noCreated), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(d, _storeSub)); err != nil {
		t.Fatal(err)
	}
	expect(t, runInProcess("broker", "--dir", d, "--resume", "--records", "10"), exitOK)

	// Damaged values in broker.json.
	d = clone("damaged")
	bad := strings.Replace(string(b), `"streams": 2`, `"streams": 0`, 1)
	if err := os.WriteFile(filepath.Join(d, _brokerSpec), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runInProcess("broker", "--dir", d, "--resume", "--records", "10")
	checkNoCrash(t, r)
	expect(t, r, exitFailure, filepath.Join(d, _brokerSpec), "--streams must be between")
	if strings.Contains(r.stderr, "--help") {
		t.Fatalf("a damaged broker.json reported as a usage error:\n%s", r)
	}

	expect(t, runInProcess("broker", "--records", "10", "--duration", "1s"), exitUsage, "--records and --duration are exclusive")
	// Sizes the store refuses are usage errors, found before the run's
	// directory is made: they were failures (exit 1) that left broker.json
	// and a store behind.
	fresh := filepath.Join(t.TempDir(), "fresh")
	for _, args := range [][]string{{"--segment-size", "1KiB"}, {"--buffer-size", "1"}, {"--reader-window", "1"}} {
		r := runInProcess(append([]string{"broker", "--dir", fresh, "--records", "10"}, args...)...)
		checkNoCrash(t, r)
		expect(t, r, exitUsage, args[0])
		if _, err := os.Stat(fresh); !os.IsNotExist(err) {
			t.Fatalf("broker %s %s made its --dir: %v", args[0], args[1], err)
		}
	}
	// An infinite rate ran, then failed to encode the --json result.
	expect(t, runInProcess("broker", "--records", "10", "--rate", "Inf", "--json"), exitUsage, "--rate must be finite")
}

// TestBrokerRunFileLink: a symbolic link at the temporary name broker
// writes its run files through (broker.json.tmp, checkpoints.json.tmp) is
// replaced, not followed: the file it points to, outside the run's
// directory, is left as it was.
func TestBrokerRunFileLink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	expect(t, runInProcess("broker", "--dir", dir, "--records", "200", "--streams", "2", "--publishers", "2", "--consumers", "2"), exitOK)
	outside := filepath.Join(t.TempDir(), "outside")
	keep := []byte("not the broker's\n")
	writeFile(t, outside, keep)
	for _, name := range []string{"broker.json.tmp", "checkpoints.json.tmp"} {
		if err := os.Symlink(outside, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, runInProcess("broker", "--dir", dir, "--resume", "--records", "200"), exitOK)
	if got, err := os.ReadFile(outside); err != nil || string(got) != string(keep) {
		t.Fatalf("%s after broker --resume: %q, %v; want %q", outside, got, err, keep)
	}
}
