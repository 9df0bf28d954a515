package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// dirKind prepares one kind of directory at d for the misuse tests.
type dirKind struct {
	name  string
	setup func(t *testing.T, d string)
	// notLog: every entry point refuses it with ErrNotLog; notDir: with
	// "not a directory"; missing: readers report it missing (Open creates
	// it).
	notLog, notDir, missing bool
}

func writeTestFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

var _dirKinds = []dirKind{
	{name: "empty", setup: func(t *testing.T, d string) {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "foreign", notLog: true, setup: func(t *testing.T, d string) {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"passwd", "group", "hosts", "fstab", "motd"} {
			writeTestFile(t, filepath.Join(d, n), []byte("root:x:0:0\n"))
		}
	}},
	{name: "log", setup: func(t *testing.T, d string) { buildLog(t, d, 300) }},
	{name: "log-and-foreign", setup: func(t *testing.T, d string) {
		buildLog(t, d, 300)
		writeTestFile(t, filepath.Join(d, "notes.txt"), []byte("hi"))
	}},
	{name: "missing", missing: true, setup: func(t *testing.T, d string) {}},
	{name: "regular-file", notDir: true, setup: func(t *testing.T, d string) {
		writeTestFile(t, d, []byte("not a log\n"))
	}},
}

// checkDirKind checks err from entry point op on directory kind k.
func checkDirKind(t *testing.T, k dirKind, op string, d string, err error, opens bool) {
	t.Helper()
	switch {
	case k.notLog:
		var nl *NotLogError
		if !errors.Is(err, ErrNotLog) || !errors.As(err, &nl) {
			t.Fatalf("%s of a foreign directory: %v, want ErrNotLog", op, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "not an appendlog log") || !strings.Contains(msg, "5 other files") ||
			!strings.Contains(msg, "fstab") || !strings.Contains(msg, d) {
			t.Fatalf("%s: message does not name the directory, the count and some files: %v", op, err)
		}
		if _, serr := os.Stat(filepath.Join(d, lockName)); !errors.Is(serr, fs.ErrNotExist) {
			t.Fatalf("%s left a LOCK file in a directory that is not a log (%v)", op, serr)
		}
	case k.notDir:
		if err == nil || !strings.Contains(err.Error(), "not a directory") || strings.Contains(err.Error(), "in use") {
			t.Fatalf("%s of a regular file: %v, want \"not a directory\"", op, err)
		}
	case k.missing && !opens:
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s of a missing directory: %v, want fs.ErrNotExist", op, err)
		}
	default:
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
}

func TestDirectoryKinds(t *testing.T) {
	for _, k := range _dirKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Run("Open", func(t *testing.T) {
				d := filepath.Join(t.TempDir(), "log")
				k.setup(t, d)
				l, err := Open(d, nil)
				checkDirKind(t, k, "Open", d, err, true)
				if err == nil {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
			t.Run("OpenReader", func(t *testing.T) {
				d := filepath.Join(t.TempDir(), "log")
				k.setup(t, d)
				r, err := OpenReader(d, 0, nil)
				checkDirKind(t, k, "OpenReader", d, err, false)
				if err == nil {
					for r.Next() {
					}
					if err := r.Err(); err != nil {
						t.Fatal(err)
					}
					r.Close()
				}
			})
			t.Run("Verify", func(t *testing.T) {
				d := filepath.Join(t.TempDir(), "log")
				k.setup(t, d)
				rep, err := Verify(d, nil)
				checkDirKind(t, k, "Verify", d, err, false)
				if k.name == "log-and-foreign" && (len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "notes.txt")) {
					t.Fatalf("foreign file beside a log: warnings %q", rep.Warnings)
				}
			})
			t.Run("Repair", func(t *testing.T) {
				d := filepath.Join(t.TempDir(), "log")
				k.setup(t, d)
				_, err := Repair(d, true, nil)
				checkDirKind(t, k, "Repair", d, err, false)
			})
		})
	}
}

