package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestConformance runs the behaviour every FS shares against OS and MemFS.
func TestConformance(t *testing.T) {
	impls := []struct {
		name string
		new  func(t *testing.T) (vfs.FS, string)
	}{
		{"os", func(t *testing.T) (vfs.FS, string) { return vfs.OS(), t.TempDir() }},
		{"os-parked", func(t *testing.T) (vfs.FS, string) { return vfs.OSParked(), t.TempDir() }},
		{"mem", func(t *testing.T) (vfs.FS, string) {
			m := vfs.NewMem()
			if err := m.MkdirAll("/conf", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "/conf"
		}},
		{"faults-off", func(t *testing.T) (vfs.FS, string) {
			pass := func(op vfs.Op, name string, off int64, n int) (int, error) { return n, nil }
			return vfs.WithFaults(vfs.NewMem(), pass), "/"
		}},
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, fsys vfs.FS, dir string)
	}{
		{"ReadWrite", testReadWrite},
		{"OpenFlags", testOpenFlags},
		{"TruncatePreallocate", testTruncatePreallocate},
		{"Closed", testClosed},
		{"Dirs", testDirs},
		{"RenameRemove", testRenameRemove},
		{"Lock", testLock},
		{"OpenRegular", testOpenRegular},
		{"ReadDir", testReadDir},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					fsys, dir := impl.new(t)
					tc.fn(t, fsys, dir)
				})
			}
		})
	}
}

func create(t *testing.T, fsys vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// contents reads all of f.
func contents(t *testing.T, f vfs.File) []byte {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt all: n=%d err=%v", n, err)
	}
	return b
}

func wantContents(t *testing.T, f vfs.File, want []byte) {
	t.Helper()
	if got := contents(t, f); !bytes.Equal(got, want) {
		t.Fatalf("%s: contents %q, want %q", f.Name(), got, want)
	}
}

func testReadWrite(t *testing.T, fsys vfs.FS, dir string) {
	name := filepath.Join(dir, "f")
	f := create(t, fsys, name)
	if f.Name() != name {
		t.Fatalf("Name() = %q, want %q", f.Name(), name)
	}
	if n, err := f.WriteAt([]byte("hello"), 0); n != 5 || err != nil {
		t.Fatalf("WriteAt: %d %v", n, err)
	}
	// Writing past the end zero-fills the gap.
	if _, err := f.WriteAt([]byte("world"), 8); err != nil {
		t.Fatal(err)
	}
	wantContents(t, f, []byte("hello\x00\x00\x00world"))
	// Reading nothing succeeds anywhere, as (*os.File).ReadAt does.
	for _, off := range []int64{0, 13, 100} {
		if n, err := f.ReadAt(nil, off); n != 0 || err != nil {
			t.Fatalf("ReadAt(nil, %d): %d %v, want 0 <nil>", off, n, err)
		}
	}
	if n, err := f.WritevAt([][]byte{[]byte("AB"), nil, []byte("C")}, 13); n != 3 || err != nil {
		t.Fatalf("WritevAt: %d %v", n, err)
	}
	wantContents(t, f, []byte("hello\x00\x00\x00worldABC"))
	if size, err := f.Size(); size != 16 || err != nil {
		t.Fatalf("Size: %d %v", size, err)
	}

	// ReadAt follows io.ReaderAt: a short read at the end reports io.EOF.
	b := make([]byte, 4)
	if n, err := f.ReadAt(b, 14); n != 2 || err != io.EOF || string(b[:2]) != "BC" {
		t.Fatalf("ReadAt at end: %d %v %q", n, err, b[:n])
	}
	if n, err := f.ReadAt(b, 100); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past end: %d %v", n, err)
	}
	if _, err := f.ReadAt(b, -1); err == nil {
		t.Fatal("ReadAt(-1) succeeded")
	}
	if _, err := f.WriteAt(b, -1); err == nil {
		t.Fatal("WriteAt(-1) succeeded")
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}

	// A second handle sees the same content.
	g, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	wantContents(t, g, []byte("hello\x00\x00\x00worldABC"))
	if _, err := g.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("WriteAt on a read-only file succeeded")
	}
	if err := g.Truncate(0); err == nil {
		t.Fatal("Truncate on a read-only file succeeded")
	}

	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name() != "f" || fi.Size() != 16 || fi.IsDir() || !fi.Mode().IsRegular() {
		t.Fatalf("Stat: name %q size %d mode %v", fi.Name(), fi.Size(), fi.Mode())
	}
}

