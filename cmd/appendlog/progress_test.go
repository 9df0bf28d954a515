package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/sys"
)

// cliOnTerminal runs the appendlog binary with args, its standard error a
// pseudo-terminal, and returns its stdout and what it wrote to the
// terminal.
func cliOnTerminal(t *testing.T, args ...string) (stdout, term string) {
	t.Helper()
	master, tty, err := sys.OpenPTY()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	read := make(chan string, 1)
	go func() {
		// Until the last holder of the terminal side closes it (EIO).
		b, _ := io.ReadAll(master)
		read <- string(b)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath, args...)
	cmd.Env = cliEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	err = cmd.Run()
	tty.Close()
	term = <-read
	if err != nil {
		t.Fatalf("appendlog %s: %v\nterminal:\n%s", strings.Join(args, " "), err, term)
	}
	return out.String(), term
}

// TestProgressBarOnTerminal: with standard error a terminal, broker and
// load draw a progress bar there, naming the command and its unit, and
// stdout keeps only the report (the JSON object last); on a pipe there is
// no bar. The binary is built with -race when the tests are: the bar's
// goroutines are checked too.
func TestProgressBarOnTerminal(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"broker", "msg/s", []string{"broker", "--json", "--streams", "2", "--publishers", "2", "--consumers", "2",
			"--rate", "20000", "--duration", "1s", "--size", "64"}},
		{"load", "rec/s", []string{"load", "--json", "--records", "3000000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--dir", t.TempDir())
			stdout, term := cliOnTerminal(t, args...)
			// The bar redraws its line: a carriage return, the command,
			// the count and the rate.
			if !strings.Contains(term, "\r") || !strings.Contains(term, tc.name) || !strings.Contains(term, tc.want) {
				t.Errorf("no progress bar on the terminal (want a redrawn line with %q and %q):\n%q", tc.name, tc.want, term)
			}
			if testing.Verbose() {
				t.Logf("terminal: %q", term)
			}
			if strings.Contains(stdout, "\r") {
				t.Errorf("the bar went to stdout:\n%q", stdout)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			var res map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
				t.Fatalf("last stdout line is not the JSON result: %v\n%s", err, stdout)
			}
			r := cli(t, args[:len(args)-2]...)
			expect(t, r, exitOK)
			if strings.Contains(r.stderr, "\r") {
				t.Errorf("a progress bar on a pipe:\n%q", r.stderr)
			}
		})
	}
}