func TestRepairTakesTheLock(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprint("force=", force), func(t *testing.T) {
			dir := t.TempDir()
			buildLog(t, dir, 100)
			l := mustOpen(t, dir, nil)
			if _, err := l.Append([]byte("live")); err != nil {
				t.Fatal(err)
			}
			rep, err := Repair(dir, force, nil)
			if !errors.Is(err, ErrInUse) || rep != nil {
				t.Fatalf("Repair of a held log: %+v, %v; want ErrInUse", rep, err)
			}
			if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(msg, "LOCK") {
				t.Fatalf("Repair of a held log does not name the holder: %v", err)
			}
			if strings.Contains(err.Error(), "vfs") {
				t.Fatalf("an internal package's words reach the user: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := Repair(dir, force, nil); err != nil {
				t.Fatalf("Repair after Close: %v", err)
			}
		})
	}
}

func TestRepairHoldsTheLockWhileItLooks(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 100)
	var openErr error
	probed := false
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		// The first segment read happens under Repair's lock: a Log
		// opened now must be refused.
		if op == vfs.OpRead && strings.HasSuffix(name, ".seg") && !probed {
			probed = true
			var l *Log
			if l, openErr = Open(dir, nil); openErr == nil {
				l.Close()
			}
		}
		return n, nil
	}
	if _, err := Repair(dir, false, &Options{fsys: vfs.WithFaults(vfs.OS(), inj)}); err != nil {
		t.Fatal(err)
	}
	if !probed || !errors.Is(openErr, ErrInUse) || !strings.Contains(openErr.Error(), "repair") {
		t.Fatalf("Open during Repair: %v (probed %v), want ErrInUse naming the repair", openErr, probed)
	}
}

func TestOpenErrorsNameTheCause(t *testing.T) {
	t.Run("in-use", func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, dir, nil)
		defer l.Close()
		_, err := Open(dir, nil)
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "log is in use") ||
			!strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
			t.Fatalf("second Open: %v", err)
		}
		if strings.Contains(err.Error(), "vfs") || strings.Contains(err.Error(), "sys:") {
			t.Fatalf("an internal package's words reach the user: %v", err)
		}
	})
	t.Run("not-a-directory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		writeTestFile(t, f, []byte("x"))
		for _, d := range []string{f, filepath.Join(f, "log")} {
			_, err := Open(d, nil)
			if err == nil || !strings.Contains(err.Error(), "not a directory") || errors.Is(err, ErrInUse) || strings.Contains(err.Error(), "in use") {
				t.Fatalf("Open(%s): %v, want \"not a directory\"", d, err)
			}
		}
	})
	// Running as root, chmod cannot take a permission away, and a
	// read-only mount needs privileges tests should not use: inject the
	// errors the system returns instead.
	for _, tc := range []struct {
		name   string
		op     vfs.Op
		errno  error
		want   string
		target error
	}{
		{"read-only", vfs.OpLock, syscall.EROFS, "read-only file system", syscall.EROFS},
		{"read-only-mkdir", vfs.OpMkdirAll, syscall.EROFS, "read-only file system", syscall.EROFS},
		{"permission", vfs.OpLock, syscall.EACCES, "permission denied", fs.ErrPermission},
		{"permission-list", vfs.OpList, syscall.EACCES, "permission denied", fs.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.op == vfs.OpMkdirAll {
				dir = filepath.Join(dir, "new")
			}
			_, err := Open(dir, &Options{fsys: vfs.WithFaults(vfs.OS(), vfs.FailAfter(tc.op, 1, tc.errno))})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.target) {
				t.Fatalf("Open: %v, want %q", err, tc.want)
			}
			if errors.Is(err, ErrInUse) || strings.Contains(err.Error(), "in use") {
				t.Fatalf("Open blames a lock conflict for %v: %v", tc.errno, err)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("Open error does not name the directory: %v", err)
			}
		})
	}
}

