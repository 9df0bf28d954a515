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
	// What a creator killed at each step leaves: an empty file, a
	// preallocated one, and one with its header written.
	header := func(idx uint64) []byte {
		b := make([]byte, 1<<20)
		shmlog.PutHeader(b, 1<<20-shmlog.HeaderSize, idx)
		return b
	}
	stale := map[string][]byte{
		path + ".00000001.4242-0.tmp": header(1),
		path + ".17-3.tmp":            nil,
		path + ".tmp":                 make([]byte, 1<<20),
		path + ".00000002.tmp":        header(2),
	}
	kept := []string{path + ".backup.tmp", path + ".00000001.tmp.x", path + ".1-.tmp", path + "x.1-1.tmp", path + ".0000001.tmp"}
	for n, b := range stale {
		if err := os.WriteFile(n, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range kept {
		if err := os.WriteFile(n, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for n := range stale {
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

// TestTempNameNotATemp: a file with a temporary file's name that does not
// hold what a killed creator leaves is not removed by an Open alone: the
// log P.tmp beside the log P (its file 0), or a file being copied to P.tmp.
func TestTempNameNotATemp(t *testing.T) {
	o := &shmlog.Options{MaxFileSize: 1 << 20}
	t.Run("log", func(t *testing.T) {
		path := logPath(t)
		other, err := shmlog.Open(path+".tmp", o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Append([]byte("kept")); err != nil {
			t.Fatal(err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		l, err := shmlog.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		st, err := shmlog.Verify(path+".tmp", nil)
		if err != nil || st.Records != 1 {
			t.Fatalf("the log %s.tmp after an Open of %s: %+v, %v; want its 1 record", path, path, st, err)
		}
	})
	t.Run("copy", func(t *testing.T) {
		path := logPath(t)
		if err := os.WriteFile(path+".tmp", []byte("a copy being made"), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := shmlog.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if b, err := os.ReadFile(path + ".tmp"); err != nil || string(b) != "a copy being made" {
			t.Fatalf("%s.tmp after an Open of %s: %q, %v; want it kept", path, path, b, err)
		}
	})
}

// TestTempsKeptWhileOpen: temporary files are removed only by an Open
// that finds the log open by no other Log or Reader (the exclusive flock
// of file 0): one that a live process is making is never removed.
func TestTempsKeptWhileOpen(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 1 << 20}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".00000001.4242-0.tmp"
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := shmlog.OpenReader(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("%s removed by an Open while a Reader had the log open: %v", tmp, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Stat(tmp); err == nil {
		t.Fatalf("%s left by an Open alone", tmp)
	}
}

// TestTempLinkedLeft: a creator killed between linking its file into
// place and removing the temporary name leaves a second name of a file of
// the log, which may hold records since. An Open alone removes that name
// (the space stays held by it after the log's files are removed) and
// keeps the file.
func TestTempLinkedLeft(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 8192}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l.Stats().ActiveFile == 0 {
		if _, err := l.Append([]byte("r")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".00000001.4242-0.tmp"
	if err := os.Link(path+".00000001", tmp); err != nil {
		t.Fatal(err)
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Stat(tmp); err == nil {
		t.Errorf("%s, a second name of file 1, left by an Open alone", tmp)
	}
	if st, err := shmlog.Verify(path, nil); err != nil || st.Records != uint64(n) {
		t.Fatalf("Verify: %+v, %v; want %d records", st, err, n)
	}
}
