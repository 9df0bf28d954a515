package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestShmLoadKill(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	r := cli(t, "shm", "load", "--file", file, "--processes", "4", "--records", "20000", "--size", "64", "--kill", "2", "--baseline=false", "--json")
	expect(t, r, 0, "2 killed")
	res := lastJSON(t, r)
	if !res.Verified || res.Killed != 2 || res.Lost != 0 || res.Records < 2*20000 || res.Records >= 4*20000 {
		t.Fatalf("result %+v\n%s", res, r)
	}
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
