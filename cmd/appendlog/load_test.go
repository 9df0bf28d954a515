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
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/wal"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends. It skips the test when it cannot: the mount needs
// root on Linux.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs to fill needs root on Linux")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v: %s", dir, err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// loadReport is the JSON result of a load, with the counters an early stop
// reports.
type loadReport struct {
	Records        int64  `json:"records"`
	Requested      int64  `json:"requested_records"`
	WrittenRecords int64  `json:"written_records"`
	DurableRecords int64  `json:"durable_records"`
	FirstSeq       uint64 `json:"first_seq"`
	DurableSeq     uint64 `json:"durable_seq"`
	Syncs          uint64 `json:"syncs"`
	InlineSyncs    uint64 `json:"inline_syncs"`
	Error          string `json:"error"`
}

func parseLoadReport(t *testing.T, r result) loadReport {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	var rep loadReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("last stdout line is not JSON: %v\n%s", err, r)
	}
	return rep
}

// countRecords reads the log in dir from its first record and returns how
// many intact records it holds, failing the test on damage before the tail.
func countRecords(t *testing.T, dir string) int64 {
	t.Helper()
	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		t.Fatalf("open reader on %s: %v", dir, err)
	}
	defer r.Close()
	var n int64
	for r.Next() {
		if r.Seq() != uint64(n+1) {
			t.Fatalf("record %d has seq %d", n+1, r.Seq())
		}
		n++
	}
	if err := r.Err(); err != nil {
		t.Fatalf("read %s after %d records: %v", dir, n, err)
	}
	return n
}

// TestLoadRefusesMoreThanFreeSpace asks for more bytes than any disk has:
// load refuses before creating anything, naming both sizes. The log
// directory's parent is a regular file, so that a load that failed to
// refuse stops at once instead of filling the disk.
func TestLoadRefusesMoreThanFreeSpace(t *testing.T) {
	if _, err := sys.FreeSpace(t.TempDir()); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("no statfs on this platform: load cannot check free space")
	}
	notDir := filepath.Join(t.TempDir(), "file")
	writeFile(t, notDir, nil)
	dir := filepath.Join(notDir, "log")
	r := runInProcess("load", "--dir", dir, "--records", "1000000000000", "--size", "1MiB")
	checkNoCrash(t, r)
	expect(t, r, exitFailure, "1000000000000 records of 1048576 B need 931.3 PiB (16-byte frame headers included)",
		"are free on the file system of "+dir, "--force")
	if !regexp.MustCompile(`, but [0-9]+(\.[0-9])? [KMGTPE]?i?B are free`).MatchString(r.stderr) {
		t.Fatalf("refusal does not name the free space in binary units:\n%s", r)
	}

	// Without --dir, the temporary directory's file system is asked. The
	// product of records and size overflows no counter.
	t.Setenv("TMPDIR", notDir)
	r = runInProcess("load", "--size", "5MB", "--records", "4000000000000000000")
	checkNoCrash(t, r)
	expect(t, r, exitFailure, "4000000000000000000 records of 5000000 B need more than 8.0 EiB", "file system of "+notDir, "--force")

	// A run that fits is not refused.
	r = runInProcess("load", "--dir", filepath.Join(t.TempDir(), "log"), "--records", "100", "--size", "1KiB")
	checkNoCrash(t, r)
	expect(t, r, exitOK)
}

// TestLoadDiskFull fills a small tmpfs: without --force load refuses to
// start; with it, load stops early and reports appended, written and
// durable records separately, and every record reported durable is in the
// log.
func TestLoadDiskFull(t *testing.T) {
	const fsSize = 8 << 20
	mnt := mountTmpfs(t, fsSize)
	dir := filepath.Join(mnt, "log")
	args := []string{"load", "--dir", dir, "--records", "300000", "--size", "100", "--segment-size", "1MiB", "--json"}

	r := cli(t, args...)
	expect(t, r, exitFailure, "300000 records of 100 B need 33.2 MiB", "but 8.0 MiB are free on the file system of "+dir, "--force")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused load created %s: %v", dir, err)
	}

	r = cli(t, append(args, "--force")...)
	expect(t, r, exitFailure, "need 33.2 MiB", "running anyway (--force)", "no space left on device", "stopped early", "records appended", "written (handed to the OS)", "durable", "appendlog verify "+dir)
	rep := parseLoadReport(t, r)
	t.Logf("appended %d, written %d, durable %d (seq %d)", rep.Records, rep.WrittenRecords, rep.DurableRecords, rep.DurableSeq)
	switch {
	case rep.Requested != 300000 || rep.Error == "":
		t.Fatalf("JSON requested_records %d, error %q\n%s", rep.Requested, rep.Error, r)
	case rep.Records >= 300000:
		t.Fatalf("appended all %d records on an %d-byte file system\n%s", rep.Records, fsSize, r)
	case !(0 < rep.DurableRecords && rep.DurableRecords <= rep.WrittenRecords && rep.WrittenRecords <= rep.Records):
		t.Fatalf("want 0 < durable %d <= written %d <= appended %d\n%s", rep.DurableRecords, rep.WrittenRecords, rep.Records, r)
	case rep.DurableSeq != rep.FirstSeq+uint64(rep.DurableRecords)-1:
		t.Fatalf("durable_seq %d, but %d durable records from seq %d", rep.DurableSeq, rep.DurableRecords, rep.FirstSeq)
	case rep.WrittenRecords*116 > fsSize:
		t.Fatalf("written %d records of 116 bytes on an %d-byte file system", rep.WrittenRecords, fsSize)
	}
	for _, want := range []string{
		strconv.FormatInt(rep.Records, 10) + " records appended",
		strconv.FormatInt(rep.WrittenRecords, 10) + " written (handed to the OS)",
		strconv.FormatInt(rep.DurableRecords, 10) + " durable",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("stderr lacks %q\n%s", want, r)
		}
	}
	n := countRecords(t, dir)
	t.Logf("log holds %d records", n)
	if n < rep.DurableRecords || n > rep.Records {
		t.Fatalf("log holds %d records; want between durable %d and appended %d", n, rep.DurableRecords, rep.Records)
	}
	expect(t, cli(t, "verify", "--payloads", dir), exitOK)
}

