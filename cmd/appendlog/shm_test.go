package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

// lastJSON decodes the last line of stdout as a shm load result.
func lastJSON(t *testing.T, r result) shmResult {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var res shmResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, r)
	}
	return res
}

func TestShmLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int64
	}{
		{"128B", []string{"--processes", "3", "--records", "3000", "--size", "128"}, 9000},
		{"1B", []string{"--processes", "2", "--records", "3000", "--size", "1"}, 6000},
		{"rolling", []string{"--processes", "2", "--records", "2000", "--size", "200", "--max-file-size", "64KiB"}, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "shm")
			r := cli(t, append([]string{"shm", "load", "--file", file, "--json"}, tc.args...)...)
			expect(t, r, 0, "records/s", "ratio:", "verified:")
			res := lastJSON(t, r)
			if !res.Verified || res.Records != tc.want || res.Lost != 0 || res.RecordsPerSec <= 0 || res.BaselinePerSec <= 0 || res.Ratio <= 0 || !res.BaselineVerified {
				t.Fatalf("result %+v\n%s", res, r)
			}
		})
	}
}

// TestShmLoadKill: shm load --kill SIGKILLs writers while they append and
// the log still verifies. A kill is a test of a writer dying at work only
// if it lands after the victim's first record and before its last: shm
// load kills a victim when it says it passed a random record (so never
// during start-up), and this test counts every writer's records in the
// log itself, to check that each victim appended some and that at least
// one kill landed before its victim was done.
func TestShmLoadKill(t *testing.T) {
	const procs, records = 4, 20000
	file := filepath.Join(t.TempDir(), "shm")
	r := cli(t, "shm", "load", "--file", file, "--processes", fmt.Sprint(procs), "--records", fmt.Sprint(records), "--size", "64", "--kill", "2", "--baseline=false", "--json")
	expect(t, r, 0, "2 killed")
	res := lastJSON(t, r)
	if !res.Verified || res.Killed != 2 || res.Lost != 0 || res.Records < 2*records || res.Records >= procs*records {
		t.Fatalf("result %+v\n%s", res, r)
	}
	per := shmWriterCounts(t, file, procs)
	var killed []uint64 // the victims that died before their last record
	var total int64
	for w, n := range per {
		total += int64(n)
		switch {
		case n == 0:
			t.Errorf("writer %d has no record in the log: a kill landed before it appended", w)
		case n < records:
			killed = append(killed, n)
		case n > records:
			t.Errorf("writer %d has %d records, more than the %d it appends", w, n, records)
		}
	}
	t.Logf("records per writer %v: the killed writers appended %v", per, killed)
	if total != res.Records {
		t.Errorf("the log holds %d records, shm load reported %d", total, res.Records)
	}
	if len(killed) == 0 || len(killed) > 2 {
		t.Errorf("%d writers stopped before their last record, want 1 or 2 (the victims)", len(killed))
	}
}

// shmWriterCounts counts the records of each of n writers in the shm log
// at path, checking that each writer's records are 0, 1, 2, ... in order.
func shmWriterCounts(t *testing.T, path string, n int) []uint64 {
	t.Helper()
	per := make([]uint64, n)
	if _, err := shmlog.Verify(path, func(rec shmlog.Record) error {
		w, c, err := payload.Decode(rec.Payload)
		if err != nil {
			return fmt.Errorf("record at %#x: %w", rec.Pos, err)
		}
		if w < 0 || w >= n || c != per[w] {
			return fmt.Errorf("record at %#x: writer %d record %d, want writer < %d, record %d", rec.Pos, w, c, n, per[min(max(w, 0), n-1)])
		}
		per[w]++
		return nil
	}); err != nil {
		t.Fatalf("verify %s: %v", path, err)
	}
	return per
}

func TestShmLoadVerifyFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	r := cli(t, "shm", "load", "--file", file, "--processes", "2", "--records", "100", "--size", "64", "--baseline=false", "--damage", "--json")
	expect(t, r, 1, "checksum mismatch", file, "offset 4096")
	if res := lastJSON(t, r); res.Verified {
		t.Fatalf("damaged log verified: %+v", res)
	}
}

func TestShmLoadUsage(t *testing.T) {
	dir := t.TempDir()
	exists := filepath.Join(dir, "exists")
	cli(t, "shm", "load", "--file", exists, "--processes", "1", "--records", "1", "--baseline=false")
	for _, args := range [][]string{
		{"shm"},
		{"shm", "load"},
		{"shm", "load", "--file", filepath.Join(dir, "a"), "--processes", "0"},
		{"shm", "load", "--file", filepath.Join(dir, "b"), "--size", "0"},
		{"shm", "load", "--file", filepath.Join(dir, "c"), "--kill", "4", "--processes", "4"},
		{"shm", "load", "--file", filepath.Join(dir, "d"), "--records", "-1"},
		{"shm", "load", "--file", exists},
		{"shm", "load", "--file", filepath.Join(dir, "e"), "extra"},
	} {
		r := runInProcess(args...)
		if r.code != exitUsage {
			t.Errorf("%s", r)
		}
	}
}

// TestShmLoadMaxFileSizeZero: --max-file-size 0 is named as the bad flag,
// where the message blamed --size ("want 1 to half of --max-file-size").
func TestShmLoadMaxFileSizeZero(t *testing.T) {
	r := runInProcess("shm", "load", "--file", filepath.Join(t.TempDir(), "shm"), "--max-file-size", "0")
	expect(t, r, exitUsage, "--max-file-size 0: want a size")
}

