package shmlog_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/shmlog"
)

// TestOpenBySymlink: one log opened by its own name and, in another
// process, by a symlink to it in another directory. The later files and
// PATH.lock are found by the name of file 0: through the link the roll
// made LINK.00000001 beside the link and moved active to it, and a Log or
// Reader opened by the real name found no file 1 (its Append and Next
// failed), or the records appended through the link were not in the log.
// Open and OpenReader find the files by the name the link leads to.
func TestOpenBySymlink(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path, link := filepath.Join(dir, "a", "log"), filepath.Join(dir, "b", "link")
	o := &shmlog.Options{MaxFileSize: 8192}
	x, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	y, err := shmlog.Open(link, o)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	n := 0
	for y.Stats().ActiveFile == 0 {
		if _, err := y.Append([]byte("y")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for range 10 {
		if _, err := x.Append([]byte("x")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for _, p := range []string{path, link} {
		st, err := shmlog.Verify(p, nil)
		if err != nil || st.Records != uint64(n) {
			t.Fatalf("Verify(%s): %+v, %v; want %d records", p, st, err, n)
		}
	}
}
