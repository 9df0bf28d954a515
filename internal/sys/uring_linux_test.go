//go:build linux

package sys

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestUringWrites submits more writes than the ring holds, reaps them and
// checks the file.
func TestUringWrites(t *testing.T) {
	r, err := NewUring(4)
	if errors.Is(err, ErrUringUnsupported) {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Entries() < 4 {
		t.Fatalf("Entries() = %d", r.Entries())
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n, size = 20, 3000
	bufs := make([][]byte, n)
	var want []byte
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
		want = append(want, bufs[i]...)
	}
	done := 0
	reap := func() {
		c, err := r.Wait()
		if err != nil || c.Err != nil || c.N != size {
			t.Fatalf("completion %+v, %v", c, err)
		}
		done++
	}
	for i := range bufs {
		for r.InFlight() == r.Entries() {
			reap()
		}
		if err := r.Write(f, bufs[i], int64(i*size), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for r.InFlight() > 0 {
		reap()
	}
	if done != n {
		t.Fatalf("%d completions, want %d", done, n)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("file content differs")
	}
	if _, err := r.Wait(); err == nil {
		t.Fatal("Wait with nothing in flight succeeded")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestUringWriteError checks that a failed write comes back in its
// completion: writing to a file opened read-only fails with EBADF.
func TestUringWriteError(t *testing.T) {
	if err := ProbeUring(); err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	r, err := NewUring(1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	name := filepath.Join(t.TempDir(), "ro")
	if err := os.WriteFile(name, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.Write(f, []byte("x"), 0, 7); err != nil {
		t.Fatal(err)
	}
	if err := r.Write(f, []byte("y"), 1, 8); err == nil {
		t.Fatal("second write into a 1-entry ring accepted")
	}
	c, err := r.Wait()
	if err != nil || c.Tag != 7 || c.Err == nil {
		t.Fatalf("completion %+v, %v: want tag 7 with an error", c, err)
	}
}

func TestFSType(t *testing.T) {
	typ, err := FSType(t.TempDir())
	if err != nil || typ == "" {
		t.Fatalf("FSType = %q, %v", typ, err)
	}
	if _, err := FSType(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("FSType of a missing path succeeded")
	}
}