func TestShmVerify(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	cli(t, "shm", "load", "--file", file, "--processes", "2", "--records", "500", "--size", "64", "--baseline=false")
	expect(t, cli(t, "shm", "verify", file), 0, "1000 records in 1 files")
	// A flipped byte in a record is damage, named by file and offset.
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff}, 4096+80+30)
	f.Close()
	expect(t, cli(t, "shm", "verify", file), 1, "checksum mismatch", file, "offset 4176")
	expect(t, cli(t, "shm", "verify", filepath.Join(t.TempDir(), "missing")), 1, "no such file")
	expect(t, runInProcess("shm", "verify"), exitUsage)
	expect(t, runInProcess("shm", "verify", ""), exitUsage, "empty FILE argument")
	expect(t, runInProcess("shm"), exitUsage, "missing subcommand (load or verify)")
}

// TestShmLoadKeepsExistingBaseline: shm load writes its baseline to
// F.baseline and removes it at the end. A file of that name that was there
// before is not the run's to append to or remove: load refuses to start,
// naming it, and leaves it (and F) as they were.
func TestShmLoadKeepsExistingBaseline(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	base := file + ".baseline"
	keep := []byte("a file the user made\n")
	writeFile(t, base, keep)
	r := cli(t, "shm", "load", "--file", file, "--processes", "1", "--records", "10", "--size", "64", "--json")
	expect(t, r, exitUsage, base, "--baseline=false")
	if got, err := os.ReadFile(base); err != nil || !bytes.Equal(got, keep) {
		t.Fatalf("%s after shm load: %q, %v; want %q untouched\n%s", base, got, err, keep, r)
	}
	if _, err := os.Lstat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("shm load made %s though it refused to run (%v)", file, err)
	}
	// Without the baseline the file is no concern of the run.
	r = cli(t, "shm", "load", "--file", file, "--processes", "1", "--records", "10", "--size", "64", "--baseline=false")
	expect(t, r, exitOK, "verified: 10 records")
	if got, err := os.ReadFile(base); err != nil || !bytes.Equal(got, keep) {
		t.Fatalf("%s after shm load --baseline=false: %q, %v; want %q untouched", base, got, err, keep)
	}
}

// TestShmLoadRefusesExisting: shm load makes a new log at --file. A file
// there is refused with a message that says it exists (not "cannot be
// checked: <nil>"), and so is a symbolic link to nowhere: it is something
// there, which making the log would replace with the log's file.
func TestShmLoadRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "exists")
	writeFile(t, file, []byte("x"))
	r := runInProcess("shm", "load", "--file", file, "--processes", "1", "--records", "1")
	expect(t, r, exitUsage, "--file "+file+" exists; shm load creates a new log")
	if strings.Contains(r.stderr, "<nil>") {
		t.Fatalf("the message shows a nil error:\n%s", r)
	}
	link, target := filepath.Join(dir, "link"), filepath.Join(dir, "target")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "shm", "load", "--file", link, "--processes", "1", "--records", "1", "--baseline=false")
	expect(t, r, exitUsage, "--file "+link+" exists")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("shm load replaced the link %s (%v)\n%s", link, err, r)
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("shm load made %s through the link %s (%v)\n%s", target, link, err, r)
	}
}

// TestShmLoadBaselineFailsJSON: a run whose baseline cannot start (here:
// F.baseline made by someone else while the shared-memory phase ran)
// fails naming it, leaves that file alone, and with --json still ends
// stdout with the result as a JSON object, its error set, after the lines
// the run printed.
func TestShmLoadBaselineFailsJSON(t *testing.T) {
	keep := []byte("made while shm load ran\n")
	for records := 500_000; ; records *= 4 {
		file := filepath.Join(t.TempDir(), "shm")
		base := file + ".baseline"
		cmd := exec.Command(cliPath, "shm", "load", "--file", file, "--processes", "2", "--records", strconv.Itoa(records), "--size", "64", "--json")
		cmd.Env = cliEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The log file appears before its writers start.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if _, err := os.Lstat(file); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("shm load made no %s within a minute\n%s", file, stderr.Bytes())
			}
		}
		bf, err := os.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, err = bf.Write(keep)
			err = errors.Join(err, bf.Close())
		}
		werr := cmd.Wait()
		r := result{args: cmd.Args[1:], stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
		checkNoCrash(t, r)
		if errors.Is(err, fs.ErrExist) && records < 10_000_000 {
			// The run reached its baseline first: again, longer.
			expect(t, r, exitOK)
			continue
		}
		if err != nil {
			t.Fatalf("make %s: %v (%v)\n%s", base, err, werr, r)
		}
		expect(t, r, exitFailure, "create the baseline file", base)
		res := lastJSON(t, r)
		if res.Error == "" || !strings.Contains(res.Error, base) || !res.Verified {
			t.Fatalf("the JSON result %+v: want the shared-memory phase verified and the error naming %s\n%s", res, base, r)
		}
		if got, err := os.ReadFile(base); err != nil || !bytes.Equal(got, keep) {
			t.Fatalf("%s after shm load: %q, %v; want %q", base, got, err, keep)
		}
		return
	}
}
