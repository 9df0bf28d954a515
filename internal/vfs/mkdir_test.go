package vfs

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestMkdirAllDurable checks, on the in-memory and the real file system,
// that MkdirAllDurable creates the missing directories and syncs each in
// its parent (so all of them survive a power cut), makes no call but a
// Stat for a directory that is there, and refuses a file in the way with ENOTDIR
// naming the path.
func TestMkdirAllDurable(t *testing.T) {
	mem := NewMem()
	for name, tc := range map[string]struct {
		fsys FS
		root string
	}{
		"mem": {mem, "/data"},
		"os":  {OS(), t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			var ops []string
			fsys := WithFaults(tc.fsys, func(op Op, name string, _ int64, n int) (int, error) {
				ops = append(ops, op.String()+" "+name)
				return n, nil
			})
			dir := filepath.Join(tc.root, "a", "b", "c")
			if err := MkdirAllDurable(fsys, dir); err != nil {
				t.Fatal(err)
			}
			if fi, err := tc.fsys.Stat(dir); err != nil || !fi.IsDir() {
				t.Fatalf("%s after MkdirAllDurable: %v, %v", dir, fi, err)
			}
			for _, d := range []string{tc.root, filepath.Join(tc.root, "a"), filepath.Join(tc.root, "a", "b")} {
				if !slices.Contains(ops, "syncdir "+d) {
					t.Errorf("%s, the parent of a created directory, was not synced: %q", d, ops)
				}
			}

			ops = nil
			if err := MkdirAllDurable(fsys, dir); err != nil || len(ops) != 1 || ops[0] != "stat "+dir {
				t.Fatalf("again on a directory that is there: %v, calls %q, want its Stat alone", err, ops)
			}

			file := filepath.Join(tc.root, "file")
			f, err := tc.fsys.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			for _, p := range []string{file, filepath.Join(file, "sub")} {
				err := MkdirAllDurable(fsys, p)
				if !errors.Is(err, syscall.ENOTDIR) {
					t.Errorf("MkdirAllDurable(%s) with a file in the way: %v, want ENOTDIR", p, err)
				}
			}
		})
	}
	// Every directory created survives a power cut.
	crashed := mem.Crash(rand.New(rand.NewPCG(1, 2)))
	if _, err := crashed.Stat("/data/a/b/c"); err != nil {
		t.Fatalf("after a power cut: %v", err)
	}
}
