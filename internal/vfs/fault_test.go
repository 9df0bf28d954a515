package vfs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// faultTargets returns a fresh underlying FS and a directory in it.
func faultTargets(t *testing.T) map[string]func() (vfs.FS, string) {
	return map[string]func() (vfs.FS, string){
		"mem": func() (vfs.FS, string) { return vfs.NewMem(), "/" },
		"os":  func() (vfs.FS, string) { return vfs.OS(), t.TempDir() },
	}
}

func TestFaultShortWrite(t *testing.T) {
	for name, target := range faultTargets(t) {
		t.Run(name, func(t *testing.T) {
			base, dir := target()
			short := func(op vfs.Op, name string, off int64, n int) (int, error) {
				if op == vfs.OpWrite && n == 10 {
					return 3, syscall.EIO
				}
				return n, nil
			}
			fsys := vfs.WithFaults(base, short)
			path := filepath.Join(dir, "f")
			f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n, err := f.WriteAt([]byte("0123456789"), 0)
			var pe *fs.PathError
			if n != 3 || !errors.Is(err, syscall.EIO) || !errors.As(err, &pe) || pe.Op != "write" || pe.Path != path {
				t.Fatalf("short WriteAt: n=%d err=%v", n, err)
			}
			if got := mustRead(t, base, path); string(got) != "012" {
				t.Fatalf("after short write: %q", got)
			}
			n, err = f.WritevAt([][]byte{[]byte("abcd"), []byte("efgh"), []byte("ij")}, 3)
			if n != 3 || !errors.Is(err, syscall.EIO) {
				t.Fatalf("short WritevAt: n=%d err=%v", n, err)
			}
			if got := mustRead(t, base, path); string(got) != "012abc" {
				t.Fatalf("after short writev: %q", got)
			}
			// Other sizes pass through.
			if n, err := f.WritevAt([][]byte{[]byte("xy")}, 6); n != 2 || err != nil {
				t.Fatalf("WritevAt: %d %v", n, err)
			}
		})
	}
}

func TestFaultENOSPC(t *testing.T) {
	for name, target := range faultTargets(t) {
		t.Run(name, func(t *testing.T) {
			base, dir := target()
			fsys := vfs.WithFaults(base, vfs.ENOSPCAfter(100))
			path := filepath.Join(dir, "f")
			f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			chunk := bytes.Repeat([]byte("z"), 30)
			var off int64
			for range 3 {
				n, err := f.WriteAt(chunk, off)
				if err != nil || n != 30 {
					t.Fatalf("write under the limit: %d %v", n, err)
				}
				off += int64(n)
			}
			n, err := f.WriteAt(chunk, off)
			if n != 10 || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("straddling write: n=%d err=%v, want 10 and ENOSPC", n, err)
			}
			if n, err := f.WritevAt([][]byte{chunk}, off+10); n != 0 || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write past the limit: n=%d err=%v", n, err)
			}
			if size, err := f.Size(); size != 100 || err != nil {
				t.Fatalf("size %d %v, want 100", size, err)
			}
			if err := f.Sync(); err != nil {
				t.Fatalf("Sync is not a write: %v", err)
			}
		})
	}
}

func TestFaultSyncEIO(t *testing.T) {
	m := vfs.NewMem()
	fsys := vfs.WithFaults(m, vfs.FailAfter(vfs.OpSync, 2, syscall.EIO))
	f, err := fsys.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "one", 0)
	if err := f.Sync(); err != nil {
		t.Fatalf("first Sync: %v", err)
	}
	mustWrite(t, f, "two", 3)
	for i := range 2 {
		if err := f.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Sync %d: %v, want EIO", i+2, err)
		}
	}
	// The failed sync made nothing durable.
	if got := mustRead(t, m.Crash(nil), "/f"); string(got) != "one" {
		t.Fatalf("after crash: %q, want %q", got, "one")
	}
}

func TestFaultFailAfterOps(t *testing.T) {
	m := vfs.NewMem()
	for _, op := range []vfs.Op{vfs.OpOpen, vfs.OpRemove, vfs.OpRename, vfs.OpSyncDir, vfs.OpMkdirAll, vfs.OpList, vfs.OpStat, vfs.OpLock} {
		fsys := vfs.WithFaults(m, vfs.FailAfter(op, 1, syscall.EIO))
		var err error
		switch op {
		case vfs.OpOpen:
			_, err = fsys.OpenFile("/x", os.O_RDWR|os.O_CREATE, 0o644)
		case vfs.OpRemove:
			err = fsys.Remove("/x")
		case vfs.OpRename:
			err = fsys.Rename("/x", "/y")
		case vfs.OpSyncDir:
			err = fsys.SyncDir("/")
		case vfs.OpMkdirAll:
			err = fsys.MkdirAll("/d", 0o755)
		case vfs.OpList:
			_, err = fsys.List("/")
		case vfs.OpStat:
			_, err = fsys.Stat("/")
		case vfs.OpLock:
			_, err = fsys.Lock("/LOCK", "me")
		}
		var pe *fs.PathError
		if !errors.Is(err, syscall.EIO) || !errors.As(err, &pe) || pe.Op != op.String() {
			t.Errorf("%v: %v", op, err)
		}
		// The other call of the same kind.
		switch op {
		case vfs.OpOpen:
			_, err = fsys.OpenRegular("/x", os.O_RDWR|os.O_CREATE, 0o644)
		case vfs.OpList:
			_, err = fsys.ReadDir("/")
		default:
			continue
		}
		if !errors.Is(err, syscall.EIO) || !errors.As(err, &pe) || pe.Op != op.String() {
			t.Errorf("%v (OpenRegular or ReadDir): %v", op, err)
		}
	}
	if names, _ := m.List("/"); len(names) != 0 {
		t.Fatalf("failed operations had effects: %v", names)
	}

	// File operations, and Close still closing the file.
	fsys := vfs.WithFaults(m, vfs.Chain(
		vfs.FailAfter(vfs.OpTruncate, 1, syscall.EIO),
		vfs.FailAfter(vfs.OpPreallocate, 1, syscall.EIO),
		vfs.FailAfter(vfs.OpRead, 1, syscall.EIO),
		vfs.FailAfter(vfs.OpClose, 1, syscall.EIO),
	))
	f, err := fsys.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "data", 0)
	if err := f.Truncate(0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Truncate: %v", err)
	}
	if err := f.Preallocate(0, 100); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Preallocate: %v", err)
	}
	if _, err := f.ReadAt(make([]byte, 4), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("ReadAt: %v", err)
	}
	if size, err := f.Size(); size != 4 || err != nil {
		t.Fatalf("Size: %d %v", size, err)
	}
	if err := f.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("file not closed after failed Close: %v", err)
	}
}

func TestFailAfterCounts(t *testing.T) {
	inj := vfs.FailAfter(vfs.OpSync, 3, syscall.EIO)
	for i := 1; i <= 5; i++ {
		if _, err := inj(vfs.OpWrite, "f", 0, 1); err != nil {
			t.Fatalf("other op failed: %v", err)
		}
		_, err := inj(vfs.OpSync, "f", 0, 0)
		if (err != nil) != (i >= 3) {
			t.Fatalf("sync %d: err=%v", i, err)
		}
	}
}

func TestOpString(t *testing.T) {
	if vfs.OpWrite.String() != "write" || vfs.OpLock.String() != "lock" || vfs.Op(0).String() != "Op(0)" {
		t.Fatal("Op.String")
	}
}
