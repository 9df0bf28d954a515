package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// _fuzzCommands are the commands FuzzCLI runs: those that read or repair
// a log in a moment. bench, load, broker and ship run for seconds or need
// Kafka; they have tests of their own flags.
var _fuzzCommands = map[string]bool{"dump": true, "stat": true, "verify": true, "tail": true, "repair": true, "shm": true}

// _followFlag matches an argument that asks tail to follow, which
// would wait until interrupted.
var _followFlag = regexp.MustCompile(`^-[^-]*f|^--fo?l?l?o?w?(=|$)`)

// FuzzCLI runs the CLI in this process with arguments from the fuzz input
// (NUL-separated; LOG and SHM stand for a small log directory and a
// shared-memory log file made for the run) and checks that it exits 0, 1
// or 2 without a panic or a stack trace, that a usage error (2) says how
// to get help, and that no command but repair changes the log.
func FuzzCLI(f *testing.F) {
	for _, s := range []string{
		"dump\x00LOG", "dump\x00--from\x0099999\x00LOG", "dump\x00--count\x00--hex\x00LOG", "dump\x00SHM",
		"stat\x00LOG", "stat\x00--json\x00LOG", "verify\x00LOG", "verify\x00--payloads\x00LOG",
		"tail\x00-n\x003\x00LOG", "tail\x00--lines=0\x00LOG", "tail\x00-n\x00-1\x00LOG", "tail\x00--from\x000\x00SHM",
		"repair\x00LOG", "repair\x00--force\x00LOG", "shm\x00verify\x00SHM", "shm\x00verify\x00LOG", "dump\x00LOG\x00LOG", "stat\x00", "verify\x00LOG/00000000000000000001.seg",
		"dump\x00--from\x00-1\x00LOG", "tail\x00-n\x0018446744073709551616\x00LOG",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := strings.Split(in, "\x00")
		if !_fuzzCommands[args[0]] || args[0] == "shm" && (len(args) < 2 || args[1] != "verify") {
			return // shm load runs processes for seconds
		}
		for _, a := range args[1:] {
			if _followFlag.MatchString(a) {
				return
			}
		}
		dir := t.TempDir()
		log, shm := filepath.Join(dir, "log"), filepath.Join(dir, "shm")
		smallLog(t, log, 300)
		shmAppend(t, shm, 0, 20)
		before := snapshotFiles(t, log)
		for i, a := range args {
			a = strings.ReplaceAll(a, "LOG", log)
			args[i] = strings.ReplaceAll(a, "SHM", shm)
		}
		r := runInProcess(args...)
		checkNoCrash(t, r)
		switch r.code {
		case exitOK, exitFailure:
		case exitUsage:
			if !strings.Contains(r.stderr, "--help") && !strings.Contains(r.stderr, "Usage") {
				t.Fatalf("usage error without a pointer to help:\n%s", r)
			}
		default:
			t.Fatalf("exit status %d:\n%s", r.code, r)
		}
		if args[0] != "repair" && args[0] != "shm" {
			if after := snapshotFiles(t, log); !equalFiles(before, after) {
				t.Fatalf("%s changed the log:\n%s", args[0], r)
			}
		}
	})
}

// snapshotFiles returns the contents of the files in dir by name.
func snapshotFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string][]byte)
	for _, e := range ents {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			m[e.Name()] = b
		}
	}
	return m
}

func equalFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