// TestForeignDirWithLockFile: other programs keep a file named LOCK too (a
// LevelDB directory: LOCK, CURRENT, MANIFEST-000001). Without a segment,
// a LOCK file appendlog did not write does not make a directory a log; one
// it wrote does (an empty log that was opened and closed).
func TestForeignDirWithLockFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"LOCK", "CURRENT", "MANIFEST-000001"} {
		writeTestFile(t, filepath.Join(dir, n), nil)
	}
	for name, call := range map[string]func() error{
		"Open": func() error {
			l, err := Open(dir, nil)
			if err == nil {
				l.Close()
			}
			return err
		},
		"OpenReader": func() error { _, err := OpenReader(dir, 0, nil); return err },
		"Verify":     func() error { _, err := Verify(dir, nil); return err },
		"Repair":     func() error { _, err := Repair(dir, true, nil); return err },
	} {
		if err := call(); !errors.Is(err, ErrNotLog) || !strings.Contains(err.Error(), "2 other files") {
			t.Errorf("%s of a directory with a foreign LOCK file: %v, want ErrNotLog", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "LOCK")); err != nil || len(b) != 0 {
		t.Fatalf("the foreign LOCK file was changed: %q %v", b, err)
	}

	// An empty log that Repair locked (LOCK is its only file), then given a
	// foreign file: still a log.
	log := t.TempDir()
	_, err := Repair(log, false, nil)
	noErr(t, err)
	writeTestFile(t, filepath.Join(log, "notes.txt"), []byte("hi"))
	if names, err := os.ReadDir(log); err != nil || len(names) != 2 {
		t.Fatalf("files %v %v, want LOCK and notes.txt", names, err)
	}
	l := mustOpen(t, log, nil)
	noErr(t, l.Close())
}

// TestCallsAfterFailedSync checks that once an fdatasync failed, every
// call of the log that could act on it returns the failure, DeleteCursor
// included (it removed the cursor's file and fsynced the directory of a
// failed log), and that no segment is fdatasynced again.
func TestCallsAfterFailedSync(t *testing.T) {
	mem := vfs.NewMem()
	failing := new(atomic.Bool)
	var segSyncs atomic.Int64
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && !strings.Contains(name, cursorDir) {
			segSyncs.Add(1)
			if failing.Load() {
				return 0, syscall.EIO
			}
		}
		return n, nil
	}
	const dir = "/log"
	l := mustOpen(t, dir, &Options{fsys: vfs.WithFaults(mem, inj)})
	ctx := context.Background()
	for i := range 10 {
		_, err := l.Append(testPayload(1, i, 100))
		noErr(t, err)
	}
	noErr(t, l.Sync(ctx))
	for _, name := range []string{"open", "shut"} {
		c, err := l.Cursor(name)
		noErr(t, err)
		if name == "shut" {
			noErr(t, c.Close())
		}
	}
	failing.Store(true)
	seq, err := l.Append([]byte("x"))
	noErr(t, err)
	if err := l.WaitDurable(ctx, seq); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable over the failing fdatasync: %v", err)
	}
	failing.Store(false) // the disk "recovers": the log must not believe it
	syncs := segSyncs.Load()
	calls := map[string]func() error{
		"Append":        func() error { _, err := l.Append([]byte("y")); return err },
		"AppendBatch":   func() error { _, err := l.AppendBatch([][]byte{[]byte("y")}); return err },
		"Flush":         func() error { return l.Flush(ctx) },
		"Sync":          func() error { return l.Sync(ctx) },
		"TruncateFront": func() error { return l.TruncateFront(seq) },
		"NewReader":     func() error { _, err := l.NewReader(0, nil); return err },
		"Cursor":        func() error { _, err := l.Cursor("new"); return err },
		"Cursors":       func() error { _, err := l.Cursors(); return err },
		"DeleteCursor":  func() error { return l.DeleteCursor("shut") },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s after the failed fdatasync: %v, want the failure", name, err)
		}
	}
	if _, err := mem.Stat(filepath.Join(dir, cursorDir, "shut")); err != nil {
		t.Errorf("the cursor file DeleteCursor was refused for: %v", err)
	}
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close after the failed fdatasync: %v", err)
	}
	if n := segSyncs.Load(); n != syncs {
		t.Fatalf("%d fdatasyncs of the log's segments after the failure", n-syncs)
	}
}
