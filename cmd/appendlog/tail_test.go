package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

func TestTailWithoutFollow(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 50)
	r := runInProcess("tail", "--from", "48", d)
	expect(t, r, 0)
	if r.stdout != "48\trecord 47\n49\trecord 48\n50\trecord 49\n" {
		t.Fatalf("tail --from 48:\n%s", r)
	}
	expect(t, runInProcess("tail", "--from", "49", "--hex", d), 0, "49\t7265636f7264203438\n")
	expect(t, runInProcess("tail", "--from", "x", d), exitUsage, "--from")
	expect(t, runInProcess("tail"), exitUsage, "missing log directory argument")
	expect(t, runInProcess("tail", "-f", filepath.Join(d, "missing")), exitFailure, "no such directory")
	foreign := t.TempDir()
	writeFile(t, filepath.Join(foreign, "notes"), []byte("x"))
	expect(t, runInProcess("tail", "-f", foreign), exitFailure, "not an appendlog log")
}

// TestTailFollowsAnotherProcess runs "appendlog tail -f" on a log this
// process writes, through several segment rotations: every record must be
// printed once, in order, each soon after it was handed to the OS; SIGINT
// ends tail with exit status 0. It logs the append-to-print latency.
func TestTailFollowsAnotherProcess(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath, "tail", "-f", "--from", "1", d)
	cmd.Env = cliEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got, ok := <-lines:
			if !ok || got != want {
				t.Fatalf("tail printed %q (open %v), want %q; stderr:\n%s", got, ok, want, stderr.String())
			}
		case <-ctx.Done():
			t.Fatalf("tail printed nothing for %q; stderr:\n%s", want, stderr.String())
		}
	}
	for i := range 100 {
		next(fmt.Sprintf("%d\trecord %d", i+1, i))
	}
	l, err := wal.Open(d, &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 400
	pad := strings.Repeat("x", 1000) // 400 KiB: six rotations or so
	var lat []time.Duration
	for i := range n {
		p := fmt.Sprintf("rec %d %s", i, pad)
		start := time.Now()
		seq, err := l.Append([]byte(p))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		next(fmt.Sprintf("%d\t%s", seq, p))
		lat = append(lat, time.Since(start))
	}
	if l.Stats().SegmentsCreated < 3 {
		t.Fatalf("only %d rotations", l.Stats().SegmentsCreated)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range lines {
		t.Fatal("tail printed a line nobody appended")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail -f after SIGINT: %v; stderr:\n%s", err, stderr.String())
	}
	slices.Sort(lat)
	// inotify wakes tail: a poll alone would take up to 100ms a record.
	if p50 := lat[n/2]; p50 > 50*time.Millisecond {
		t.Errorf("median latency %v: tail -f is not woken by inotify", p50)
	}
	t.Logf("append+flush to line printed by tail -f, %d records: p50 %v, p90 %v, p99 %v, max %v",
		n, lat[n/2], lat[n*9/10], lat[n*99/100], lat[n-1])
}

// TestTailFollowFromTheEnd: tail -f --from past the last record prints
// only the records appended after it started, then exits 0 on SIGINT.
func TestTailFollowFromTheEnd(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath, "tail", "-f", "--from", "101", d)
	cmd.Env = cliEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	l, err := wal.Open(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 {
		if _, err := l.Append([]byte(fmt.Sprintf("new %d", i))); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d\tnew %d", 101+i, i)
		if !sc.Scan() || sc.Text() != want {
			t.Fatalf("tail printed %q, want %q; stderr:\n%s", sc.Text(), want, stderr.String())
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if sc.Scan() {
		t.Fatalf("tail printed %q after the appends", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail -f after SIGINT: %v; stderr:\n%s", err, stderr.String())
	}
}

// TestTailFollowRemoved: tail -f of a log directory or shared-memory log
// file that is moved away or removed while it waits ends with exit status
// 1 naming it, instead of waiting silently forever on files no longer
// there. (The directory is renamed, at once: removed file by file, the
// wal reader may see its segments go first and say so itself.)
func TestTailFollowRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	smallLog(t, dir, 10)
	file := filepath.Join(t.TempDir(), "shm")
	shmAppend(t, file, 0, 10)
	// The directory stays; its files go (and a new log is made in it):
	// the Reader's open segment file reads as it was, so only a look at
	// the files can tell.
	emptied := filepath.Join(t.TempDir(), "log")
	smallLog(t, emptied, 10)
	recreated := filepath.Join(t.TempDir(), "log")
	smallLog(t, recreated, 10)
	removeFiles := func(dir string) error {
		ents, err := os.ReadDir(dir)
		for _, e := range ents {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
		return err
	}
	for _, tc := range []struct {
		name, path string
		remove     func() error
	}{
		{"dir", dir, func() error { return os.Rename(dir, dir+".old") }},
		{"segments", emptied, func() error { return removeFiles(emptied) }},
		{"segments-recreated", recreated, func() error {
			if err := removeFiles(recreated); err != nil {
				return err
			}
			smallLog(t, recreated, 20)
			return nil
		}},
		{"shm", file, func() error {
			m, err := filepath.Glob(file + "*")
			for _, n := range m {
				if err := os.Remove(n); err != nil {
					return err
				}
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, cliPath, "tail", "-f", tc.path)
			cmd.Env = cliEnv()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(pipe)
			for i := range 10 { // tail -f has opened the log and waits
				if !sc.Scan() {
					t.Fatalf("tail -f ended after %d lines; stderr:\n%s", i, stderr.String())
				}
			}
			if err := tc.remove(); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				t.Errorf("tail -f printed %q", sc.Text())
			}
			err = cmd.Wait()
			if ctx.Err() != nil {
				t.Fatalf("tail -f went on waiting after %s was removed (%v)", tc.path, err)
			}
			r := result{args: cmd.Args[1:], stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
			checkNoCrash(t, r)
			expect(t, r, exitFailure, tc.path, "removed")
		})
	}
}