// TestLoadInterrupted stops a load with SIGINT: it reports the records it
// appended, all of them written and durable (Close syncs), and the log
// holds exactly those.
// With --sync always and one writer, the writer's waits sync on its own
// goroutine with a context that cannot be cancelled: the signal stops it
// once the wait in hand returns.
func TestLoadInterrupted(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT on Windows")
	}
	for _, sync := range [][]string{
		{"--sync", "interval", "--sync-every", "5ms"},
		{"--sync", "always", "--writers", "1"},
	} {
		t.Run(sync[1], func(t *testing.T) { loadInterrupted(t, sync) })
	}
}

func loadInterrupted(t *testing.T, sync []string) {
	dir := filepath.Join(t.TempDir(), "log")
	// Killed after two minutes, so that a load that ignores SIGINT stops
	// well before it has written its 1.6 GB.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"load", "--dir", dir, "--records", "20000000", "--size", "64", "--acks", "--json"}, sync...)
	cmd := exec.CommandContext(ctx, cliPath, args...)
	cmd.Env = cliEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first ack line says records are flowing; an interval sync has
	// run. Interrupt then.
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("load printed no ack line: %v\n%s", sc.Err(), stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.WriteString(sc.Text() + "\n")
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	r := result{args: cmd.Args[1:], stdout: out.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	}
	checkNoCrash(t, r)
	expect(t, r, exitFailure, "interrupted", "stopped early", "records appended")
	rep := parseLoadReport(t, r)
	if rep.Records == 0 || rep.WrittenRecords != rep.Records || rep.DurableRecords != rep.Records {
		t.Fatalf("after SIGINT and Close: appended %d, written %d, durable %d; want all equal and positive\n%s",
			rep.Records, rep.WrittenRecords, rep.DurableRecords, r)
	}
	if n := countRecords(t, dir); n != rep.Records {
		t.Fatalf("log holds %d records, load reported %d", n, rep.Records)
	}
	if sync[1] == "always" && (rep.InlineSyncs == 0 || rep.InlineSyncs > rep.Syncs) {
		t.Fatalf("one writer, --sync always: %d of %d syncs ran on the writer's goroutine, want most", rep.InlineSyncs, rep.Syncs)
	}
}

// TestLoadVerifyOnOpen damages a record in a sealed segment: load
// --verify-on-open refuses the log and appends nothing.
func TestLoadVerifyOnOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	r := runInProcess("load", "--dir", dir, "--records", "3000", "--size", "100", "--segment-size", "64KiB", "--sync", "never")
	checkNoCrash(t, r)
	expect(t, r, exitOK)
	segs := segments(t, dir)
	if len(segs) < 3 {
		t.Fatalf("want at least 3 segments, got %v", segs)
	}
	sealed := filepath.Join(dir, segs[1])
	fi, err := os.Stat(sealed)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, sealed, fi.Size()/2)
	before := segments(t, dir)

	r = runInProcess("load", "--dir", dir, "--records", "10", "--size", "100", "--segment-size", "64KiB", "--verify-on-open")
	checkNoCrash(t, r)
	expect(t, r, exitFailure, "open log", segs[1])
	if after := segments(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("refused load changed the segments: %v, then %v", before, after)
	}
}

func TestRecordCounts(t *testing.T) {
	const size, rec = 100, 100 + frame.HeaderSize
	for _, tt := range []struct {
		name                       string
		st                         wal.Stats
		first                      uint64
		appended, written, durable int64
	}{
		{"empty", wal.Stats{NextSeq: 1}, 1, 0, 0, 0},
		{"all durable", wal.Stats{NextSeq: 11, DurableSeq: 10, Written: 10 * rec}, 1, 10, 10, 10},
		{"buffered, part written", wal.Stats{NextSeq: 11, DurableSeq: 3, Written: 5*rec + rec/2}, 1, 10, 5, 3},
		{"second run", wal.Stats{NextSeq: 111, DurableSeq: 100, Written: 4 * rec}, 101, 10, 4, 0},
		{"durable beyond completed writes", wal.Stats{NextSeq: 11, DurableSeq: 8, Written: 6 * rec}, 1, 10, 8, 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, w, d := recordCounts(tt.st, tt.first, size)
			if a != tt.appended || w != tt.written || d != tt.durable {
				t.Fatalf("recordCounts(%+v, %d) = appended %d, written %d, durable %d; want %d, %d, %d",
					tt.st, tt.first, a, w, d, tt.appended, tt.written, tt.durable)
			}
		})
	}
}
