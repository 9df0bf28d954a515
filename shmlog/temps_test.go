package shmlog_test

import (
	"os"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestStaleTemps: a process killed while it made a file (between creating
// its temporary file and linking it into place) leaves the temporary
// file, as large as a whole file (and binaries before each creator named
// its own left PATH[.%08d].tmp, which nothing reuses now). An Open that finds the log otherwise
// closed removes such files, and only those.
func TestStaleTemps(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 1 << 20}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	stale := []string{path + ".00000001.4242-0.tmp", path + ".17-3.tmp", path + ".tmp", path + ".00000002.tmp"}
	kept := []string{path + ".backup.tmp", path + ".00000001.tmp.x", path + ".1-.tmp", path + "x.1-1.tmp", path + ".0000001.tmp"}
	for _, n := range append(stale, kept...) {
		if err := os.WriteFile(n, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, n := range stale {
		if _, err := os.Stat(n); err == nil {
			t.Errorf("%s left", n)
		}
	}
	for _, n := range kept {
		if _, err := os.Stat(n); err != nil {
			t.Errorf("%s: %v, want it kept", n, err)
		}
	}
}
