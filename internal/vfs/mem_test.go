package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// readFile returns name's content in fsys, or nil and the error.
func readFile(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, err
	}
	return b, nil
}

func mustRead(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	b, err := readFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWrite(t *testing.T, f vfs.File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func mustSync(t *testing.T, f vfs.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// newDurable creates dir/name in m and makes its entry durable.
func newDurable(t *testing.T, m *vfs.MemFS, name string) vfs.File {
	t.Helper()
	if err := m.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(name); ; d = filepath.Dir(d) {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return f
}

func TestMemCrashSyncedSurvives(t *testing.T) {
	m := vfs.NewMem()
	f := newDurable(t, m, "/db/log")
	mustWrite(t, f, "synced", 0)
	mustSync(t, f)
	mustWrite(t, f, "+unsynced", 6)
	mustWrite(t, f, "X", 0) // overwrite of synced data, never synced

	c := m.Crash(nil)
	if got := mustRead(t, c, "/db/log"); string(got) != "synced" {
		t.Fatalf("after crash: %q, want %q", got, "synced")
	}
	// The new FS is fully usable and independent.
	g, err := c.OpenFile("/db/log", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, "again", 6)
	mustSync(t, g)
	if got := mustRead(t, c.Crash(nil), "/db/log"); string(got) != "syncedagain" {
		t.Fatalf("after second crash: %q", got)
	}
}

func TestMemCrashTruncateIsConservative(t *testing.T) {
	m := vfs.NewMem()
	f := newDurable(t, m, "/f")
	mustWrite(t, f, "0123456789", 0)
	mustSync(t, f)
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(0, 100); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, m.Crash(nil), "/f"); string(got) != "0123456789" {
		t.Fatalf("unsynced truncate survived: %q", got)
	}

	m = vfs.NewMem()
	f = newDurable(t, m, "/f")
	mustWrite(t, f, "0123456789", 0)
	mustSync(t, f)
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(6); err != nil {
		t.Fatal(err)
	}
	mustSync(t, f)
	if got := mustRead(t, m.Crash(nil), "/f"); string(got) != "012\x00\x00\x00" {
		t.Fatalf("synced truncate: %q", got)
	}
}

// TestMemCrashUnsyncedSizeChangesMaySurvive checks that a truncate or a
// preallocation not yet synced may reach the disk before a power cut, as
// ext4 may commit the size change in its journal without any fsync: a file
// rewritten in place after Truncate(0) may come back empty, and a
// preallocated file may come back at its new size with a zero tail.
// TestMemCrashTornWriteKeepsAnySectors checks that a torn write may keep
// any of its sectors, not only a prefix: the page cache writes pages back
// in no promised order and a disk may persist sectors of one request out
// of order, so a later part of a write can survive an earlier one.
func TestMemCrashTornWriteKeepsAnySectors(t *testing.T) {
	m := vfs.NewMem()
	f := newDurable(t, m, "/wal")
	var p []byte
	for i := range 4 {
		p = append(p, bytes.Repeat([]byte{byte('a' + i)}, 512)...)
	}
	mustWrite(t, f, string(p), 0)
	m.Crash(nil)
	var sawGap bool
	for seed := range uint64(200) {
		got := mustRead(t, m.Crash(rand.New(rand.NewPCG(seed, 5))), "/wal")
		if len(got)%512 != 0 {
			t.Fatalf("seed %d: size %d is not on a sector boundary", seed, len(got))
		}
		lost := false
		for i := range len(got) / 512 {
			switch sector := got[i*512 : (i+1)*512]; {
			case bytes.Equal(sector, p[i*512:(i+1)*512]):
				sawGap = sawGap || lost
			case bytes.Equal(sector, make([]byte, 512)):
				lost = true
			default:
				t.Fatalf("seed %d: sector %d torn inside", seed, i)
			}
		}
	}
	if !sawGap {
		t.Fatal("no crash kept a sector of the write after losing an earlier one")
	}
}

func TestMemCrashUnsyncedSizeChangesMaySurvive(t *testing.T) {
	t.Run("truncate", func(t *testing.T) {
		m := vfs.NewMem()
		f := newDurable(t, m, "/meta")
		mustWrite(t, f, "old content", 0)
		mustSync(t, f)
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, "new", 0)
		m.Crash(nil)
		var sawEmpty, sawOld bool
		for seed := range uint64(100) {
			got := mustRead(t, m.Crash(rand.New(rand.NewPCG(seed, 3))), "/meta")
			switch string(got) {
			case "":
				sawEmpty = true
			case "old content":
				sawOld = true
			case "new", "new content":
			default:
				t.Fatalf("seed %d: impossible content %q", seed, got)
			}
		}
		if !sawEmpty || !sawOld {
			t.Fatalf("outcomes: empty=%v old=%v; want both", sawEmpty, sawOld)
		}
	})
	t.Run("preallocate", func(t *testing.T) {
		m := vfs.NewMem()
		f := newDurable(t, m, "/seg")
		mustWrite(t, f, "head", 0)
		mustSync(t, f)
		if err := f.Preallocate(0, 4096); err != nil {
			t.Fatal(err)
		}
		m.Crash(nil)
		var sawGrown, sawShort bool
		for seed := range uint64(100) {
			got := mustRead(t, m.Crash(rand.New(rand.NewPCG(seed, 3))), "/seg")
			switch {
			case string(got) == "head":
				sawShort = true
			case len(got) == 4096 && string(got[:4]) == "head" && bytes.Equal(got[4:], make([]byte, 4092)):
				sawGrown = true
			default:
				t.Fatalf("seed %d: impossible content (len %d)", seed, len(got))
			}
		}
		if !sawGrown || !sawShort {
			t.Fatalf("outcomes: grown=%v short=%v; want both", sawGrown, sawShort)
		}
	})
}

// TestMemCrashUnsyncedEntriesMaySurvive checks that creates, removes and
// renames not yet made durable by SyncDir may still reach the disk before
// a power cut, as a journal commits them on its own, in the order they
// were made: a new file may be there (empty if its data was lost), a
// removed one gone, and a rename done, atomically, even across
// directories.
func TestMemCrashUnsyncedEntriesMaySurvive(t *testing.T) {
	m := vfs.NewMem()
	old := newDurable(t, m, "/a/old")
	mustWrite(t, old, "old", 0)
	mustSync(t, old)
	newDurable(t, m, "/b/x")
	newDurable(t, m, "/a/gone")
	if err := m.Rename("/a/old", "/b/moved"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/a/gone"); err != nil {
		t.Fatal(err)
	}
	created, err := m.OpenFile("/a/created", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, created, "c", 0)
	m.Crash(nil)
	// The three changes survive as a prefix of their order.
	wants := [][2][]string{
		{{"gone", "old"}, {"x"}},
		{{"gone"}, {"moved", "x"}},
		{nil, {"moved", "x"}},
		{{"created"}, {"moved", "x"}},
	}
	saw := make([]bool, len(wants))
	for seed := range uint64(100) {
		c := m.Crash(rand.New(rand.NewPCG(seed, 9)))
		a, _ := c.List("/a")
		b, _ := c.List("/b")
		i := slices.IndexFunc(wants, func(w [2][]string) bool {
			return slices.Equal(a, w[0]) && slices.Equal(b, w[1])
		})
		if i < 0 {
			t.Fatalf("seed %d: impossible entries /a %v, /b %v", seed, a, b)
		}
		saw[i] = true
		if i > 0 {
			if got := mustRead(t, c, "/b/moved"); string(got) != "old" {
				t.Fatalf("seed %d: moved file holds %q", seed, got)
			}
		}
		if i == 3 {
			if got := mustRead(t, c, "/a/created"); string(got) != "" && string(got) != "c" {
				t.Fatalf("seed %d: created file holds %q", seed, got)
			}
		}
	}
	if !slices.Equal(saw, []bool{true, true, true, true}) {
		t.Fatalf("outcomes seen %v; want all", saw)
	}
}

func TestMemCrashDirectoryEntries(t *testing.T) {
	m := vfs.NewMem()
	synced := newDurable(t, m, "/d/synced")
	mustWrite(t, synced, "s", 0)
	mustSync(t, synced)
	old := newDurable(t, m, "/d/old")
	mustWrite(t, old, "old", 0)
	mustSync(t, old)
	gone := newDurable(t, m, "/d/gone")
	mustWrite(t, gone, "gone", 0)
	mustSync(t, gone)

	// Created and synced, but the directory is not synced.
	created, err := m.OpenFile("/d/created", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, created, "c", 0)
	mustSync(t, created)
	if err := m.Rename("/d/old", "/d/new"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/d/gone"); err != nil {
		t.Fatal(err)
	}
	if err := m.MkdirAll("/d/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	names, _ := m.List("/d")
	if want := []string{"created", "new", "sub", "synced"}; !slices.Equal(names, want) {
		t.Fatalf("before crash: %v, want %v", names, want)
	}

	c := m.Crash(nil)
	names, err = c.List("/d")
	if want := []string{"gone", "old", "synced"}; err != nil || !slices.Equal(names, want) {
		t.Fatalf("after crash without SyncDir: %v %v, want %v", names, err, want)
	}
	if got := mustRead(t, c, "/d/old"); string(got) != "old" {
		t.Fatalf("renamed file at old name: %q", got)
	}
	if got := mustRead(t, c, "/d/gone"); string(got) != "gone" {
		t.Fatalf("removed file: %q", got)
	}

	// The same changes followed by SyncDir are durable.
	if err := c.Rename("/d/old", "/d/new"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("/d/gone"); err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenFile("/d/created", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "c", 0)
	mustSync(t, f)
	if err := c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c2 := c.Crash(nil)
	names, err = c2.List("/d")
	if want := []string{"created", "new", "synced"}; err != nil || !slices.Equal(names, want) {
		t.Fatalf("after crash with SyncDir: %v %v, want %v", names, err, want)
	}
	if got := mustRead(t, c2, "/d/created"); string(got) != "c" {
		t.Fatalf("created: %q", got)
	}
}

func TestMemCrashNewDirectoryNeedsParentSync(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenFile("/a/b/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "x", 0)
	mustSync(t, f)
	if err := m.SyncDir("/a/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Crash(nil).Stat("/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("directory whose parent was never synced survived: %v", err)
	}
	for _, d := range []string{"/a", "/"} {
		if err := m.SyncDir(d); !errors.Is(err, vfs.ErrCrashed) {
			t.Fatalf("SyncDir on crashed FS: %v", err)
		}
	}
}

func TestMemCrashKillsOldFS(t *testing.T) {
	m := vfs.NewMem()
	f := newDurable(t, m, "/f")
	l, err := m.Lock("/LOCK", "me")
	if err != nil {
		t.Fatal(err)
	}
	c := m.Crash(nil)

	b := []byte("x")
	errs := map[string]error{
		"Sync":        f.Sync(),
		"Truncate":    f.Truncate(0),
		"Preallocate": f.Preallocate(0, 1),
		"Close":       f.Close(),
		"Unlock":      l.Close(),
		"Remove":      m.Remove("/f"),
		"Rename":      m.Rename("/f", "/g"),
		"MkdirAll":    m.MkdirAll("/x", 0o755),
		"SyncDir":     m.SyncDir("/"),
	}
	_, errs["ReadAt"] = f.ReadAt(b, 0)
	_, errs["WriteAt"] = f.WriteAt(b, 0)
	_, errs["WritevAt"] = f.WritevAt([][]byte{b}, 0)
	_, errs["Size"] = f.Size()
	_, errs["OpenFile"] = m.OpenFile("/f", os.O_RDONLY, 0)
	_, errs["List"] = m.List("/")
	_, errs["Stat"] = m.Stat("/f")
	_, errs["Lock"] = m.Lock("/LOCK2", "me")
	for op, err := range errs {
		if !errors.Is(err, vfs.ErrCrashed) {
			t.Errorf("%s after Crash: %v, want ErrCrashed", op, err)
		}
	}
	// Locks do not survive: the new FS can take it.
	l2, err := c.Lock("/LOCK", "new")
	if err != nil {
		t.Fatalf("Lock after crash: %v", err)
	}
	l2.Close()
}

// TestMemCrashTornWrites checks the rng crash model: every unsynced write is
// lost, kept whole, or kept as a 512-byte-aligned prefix, applied in order
// over the durable content; outcomes include holes and torn writes; and the
// result is a function of the seed.
func TestMemCrashTornWrites(t *testing.T) {
	const (
		header = 100
		nw     = 6
		wlen   = 1500
	)
	m := vfs.NewMem()
	f := newDurable(t, m, "/wal")
	mustWrite(t, f, string(bytes.Repeat([]byte{'H'}, header)), 0)
	mustSync(t, f)
	off := func(i int) int { return header + i*wlen }
	for i := range nw {
		mustWrite(t, f, string(bytes.Repeat([]byte{byte('a' + i)}, wlen)), int64(off(i)))
	}
	m.Crash(nil) // kill it; Crash may be repeated on the dead FS

	var sawHole, sawTorn, sawWhole, sawLost bool
	for seed := range uint64(200) {
		got := mustRead(t, m.Crash(rand.New(rand.NewPCG(seed, 1))), "/wal")
		again := mustRead(t, m.Crash(rand.New(rand.NewPCG(seed, 1))), "/wal")
		if !bytes.Equal(got, again) {
			t.Fatalf("seed %d: crash not deterministic", seed)
		}
		if len(got) < header || !bytes.Equal(got[:header], bytes.Repeat([]byte{'H'}, header)) {
			t.Fatalf("seed %d: synced header damaged", seed)
		}
		lastKept := -1
		for i := range nw {
			lo := off(i)
			if lo >= len(got) {
				sawLost = true
				continue
			}
			region := got[lo:min(off(i+1), len(got))]
			// Each piece of the region between 512-byte boundaries of the
			// file is kept whole or lost (zero).
			k := 0
			for p := 0; p < len(region); {
				q := min(len(region), (lo+p)/512*512+512-lo)
				switch piece := region[p:q]; {
				case bytes.Equal(piece, bytes.Repeat([]byte{byte('a' + i)}, len(piece))):
					k += len(piece)
				case !bytes.Equal(piece, make([]byte, len(piece))):
					t.Fatalf("seed %d write %d: piece [%d, %d) of the file torn inside a sector: %q", seed, i, lo+p, lo+q, piece)
				}
				p = q
			}
			switch {
			case k == 0:
				sawLost = true
			case k == wlen:
				sawWhole = true
				lastKept = i
			default:
				sawTorn = true
				lastKept = i
			}
			if k == 0 && i < nw-1 && len(got) > off(i+1) {
				sawHole = true
			}
		}
		// The file ends where the last kept write ends.
		if lastKept >= 0 && len(got) > off(lastKept+1) {
			t.Fatalf("seed %d: file longer (%d) than its last kept write", seed, len(got))
		}
	}
	if !sawHole || !sawTorn || !sawWhole || !sawLost {
		t.Fatalf("outcomes: hole=%v torn=%v whole=%v lost=%v; want all", sawHole, sawTorn, sawWhole, sawLost)
	}
}

func TestMemConcurrent(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil { // make /c itself durable
		t.Fatal(err)
	}
	const writers, writes = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("/c/%d", w)
			f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := range writes {
				if _, err := f.WriteAt([]byte{byte(i)}, int64(i)); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := f.Sync(); err != nil {
						t.Error(err)
						return
					}
					if err := m.SyncDir("/c"); err != nil {
						t.Error(err)
						return
					}
				}
			}
			if err := f.Sync(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	c := m.Crash(nil)
	for w := range writers {
		got := mustRead(t, c, fmt.Sprintf("/c/%d", w))
		if len(got) != writes {
			t.Fatalf("file %d: %d bytes", w, len(got))
		}
	}
}

// TestMemCrashDuringWrites crashes while goroutines are writing: every
// operation after the crash fails with ErrCrashed and nothing races.
func TestMemCrashDuringWrites(t *testing.T) {
	m := vfs.NewMem()
	f := newDurable(t, m, "/f")
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			<-start
			for i := 0; ; i++ {
				if _, err := f.WriteAt([]byte("data"), int64(g*1000+i%100)); err != nil {
					if !errors.Is(err, vfs.ErrCrashed) {
						t.Errorf("write: %v", err)
					}
					return
				}
				if i%7 == 0 {
					if err := f.Sync(); err != nil && !errors.Is(err, vfs.ErrCrashed) {
						t.Errorf("sync: %v", err)
						return
					}
				}
			}
		})
	}
	close(start)
	c := m.Crash(rand.New(rand.NewPCG(1, 2)))
	wg.Wait()
	if _, err := readFile(c, "/f"); err != nil {
		t.Fatal(err)
	}
}

func TestMemPaths(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenFile("/a//b/../b/f", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Name() != "/a//b/../b/f" {
		t.Fatalf("Name() = %q", f.Name())
	}
	fi, err := m.Stat("a/b/f")
	if err != nil || fi.Name() != "f" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Stat: %v %v", fi, err)
	}
	if fi, err := m.Stat("/"); err != nil || !fi.IsDir() {
		t.Fatalf("Stat root: %v %v", fi, err)
	}
	if _, err := m.OpenFile("/a", os.O_RDONLY, 0); err == nil {
		t.Fatal("opening a directory succeeded")
	}
	if _, err := m.OpenFile("/a/x", os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
		t.Fatal("O_APPEND accepted")
	}
	if err := m.Rename("/a", "/a/b/c"); err == nil {
		t.Fatal("renaming a directory below itself succeeded")
	}
	var zero vfs.MemFS
	if names, err := zero.List("/"); err != nil || len(names) != 0 {
		t.Fatalf("zero MemFS: %v %v", names, err)
	}
}
