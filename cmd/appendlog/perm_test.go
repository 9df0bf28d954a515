package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// asOther returns a function that runs the CLI as a user that the files
// of mode 0 under the test's directories deny: this user, or, when the
// tests run as root (whom no mode denies), the user nobody through
// setpriv(1), from a copy of the binary that nobody may run. It skips the
// test when neither is possible. dirs are made traversable by others.
func asOther(t *testing.T, dirs ...string) func(args ...string) result {
	t.Helper()
	bin, prefix := cliPath, []string(nil)
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("running as root and no setpriv to drop to another user: permissions cannot be tested")
		}
		d := t.TempDir()
		dirs = append(dirs, d)
		bin = filepath.Join(d, "appendlog")
		b, err := os.ReadFile(cliPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		prefix = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	for _, d := range dirs { // t.TempDir and its parent are 0700
		for _, x := range []string{d, filepath.Dir(d)} {
			if err := os.Chmod(x, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		argv := append(append(prefix, bin), args...)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = cliEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, r)
		}
		checkNoCrash(t, r)
		return r
	}
}

// TestUnreadable: a log directory or shared-memory log file the user may
// not read is named with "permission denied", not called "not a
// directory" (a shared-memory log file that could not be opened) or "a
// stream store" (a directory whose STORE file could not be looked for).
func TestUnreadable(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "log")
	smallLog(t, dir, 10)
	file := filepath.Join(base, "shm")
	shmAppend(t, file, 0, 10)
	for _, p := range []string{dir, file} {
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	// A log whose directory may be read but one segment not.
	segDir := filepath.Join(base, "seglog")
	smallLog(t, segDir, 3000)
	segs := segments(t, segDir)
	if len(segs) < 2 {
		t.Fatalf("want 2 segments or more, got %v", segs)
	}
	if err := os.Chmod(filepath.Join(segDir, segs[1]), 0); err != nil {
		t.Fatal(err)
	}
	run := asOther(t, base, segDir)
	if r := run("verify", dir); r.code == 0 {
		t.Skipf("the user the test runs as reads a directory of mode 0:\n%s", r)
	}
	for _, args := range [][]string{
		{"verify", file}, {"dump", file}, {"tail", file}, {"shm", "verify", file},
		{"verify", dir}, {"dump", dir}, {"tail", dir}, {"stat", dir}, {"repair", dir},
		{"verify", segDir}, {"dump", segDir}, {"dump", "--count", segDir}, {"tail", "--from", "1", segDir},
		{"tail", "-n", "3000", segDir}, {"stat", "--json", segDir},
	} {
		r := run(args...)
		expect(t, r, exitFailure, args[len(args)-1], "permission denied")
		checkOutputKind(t, r)
		for _, bad := range []string{"not a directory", "stream store", "wal:"} {
			if strings.Contains(r.stderr, bad) {
				t.Fatalf("says %q:\n%s", bad, r)
			}
		}
	}
}
