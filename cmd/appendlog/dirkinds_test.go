package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/wal"
)

// smallLog writes n records into a new log at dir.
func smallLog(t *testing.T, dir string, n int) {
	t.Helper()
	l, err := wal.Open(dir, &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append([]byte(fmt.Sprintf("record %d", i))); err != nil {
			l.Close()
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDirectoryKinds runs verify, dump and repair on each kind of
// directory: the exit status and message must name what it is. (stat has
// the same rules once it exists.)
func TestDirectoryKinds(t *testing.T) {
	const notLog = "{D}: not an appendlog log: no segments and no appendlog LOCK file, but 3 other files (fstab, hosts, passwd)"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, d string)
		steps []step
		// noLock: no LOCK file may be left behind.
		noLock bool
	}{
		{"empty", func(t *testing.T, d string) { mkdir(t, d) }, []step{
			stp(0, "verify {D}", "no segments", "0 records"),
			stp(0, "dump {D}"),
			stp(0, "dump --count {D}", "0\n"),
			stp(0, "repair {D}", "nothing to repair"),
			stp(0, "repair --force {D}", "nothing to repair"),
		}, false},
		{"foreign", func(t *testing.T, d string) {
			mkdir(t, d)
			for _, n := range []string{"passwd", "hosts", "fstab"} {
				writeFile(t, filepath.Join(d, n), []byte("root:x:0:0\n"))
			}
		}, []step{
			stp(1, "verify {D}", notLog),
			stp(1, "verify --payloads {D}", notLog),
			stp(1, "dump {D}", notLog),
			stp(1, "dump --count {D}", notLog),
			stp(1, "repair {D}", notLog),
			stp(1, "repair --force {D}", notLog),
			stp(1, "stat {D}", notLog),
			stp(1, "stat --json {D}", notLog),
			stp(1, "tail {D}", notLog),
		}, true},
		{"log", func(t *testing.T, d string) { smallLog(t, d, 50) }, []step{
			stp(0, "verify {D}", "clean", "50 records"),
			stp(0, "dump --count {D}", "50\n"),
			stp(0, "dump {D}", "50\trecord 49\n"),
			stp(0, "repair {D}", "nothing to repair"),
			stp(0, "repair --force {D}", "nothing to repair"),
			stp(1, "shm verify {D}", "{D}: a directory, not a shared-memory log file", "appendlog verify {D}"),
		}, false},
		{"log-and-foreign", func(t *testing.T, d string) {
			smallLog(t, d, 50)
			writeFile(t, filepath.Join(d, "notes.txt"), []byte("hi"))
		}, []step{
			stp(0, "verify {D}", "warning: foreign file notes.txt ignored", "clean", "50 records"),
			stp(0, "dump --count {D}", "50\n"),
			stp(0, "repair {D}", "nothing to repair"),
		}, false},
		{"symlinked-segment", func(t *testing.T, d string) {
			smallLog(t, d, 50)
			seg := filepath.Join(d, "00000000000000000001.seg")
			outside := filepath.Join(filepath.Dir(d), "outside.seg")
			if err := os.Rename(seg, outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, seg); err != nil {
				t.Fatal(err)
			}
		}, []step{
			stp(1, "verify {D}", "{D}/00000000000000000001.seg is a symbolic link"),
			stp(1, "dump {D}", "{D}/00000000000000000001.seg is a symbolic link"),
			stp(1, "repair {D}", "{D}/00000000000000000001.seg is a symbolic link"),
			stp(1, "repair --force {D}", "{D}/00000000000000000001.seg is a symbolic link"),
			stp(1, "stat --json {D}", "{D}/00000000000000000001.seg is a symbolic link"),
		}, false},
		{"missing", func(t *testing.T, d string) {}, []step{
			stp(1, "verify {D}", "{D}: no such directory"),
			stp(1, "dump {D}", "{D}: no such directory"),
			stp(1, "repair {D}", "{D}: no such directory"),
			stp(1, "repair --force {D}", "{D}: no such directory"),
			stp(1, "stat --json {D}", "{D}: no such directory"),
			stp(1, "tail -f {D}", "{D}: no such directory"),
			stp(1, "shm verify {D}", "{D}: no such file"),
		}, true},
		{"shm-file", func(t *testing.T, d string) { shmAppend(t, d, 0, 5) }, []step{
			stp(0, "verify {D}", "5 records"),
			stp(0, "shm verify {D}", "5 records"),
			stp(1, "stat {D}", "{D}: a shared-memory log file, not a log directory", "appendlog verify {D}"),
			stp(1, "stat --json {D}", "{D}: a shared-memory log file, not a log directory"),
			stp(1, "repair {D}", "{D}: a shared-memory log file, not a log directory"),
		}, false},
		{"symlink-loop", func(t *testing.T, d string) {
			if err := os.Symlink(d, d); err != nil {
				t.Fatal(err)
			}
		}, []step{
			stp(1, "verify {D}", "{D}: too many levels of symbolic links"),
			stp(1, "dump --count {D}", "{D}: too many levels of symbolic links"),
			stp(1, "repair --force {D}", "{D}: too many levels of symbolic links"),
			stp(1, "stat {D}", "{D}: too many levels of symbolic links"),
			stp(1, "stat --json {D}", "{D}: too many levels of symbolic links"),
			stp(1, "tail -f {D}", "{D}: too many levels of symbolic links"),
			stp(1, "shm verify {D}", "{D}", "too many levels of symbolic links"),
		}, false},
		{"segment-named-directory", func(t *testing.T, d string) {
			smallLog(t, d, 50)
			mkdir(t, filepath.Join(d, "00000000000000009999.seg"))
		}, []step{
			stp(1, "verify {D}", "{D}: 00000000000000009999.seg is named like a segment but is a directory"),
			stp(1, "stat {D}", "{D}: 00000000000000009999.seg is named like a segment but is a directory"),
			stp(1, "repair --force {D}", "{D}: 00000000000000009999.seg is named like a segment but is a directory"),
			stp(1, "load --dir {D} --records 1", "open log: {D}: 00000000000000009999.seg is named like a segment"),
		}, false},
		{"damaged", func(t *testing.T, d string) {
			smallLog(t, d, 50)
			flipByte(t, filepath.Join(d, "00000000000000000001.seg"), frame.FileHeaderSize+frame.HeaderSize+1)
		}, []step{
			stp(0, "repair --force {D}", "The first damage found: corruption in 00000000000000000001.seg"),
		}, false},
		// verify said of every gap that its cut bytes were in side files,
		// also of a missing segment's, of which nothing was kept.
		{"missing-segment", func(t *testing.T, d string) {
			smallLog(t, d, 8000)
			segs := segments(t, d)
			if len(segs) < 3 {
				t.Fatalf("%d segments, want at least 3", len(segs))
			}
			rm(t, filepath.Join(d, segs[1]))
			os.Remove(filepath.Join(d, segs[1]+".idx"))
		}, []step{
			stp(0, "repair --force {D}", "Created 1 segment holding only the gap of a missing segment"),
			stp(0, "verify {D}", "(no side file)."),
		}, false},
		{"damaged-then-repaired", func(t *testing.T, d string) {
			smallLog(t, d, 50)
			flipByte(t, filepath.Join(d, "00000000000000000001.seg"), frame.FileHeaderSize+frame.HeaderSize+1)
		}, []step{
			stp(0, "repair --force {D}", "kept in 00000000000000000001.seg.cut-"),
			stp(0, "verify {D}", "(side file: 00000000000000000001.seg.cut-"),
		}, false},
		{"regular-file", func(t *testing.T, d string) { writeFile(t, d, []byte("not a log\n")) }, []step{
			stp(1, "verify {D}", "{D}: not a directory"),
			stp(1, "dump {D}", "{D}: not a directory"),
			stp(1, "repair {D}", "{D}: not a directory"),
			stp(1, "repair --force {D}", "{D}: not a directory"),
			stp(1, "stat --json {D}", "{D}: not a directory"),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "log")
			tc.setup(t, d)
			for _, st := range tc.steps {
				args := make([]string, len(st.args))
				for i, a := range st.args {
					args[i] = strings.ReplaceAll(a, "{D}", d)
				}
				want := make([]string, len(st.want))
				for i, w := range st.want {
					want[i] = strings.ReplaceAll(w, "{D}", d)
				}
				r := runInProcess(args...)
				checkNoCrash(t, r)
				expect(t, r, st.code, want...)
				checkOutputKind(t, r)
				if strings.Contains(r.stderr, "wal:") || strings.Contains(r.stdout, "wal:") {
					t.Fatalf("the wal package's prefix reaches the user:\n%s", r)
				}
				if strings.Contains(r.stderr, d+": "+d+":") {
					t.Fatalf("the directory is named twice:\n%s", r)
				}
			}
			if _, err := os.Stat(filepath.Join(d, "LOCK")); tc.noLock && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a LOCK file was left in %s (%v)", d, err)
			}
		})
	}
}

// TestRepairRefusesHeldLog: this process holds the log; repair, run as
// another process, must refuse it and name the holder, changing nothing.
func TestRepairRefusesHeldLog(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 20)
	l, err := wal.Open(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	holder := fmt.Sprintf(`"pid %d"`, os.Getpid())
	for _, args := range [][]string{{"repair", d}, {"repair", "--force", d}} {
		r := cli(t, args...)
		expect(t, r, exitFailure, d+": log is in use", filepath.Join(d, "LOCK"), holder)
		if strings.Contains(r.stdout, "nothing to repair") || strings.Contains(r.stderr, "vfs") {
			t.Fatalf("repair of a held log:\n%s", r)
		}
	}
}
