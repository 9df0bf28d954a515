package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBrokerInterrupted stops a --backlog run with SIGINT while it
// publishes: the consumers never drain, so the records they did not get
// are undelivered, not lost. The run exits 1, says it was interrupted,
// claims no loss, and removes its temporary directory.
func TestBrokerInterrupted(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT on Windows")
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath, "broker", "--backlog", "--streams", "2", "--publishers", "2",
		"--consumers", "2", "--records", "200000000", "--sync", "never", "--acks", "--json")
	cmd.Env = append(cliEnv(), "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first ack line says records are flowing: interrupt then.
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("broker printed no ack line: %v\n%s", sc.Err(), stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	last := sc.Text()
	for sc.Scan() {
		last = sc.Text()
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("interrupted broker: %v, want exit status %d\n%s", err, exitFailure, stderr.String())
	}
	var res brokerResult
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("last stdout line is not the result: %v: %q\n%s", err, last, stderr.String())
	}
	if res.Verified || !strings.Contains(res.Error, "interrupted") {
		t.Errorf("verified %v, error %q; want not verified, interrupted", res.Verified, res.Error)
	}
	if res.Published == 0 || res.Lost != 0 || res.Undelivered == 0 || res.Consumed+res.Undelivered != res.Published {
		t.Errorf("published %d, consumed %d, lost %d, undelivered %d: want nothing lost, the rest undelivered\n%s",
			res.Published, res.Consumed, res.Lost, res.Undelivered, stderr.String())
	}
	if strings.Contains(stderr.String(), "VERIFICATION FAILED") {
		t.Errorf("an interrupted run reports a verification failure:\n%s", stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "appendlog-broker-*")); len(left) > 0 {
		t.Errorf("interrupted broker left %v", left)
	}
}