func testOpenFlags(t *testing.T, fsys vfs.FS, dir string) {
	name := filepath.Join(dir, "f")
	if _, err := fsys.OpenFile(name, os.O_RDWR, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	if _, err := fsys.OpenFile(filepath.Join(dir, "nodir", "f"), os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in missing dir: %v", err)
	}
	f := create(t, fsys, name)
	if _, err := f.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on existing: %v", err)
	}
	// O_CREATE without O_EXCL opens the existing file untouched.
	g, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	wantContents(t, g, []byte("data"))
	g.Close()
	// O_TRUNC empties it.
	h, err := fsys.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	wantContents(t, f, nil)
	// O_WRONLY: writes work, reads don't.
	w, err := fsys.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte("w"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("ReadAt on a write-only file succeeded")
	}
}

func testTruncatePreallocate(t *testing.T, fsys vfs.FS, dir string) {
	f := create(t, fsys, filepath.Join(dir, "f"))
	if _, err := f.WriteAt([]byte("0123456789"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	wantContents(t, f, []byte("0123"))
	// Growing after a shrink shows zeros, never the old bytes.
	if err := f.Truncate(8); err != nil {
		t.Fatal(err)
	}
	wantContents(t, f, []byte("0123\x00\x00\x00\x00"))
	if err := f.Truncate(-1); err == nil {
		t.Fatal("Truncate(-1) succeeded")
	}

	if err := f.Preallocate(0, 4096); err != nil {
		t.Fatal(err)
	}
	want := append([]byte("0123"), make([]byte, 4092)...)
	wantContents(t, f, want)
	// A range inside the file changes nothing.
	if err := f.Preallocate(10, 10); err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(0, 0); err != nil {
		t.Fatal(err)
	}
	wantContents(t, f, want)
	if err := f.Preallocate(5000, 100); err != nil {
		t.Fatal(err)
	}
	if size, _ := f.Size(); size != 5100 {
		t.Fatalf("size %d after Preallocate(5000, 100)", size)
	}
	if _, err := f.WriteAt([]byte("tail"), 5096); err != nil {
		t.Fatal(err)
	}
	if size, _ := f.Size(); size != 5100 {
		t.Fatalf("write inside preallocated range grew the file to %d", size)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func testClosed(t *testing.T, fsys vfs.FS, dir string) {
	f, err := fsys.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b := []byte("x")
	checks := map[string]error{
		"Close":       f.Close(),
		"Sync":        f.Sync(),
		"Truncate":    f.Truncate(0),
		"Preallocate": f.Preallocate(0, 10),
	}
	_, checks["ReadAt"] = f.ReadAt(b, 0)
	_, checks["WriteAt"] = f.WriteAt(b, 0)
	_, checks["WritevAt"] = f.WritevAt([][]byte{b}, 0)
	_, checks["Size"] = f.Size()
	for op, err := range checks {
		var pe *fs.PathError
		if !errors.Is(err, fs.ErrClosed) || !errors.As(err, &pe) {
			t.Errorf("%s on closed file: %v, want *fs.PathError wrapping fs.ErrClosed", op, err)
		}
	}
}

func testDirs(t *testing.T, fsys vfs.FS, dir string) {
	sub := filepath.Join(dir, "a", "b")
	if err := fsys.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll(sub, 0o755); err != nil {
		t.Fatalf("MkdirAll on existing: %v", err)
	}
	for _, n := range []string{"c", "a2", "b1"} {
		create(t, fsys, filepath.Join(sub, n))
	}
	names, err := fsys.List(sub)
	if err != nil || !slices.Equal(names, []string{"a2", "b1", "c"}) {
		t.Fatalf("List: %v %v", names, err)
	}
	if names, err := fsys.List(dir); err != nil || !slices.Contains(names, "a") {
		t.Fatalf("List parent: %v %v", names, err)
	}
	if _, err := fsys.List(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("List missing: %v", err)
	}
	if _, err := fsys.List(filepath.Join(sub, "c")); err == nil {
		t.Fatal("List of a file succeeded")
	}
	if err := fsys.MkdirAll(filepath.Join(sub, "c", "d"), 0o755); err == nil {
		t.Fatal("MkdirAll through a file succeeded")
	}
	fi, err := fsys.Stat(sub)
	if err != nil || !fi.IsDir() || fi.Name() != "b" {
		t.Fatalf("Stat dir: %v %v", fi, err)
	}
	if _, err := fsys.Stat(filepath.Join(sub, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat missing: %v", err)
	}
	if err := fsys.SyncDir(sub); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir missing: %v", err)
	}
	if err := fsys.Remove(filepath.Join(dir, "a")); err == nil {
		t.Fatal("Remove of a non-empty directory succeeded")
	}
}

func testRenameRemove(t *testing.T, fsys vfs.FS, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	fa := create(t, fsys, a)
	if _, err := fa.WriteAt([]byte("A"), 0); err != nil {
		t.Fatal(err)
	}
	fb := create(t, fsys, b)
	if _, err := fb.WriteAt([]byte("BB"), 0); err != nil {
		t.Fatal(err)
	}
	// Rename replaces the target.
	if err := fsys.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(a); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old name after Rename: %v", err)
	}
	if fi, err := fsys.Stat(b); err != nil || fi.Size() != 1 {
		t.Fatalf("new name after Rename: %v %v", fi, err)
	}
	// The open handle follows the file, not the name.
	if _, err := fa.WriteAt([]byte("Z"), 1); err != nil {
		t.Fatal(err)
	}
	g, err := fsys.OpenFile(b, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantContents(t, g, []byte("AZ"))
	g.Close()
	if err := fsys.Rename(a, b); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Rename missing: %v", err)
	}
	if err := fsys.Remove(b); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(b); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove missing: %v", err)
	}
	if names, err := fsys.List(dir); err != nil || len(names) != 0 {
		t.Fatalf("List after Remove: %v %v", names, err)
	}
	// An empty directory can be removed.
	sub := filepath.Join(dir, "sub")
	if err := fsys.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// Nothing is renamed onto an existing directory, even an empty one
	// (os.Rename refuses it with EEXIST): both names stay.
	other := filepath.Join(dir, "other")
	if err := fsys.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	fc := create(t, fsys, filepath.Join(dir, "c"))
	for _, from := range []string{other, fc.Name()} {
		if err := fsys.Rename(from, sub); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("Rename %s onto an empty directory: %v, want fs.ErrExist", from, err)
		}
		if _, err := fsys.Stat(from); err != nil {
			t.Fatalf("after refused Rename: %v", err)
		}
	}
	if err := fsys.Remove(other); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(sub); err != nil {
		t.Fatal(err)
	}
}

func testLock(t *testing.T, fsys vfs.FS, dir string) {
	name := filepath.Join(dir, "LOCK")
	l, err := fsys.Lock(name, "pid 1234")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fsys.Lock(name, "pid 5678")
	if !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	if msg := err.Error(); !strings.Contains(msg, name) || !strings.Contains(msg, "pid 1234") {
		t.Fatalf("lock error %q does not name the file and the holder", msg)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	l2, err := fsys.Lock(name, "pid 5678")
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	defer l2.Close()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantContents(t, f, []byte("pid 5678"))
}

func testOpenRegular(t *testing.T, fsys vfs.FS, dir string) {
	name := filepath.Join(dir, "f")
	f, err := fsys.OpenRegular(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.OpenRegular(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL of an existing file: %v, want fs.ErrExist", err)
	}
	g, err := fsys.OpenRegular(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantContents(t, g, []byte("abc"))
	g.Close()
	h, err := fsys.OpenRegular(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	wantContents(t, h, nil)
	h.Close()
	if _, err := fsys.OpenRegular(filepath.Join(dir, "missing"), os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}

	sub := filepath.Join(dir, "sub")
	if err := fsys.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_CREATE, os.O_RDWR | os.O_CREATE | os.O_EXCL} {
		_, err := fsys.OpenRegular(sub, flag, 0o644)
		wantNotRegular(t, err, sub, "a directory")
	}
	_, err = fsys.Lock(sub, "pid 1")
	wantNotRegular(t, err, sub, "a directory")
}

// wantNotRegular checks that err is a *vfs.NotRegularError for path whose
// message says it is what.
func wantNotRegular(t *testing.T, err error, path, what string) {
	t.Helper()
	var nr *vfs.NotRegularError
	if !errors.As(err, &nr) || !errors.Is(err, vfs.ErrNotRegular) {
		t.Fatalf("%s: err %v, want a *vfs.NotRegularError", path, err)
	}
	if want := path + " is " + what + ", not a regular file"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

func testReadDir(t *testing.T, fsys vfs.FS, dir string) {
	base := filepath.Join(dir, "rd")
	if err := fsys.MkdirAll(filepath.Join(base, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	create(t, fsys, filepath.Join(base, "c"))
	create(t, fsys, filepath.Join(base, "a"))
	entries, err := fsys.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s:%v", e.Name(), e.Type()))
	}
	if want := []string{"a:" + fs.FileMode(0).String(), "b:" + fs.ModeDir.String(), "c:" + fs.FileMode(0).String()}; !slices.Equal(got, want) {
		t.Fatalf("ReadDir = %v, want %v", got, want)
	}
	names, err := fsys.List(base)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("List = %v, disagrees with ReadDir", names)
	}
	if _, err := fsys.ReadDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadDir of a missing dir: %v, want fs.ErrNotExist", err)
	}
}
