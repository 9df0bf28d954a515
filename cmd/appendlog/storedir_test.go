package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/stream"
)

// TestStoreDirNotALog: verify, dump, tail and repair given the directory
// of a stream store, which holds a LOCK file but no segments of its own,
// refuse it naming its streams' log directories. They called it a clean
// empty log with exit status 0 (repair writing to the store's LOCK file),
// while its streams held records.
func TestStoreDirNotALog(t *testing.T) {
	d := filepath.Join(t.TempDir(), "store")
	st, err := stream.Open(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders", "users"} {
		s, err := st.Create(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := s.Publish([]byte(fmt.Sprintf("%s %d", name, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, d)
	logDir := filepath.Join(d, "streams", "orders", "log")
	for _, args := range [][]string{
		{"verify", d}, {"verify", "--payloads", d}, {"dump", d}, {"dump", "--count", d},
		{"tail", d}, {"tail", "-f", d}, {"repair", d}, {"repair", "--force", d},
	} {
		r := runInProcess(args...)
		checkNoCrash(t, r)
		expect(t, r, exitFailure, d+": a stream store (2 streams), not a log", logDir)
		if strings.Contains(r.stderr, "stream:") {
			t.Fatalf("the stream package's prefix reaches the user:\n%s", r)
		}
	}
	if after := snapshot(t, d); after != before {
		t.Fatalf("the store changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Each stream's log is a log.
	expect(t, runInProcess("verify", logDir), exitOK, "clean", "10 records")
	expect(t, runInProcess("dump", "--count", logDir), exitOK, "10\n")
	// A damaged stream: stat fails naming it, and --json still prints one
	// JSON object.
	segs := segments(t, logDir)
	flipByte(t, filepath.Join(logDir, segs[0]), frame.FileHeaderSize+frame.HeaderSize+1)
	for _, args := range [][]string{{"stat", d}, {"stat", "--json", d}} {
		r := runInProcess(args...)
		checkNoCrash(t, r)
		expect(t, r, exitFailure, "stream orders", segs[0])
		checkOutputKind(t, r)
	}
}

// snapshot describes every file under dir: name, size, mode, modification
// time and contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %v %v", path, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
