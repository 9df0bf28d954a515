package ceiling

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/appendlog/appendlog/internal/sys"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func write(t *testing.T, path string, direct bool, n int64, size int, m Mode) {
	t.Helper()
	f, err := Create(path, direct)
	if errors.Is(err, sys.ErrDirectUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, n, size, m); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWriteCheck(t *testing.T) {
	const size = 64 << 10
	for _, direct := range []bool{false, true} {
		for _, m := range []Mode{Fresh, Reused} {
			for _, n := range []int64{0, size, 16 * size, 16*size + 8<<10} {
				path := filepath.Join(t.TempDir(), "c")
				write(t, path, direct, n, size, m)
				if err := Check(path, n, size, m); err != nil {
					t.Errorf("direct=%v %v n=%d: %v", direct, m, n, err)
				}
			}
		}
	}
}

// TestFreshWritesNewBytes: every write of Fresh carries its own offsets, so
// a file written with Reused (or one write repeated) fails its check.
func TestFreshWritesNewBytes(t *testing.T) {
	const size, n = 16 << 10, 64 << 10
	path := filepath.Join(t.TempDir(), "c")
	write(t, path, false, n, size, Reused)
	if err := Check(path, n, size, Fresh); err == nil || !strings.Contains(err.Error(), "offset 32768") {
		t.Fatalf("reused bytes checked as fresh: %v, want a mismatch at offset 32768", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	fillAt(want, 0, Reused)
	for off := 0; off < n; off += size {
		if string(data[off:off+size]) != string(want) {
			t.Fatalf("reused write at %d differs from the first", off)
		}
	}
}

func TestCheckFindsDamage(t *testing.T) {
	const size, n = 16 << 10, 5 * 16 << 10
	for _, tc := range []struct {
		name    string
		damage  func(path string) error
		wantErr string
	}{
		{"byte flipped in the middle write", func(path string) error {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte{0xff}, 2*size+100)
			return err
		}, "offset 32768"},
		{"last write missing", func(path string) error { return os.Truncate(path, n-size) }, "bytes after writing"},
		{"file missing", os.Remove, "no such file"},
	} {
		path := filepath.Join(t.TempDir(), "c")
		write(t, path, false, n, size, Fresh)
		if err := tc.damage(path); err != nil {
			t.Fatal(err)
		}
		if err := Check(path, n, size, Fresh); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: Check = %v, want an error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestBadArguments(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "c"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{0, -4096, 1000} {
		if err := Write(f, 1<<20, size, Fresh); err == nil {
			t.Errorf("Write with size %d: no error", size)
		}
	}
	if err := Write(f, -1, 4096, Fresh); err == nil {
		t.Error("Write with a negative length: no error")
	}
}

func TestWriteReportsErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // read-only: every write fails
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = Write(f, 1<<20, 64<<10, Fresh)
	if err == nil || !strings.Contains(err.Error(), "at offset 0") {
		t.Fatalf("Write to a read-only file = %v, want an error at offset 0", err)
	}
}
