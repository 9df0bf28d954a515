package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// cliPath is the appendlog binary built by TestMain; tests run it as a
// subprocess, as a user would.
var cliPath string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "appendlog-cli-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cliPath = filepath.Join(dir, "appendlog")
	if err := buildCLI(cliPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// buildCLI builds the package under test into out, with the race detector
// when the tests run with it.
func buildCLI(out string) error { return buildCLIRace(out, raceEnabled) }

// buildCLIRace builds the package under test into out, with the race
// detector if race.
func buildCLIRace(out string, race bool) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build the CLI: no go command on PATH: %w", err)
	}
	args := []string{"build", "-buildvcs=false", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command(gobin, append(args, ".")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// cliEnv is the environment of the CLI under test. A binary built with
// -race sleeps 1s at exit by default, waiting for late race reports; 10ms
// does here, and a race fails the run at once.
func cliEnv() []string {
	return append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=10 halt_on_error=1"))
}

// result is what one run of the CLI printed and returned.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("appendlog %s: exit %d\nstdout:\n%s\nstderr:\n%s",
		strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cli runs the appendlog binary with args and checks that it neither
// panicked nor reported a data race, whatever its exit status.
func cli(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath, args...)
	cmd.Env = cliEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("appendlog %s: %v\n%s", strings.Join(args, " "), err, r)
	}
	checkNoCrash(t, r)
	return r
}

// runInProcess runs the CLI's run function in this process: faster than
// the binary, for the tests of argument handling.
func runInProcess(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{args: args, stdout: stdout.String(), stderr: stderr.String(), code: code}
}

var _stackTrace = regexp.MustCompile(`goroutine \d+ \[`)

// checkNoCrash fails the test if r's output shows a panic, a Go stack
// trace, a data race or an internal error.
func checkNoCrash(t testing.TB, r result) {
	t.Helper()
	for _, bad := range []string{"panic:", "DATA RACE", "internal error", "runtime error", ".go:"} {
		if strings.Contains(r.stdout, bad) || strings.Contains(r.stderr, bad) {
			t.Fatalf("output contains %q:\n%s", bad, r)
		}
	}
	if _stackTrace.MatchString(r.stdout) || _stackTrace.MatchString(r.stderr) {
		t.Fatalf("output contains a stack trace:\n%s", r)
	}
}

// expect checks r's exit status and that its combined output contains
// every string in want.
func expect(t testing.TB, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\n%s", r.code, code, r)
	}
	out := r.stdout + r.stderr
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("output does not contain %q\n%s", w, r)
		}
	}
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			in.Close()
			t.Fatal(err)
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// segments returns the sorted base names of dir's segment files.
func segments(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m // Glob sorts, and names are zero-padded
}
