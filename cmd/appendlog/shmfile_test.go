package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

// _shmTestOpts makes small files, so a few hundred records span several.
var _shmTestOpts = shmlog.Options{MaxFileSize: 16 << 10}

// shmAppend appends n records to the shared-memory log at file (creating
// it): every third an internal/payload record (printed as hex), the others
// text. It returns the line dump prints for each.
func shmAppend(t *testing.T, file string, from, n int) []string {
	t.Helper()
	o := _shmTestOpts
	l, err := shmlog.Open(file, &o)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := from; i < from+n; i++ {
		p := []byte(fmt.Sprintf("shm record %d", i))
		if i%3 == 0 {
			if p, err = payload.Append(nil, 1, uint64(i), 64); err != nil {
				t.Fatal(err)
			}
		}
		pos, err := l.Append(p)
		if err != nil {
			l.Close()
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%#x\t%s", pos, appendPayload(nil, p, false)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestShmFileVerifyDump: verify, dump and tail take a shared-memory log
// FILE as well as a log directory.
func TestShmFileVerifyDump(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	want := shmAppend(t, file, 0, 300)
	if _, err := os.Stat(file + ".00000001"); err != nil {
		t.Fatalf("the log did not span several files: %v", err)
	}
	r := cli(t, "verify", file)
	expect(t, r, 0, file+": 300 records in ", " files, whole and in order; 0 unfinished frames padded")
	expect(t, cli(t, "shm", "verify", file), 0, r.stdout)

	for _, args := range [][]string{{"dump", file}, {"tail", "-n", "300", file}} {
		r := cli(t, args...)
		expect(t, r, 0)
		if got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s printed %d lines, want %d; first %q, want %q", args[0], len(got), len(want), got[0], want[0])
		}
	}
	if !strings.HasPrefix(want[0], "0x0\t") || !strings.HasPrefix(want[1], "0x") {
		t.Fatalf("positions: %q, %q", want[0], want[1])
	}
	expect(t, cli(t, "dump", "--count", file), 0, "300\n")
	r = cli(t, "dump", "--hex", file)
	expect(t, r, 0, fmt.Sprintf("\t%x\n", "shm record 1"))
	expect(t, runInProcess("dump", "--from", "5", file), exitUsage, "--from")
	expect(t, runInProcess("verify", "--payloads", file), exitUsage, "--payloads")

	// A flipped byte in a record's payload is damage, named by file and
	// offset.
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 4096+16+2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	expect(t, cli(t, "verify", file), 1, file, "offset 4096", "checksum mismatch")
	expect(t, cli(t, "dump", file), 1, file, "offset 4096", "stopped after 0 records")
	expect(t, cli(t, "tail", file), 1, file, "offset 4096")
}

// TestShmFileOtherKinds: a regular file that is not a shared-memory log
// (a wal segment, a text file) is still "not a directory".
func TestShmFileOtherKinds(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 10)
	segs, err := filepath.Glob(filepath.Join(d, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments: %v", err)
	}
	text := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(text, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{segs[0], text} {
		for _, cmd := range []string{"verify", "dump", "tail"} {
			expect(t, runInProcess(cmd, file), 1, file+": not a directory")
		}
	}
	// shm verify of a log's segment names its directory, where the
	// message was shmlog's twice-prefixed "not a shared-memory log file:
	// file kind wal".
	r := runInProcess("shm", "verify", segs[0])
	expect(t, r, 1, segs[0]+": a segment of the log directory "+d+", not a shared-memory log file", "appendlog verify "+d)
	if strings.Contains(r.stderr, "shmlog:") {
		t.Fatalf("the shmlog package's prefix reaches the user:\n%s", r)
	}
}

// TestShmFileDamagedHeader: a shared-memory log whose header page is
// damaged is reported as damage naming the file and offset, not as "not a
// directory".
func TestShmFileDamagedHeader(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	shmAppend(t, file, 0, 10)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[17] ^= 0xff // the first sequence number, under the header CRC
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"verify", "dump", "tail"} {
		r := runInProcess(cmd, file)
		expect(t, r, 1, file, "offset")
		if strings.Contains(r.stderr, "not a directory") {
			t.Fatalf("%s of a damaged shared-memory log says %q", cmd, r.stderr)
		}
	}
}

// TestShmFileTailFollow: tail -f FILE prints the records there, then those
// another process appends, and exits 0 on SIGINT.
func TestShmFileTailFollow(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	want := shmAppend(t, file, 0, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath, "tail", "-f", "-n", "50", file)
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
				t.Fatalf("tail -f printed %q (open %v), want %q; stderr:\n%s", got, ok, want, stderr.String())
			}
		case <-ctx.Done():
			t.Fatalf("tail -f printed nothing for %q; stderr:\n%s", want, stderr.String())
		}
	}
	for _, w := range want {
		next(w)
	}
	// Appended while tail -f waits, across files.
	for _, w := range shmAppend(t, file, 50, 250) {
		next(w)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		t.Fatalf("tail -f printed %q that nobody appended", l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail -f after SIGINT: %v; stderr:\n%s", err, stderr.String())
	}
}

// TestShmFileDeadWriter: dump and tail (without -f) FILE read past a
// frame its writer left unfinished when it went away, padding it over as
// documented, rather than stopping there with exit status 0 as if the log
// ended: every committed record after it is printed and counted.
func TestShmFileDeadWriter(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	o := _shmTestOpts
	l, err := shmlog.Open(file, &o)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	add := func(p string) {
		pos, err := l.Append([]byte(p))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%#x\t%s", pos, p))
	}
	add("before")
	if _, err := l.Reserve(10); err != nil { // never committed
		t.Fatal(err)
	}
	add("after 1")
	add("after 2")
	// Closing frees the writer's slot: its frame in progress now belongs to
	// a writer that is gone, as if its process had been killed.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, cli(t, "dump", "--count", file), 0, "3\n")
	for _, args := range [][]string{{"dump", file}, {"tail", file}} {
		r := cli(t, args...)
		expect(t, r, 0)
		if got := strings.TrimSuffix(r.stdout, "\n"); got != strings.Join(want, "\n") {
			t.Fatalf("%s printed\n%s\nwant\n%s", args[0], got, strings.Join(want, "\n"))
		}
	}
	expect(t, cli(t, "verify", file), 0, "3 records", "0 unfinished frames padded")
}
