//go:build linux

package sys

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

func TestAlignedBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 511, BlockSize, 3*BlockSize + 7} {
		b := AlignedBuffer(n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("AlignedBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		if !IsAligned(b) {
			t.Fatalf("AlignedBuffer(%d) not aligned", n)
		}
		if n > 1 && IsAligned(b[1:]) {
			t.Fatalf("b[1:] reported aligned")
		}
	}
}

// TestHugeBuffer checks sizes, alignment and that the memory is usable,
// and that release can be called twice (it unmaps once).
func TestHugeBuffer(t *testing.T) {
	for _, n := range []int{4096, HugePage - BlockSize, HugePage, 3*HugePage + BlockSize} {
		b, release, err := HugeBuffer(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != n || cap(b) != n || !IsAligned(b) {
			t.Fatalf("HugeBuffer(%d): len %d cap %d aligned %v", n, len(b), cap(b), IsAligned(b))
		}
		if n >= HugePage && uintptr(unsafe.Pointer(&b[0]))&(HugePage-1) != 0 {
			t.Fatalf("HugeBuffer(%d) not aligned to a huge page", n)
		}
		for i := 0; i < n; i += 4096 {
			b[i] = byte(i >> 12)
		}
		for i := 0; i < n; i += 4096 {
			if b[i] != byte(i>>12) {
				t.Fatalf("byte %d: got %d", i, b[i])
			}
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenDirectAlignment(t *testing.T) {
	name := filepath.Join(t.TempDir(), "direct")
	f, err := OpenDirect(name, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, ErrDirectUnsupported) {
		t.Skipf("O_DIRECT unsupported here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	buf := AlignedBuffer(2 * BlockSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	if n, err := f.WriteAt(buf[:BlockSize], 0); err != nil || n != BlockSize {
		t.Fatalf("aligned O_DIRECT write: n=%d err=%v", n, err)
	}
	// Same length, same offset, but the buffer address is off by one:
	// the kernel must reject it, which proves O_DIRECT is in effect.
	if _, err := f.WriteAt(buf[1:BlockSize+1], 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("unaligned O_DIRECT write: err=%v, want EINVAL", err)
	}
	// Aligned buffer, unaligned length: also rejected.
	if _, err := f.WriteAt(buf[:100], BlockSize); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("unaligned-length O_DIRECT write: err=%v, want EINVAL", err)
	}
	got := AlignedBuffer(BlockSize)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf[:BlockSize]) {
		t.Fatal("O_DIRECT read back differs")
	}
	// Pwritev with aligned buffers works too.
	if n, err := Pwritev(f, [][]byte{buf[:BlockSize], buf[BlockSize:]}, BlockSize); err != nil || n != 2*BlockSize {
		t.Fatalf("O_DIRECT pwritev: n=%d err=%v", n, err)
	}
}

func TestPwritevManyBuffers(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "v"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		bufs [][]byte
		want []byte
	)
	for i := range 3000 {
		var b []byte
		if i%7 != 3 { // every seventh buffer is empty
			b = bytes.Repeat([]byte{byte(i)}, 1+i%13)
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	const off = 100
	n, err := Pwritev(f, bufs, off)
	if err != nil || n != len(want) {
		t.Fatalf("Pwritev: n=%d err=%v, want %d", n, err, len(want))
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != off+len(want) || !bytes.Equal(got[off:], want) || !bytes.Equal(got[:off], make([]byte, off)) {
		t.Fatal("file is not the concatenation of the buffers")
	}
	if n, err := Pwritev(f, nil, 0); n != 0 || err != nil {
		t.Fatalf("empty Pwritev: %d %v", n, err)
	}
}

func TestPwritevClosed(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "v"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Pwritev(f, [][]byte{[]byte("x")}, 0)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "pwritev" || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Pwritev on closed file: %#v", err)
	}
}

func TestFallocateExtendsWithZeros(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if err := Fallocate(f, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1<<20 || string(got[:5]) != "hello" || !bytes.Equal(got[5:], make([]byte, len(got)-5)) {
		t.Fatalf("after Fallocate: len %d prefix %q", len(got), got[:5])
	}
	// A range inside the file does not shrink or change it.
	if err := Fallocate(f, 10, 10); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != 1<<20 {
		t.Fatalf("size %d after inner Fallocate", fi.Size())
	}
	if err := Fallocate(f, 0, 0); err != nil {
		t.Fatalf("zero-length Fallocate: %v", err)
	}
	// The fallback path extends the size too.
	if err := extend(f, 2<<20); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != 2<<20 {
		t.Fatalf("size %d after extend", fi.Size())
	}
}

func TestFdatasync(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := Fdatasync(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = Fdatasync(f)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "fdatasync" || pe.Path != f.Name() || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Fdatasync on closed file: %#v", err)
	}
}

func TestMmapRoundTrip(t *testing.T) {
	name := filepath.Join(t.TempDir(), "m")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 2 * 4096
	if err := Fallocate(f, 0, size); err != nil {
		t.Fatal(err)
	}
	m, err := Mmap(f, 0, size, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := Madvise(m, AdviceSequential); err != nil {
		t.Fatal(err)
	}
	copy(m[4096:], "mapped")
	// The store is visible through read(2) without msync: same page cache.
	got := make([]byte, 6)
	if _, err := f.ReadAt(got, 4096); err != nil || string(got) != "mapped" {
		t.Fatalf("read through file: %q %v", got, err)
	}
	if err := Munmap(m); err != nil {
		t.Fatal(err)
	}
	// And a write through the file is visible in a read-only mapping.
	if _, err := f.WriteAt([]byte("file"), 0); err != nil {
		t.Fatal(err)
	}
	r, err := Mmap(f, 0, size, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(r[:4]) != "file" || string(r[4096:4102]) != "mapped" {
		t.Fatalf("read-only mapping: %q %q", r[:4], r[4096:4102])
	}
	for a := AdviceNormal; a <= AdviceDontNeed; a++ {
		if err := Madvise(r, a); err != nil {
			t.Fatalf("Madvise(%v): %v", a, err)
		}
	}
	if err := Munmap(r); err != nil {
		t.Fatal(err)
	}
	if _, err := Mmap(f, 0, 0, false); err == nil {
		t.Fatal("zero-length Mmap succeeded")
	}
}

func TestTryLock(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	a, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	if err := TryLock(a); err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file description, so a second open
	// in the same process conflicts.
	err = TryLock(b)
	var pe *fs.PathError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &pe) || pe.Path != name {
		t.Fatalf("second TryLock: %v, want ErrLocked", err)
	}
	if err := TryLock(a); err != nil {
		t.Fatalf("re-lock by holder: %v", err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := TryLock(b); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	// Closing the holder releases the lock too.
	b.Close()
	if err := TryLock(a); err != nil {
		t.Fatalf("TryLock after holder closed: %v", err)
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir(missing): %v", err)
	}
}

func TestOpenDirectTmpfs(t *testing.T) {
	dir, err := os.MkdirTemp("/dev/shm", "sys-test")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	f, err := OpenDirect(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err == nil {
		f.Close()
		t.Skip("this tmpfs accepts O_DIRECT")
	}
	var pe *fs.PathError
	if !errors.Is(err, ErrDirectUnsupported) || !errors.Is(err, syscall.EINVAL) || !errors.As(err, &pe) {
		t.Fatalf("OpenDirect on tmpfs: %v", err)
	}
}

func TestMaxRSS(t *testing.T) {
	before, err := MaxRSS()
	if err != nil || before <= 0 {
		t.Fatalf("MaxRSS: %d %v", before, err)
	}
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	after, _ := MaxRSS()
	if after < 64<<20 {
		t.Fatalf("MaxRSS %d after touching 64 MiB", after)
	}
}
