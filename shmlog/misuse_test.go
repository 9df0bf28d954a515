package shmlog_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/shmlog"
)

// header returns a valid header page of a log of 1 MiB files.
func header(idx uint64) []byte {
	b := make([]byte, shmlog.HeaderSize)
	shmlog.PutHeader(b, 1<<20-shmlog.HeaderSize, idx)
	return b
}

func TestMisuse(t *testing.T) {
	valid := append(header(0), make([]byte, 1<<20-shmlog.HeaderSize)...)
	walHdr := make([]byte, shmlog.HeaderSize)
	frame.PutFileHeader(walHdr, frame.FileHeader{Kind: frame.FileWAL})
	patch := func(off int, v ...byte) []byte {
		b := append([]byte(nil), valid...)
		copy(b[off:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		off  int64
		want error
	}{
		{"foreign", []byte(strings.Repeat("not a log\n", 1000)), 0, frame.ErrBadMagic},
		{"version", patch(8, 9), 8, frame.ErrVersion},
		{"wal", walHdr, 10, shmlog.ErrNotShm},
		{"damaged params", patch(130, 0x55), 156, shmlog.ErrHeader},
		{"damaged file header", patch(20, 0x55), 24, frame.ErrChecksum},
		{"file 1 as file 0", append(header(1), make([]byte, 1<<20-shmlog.HeaderSize)...), 136, shmlog.ErrHeader},
		{"truncated header", valid[:100], 100, shmlog.ErrTruncated},
		{"truncated data", patch(256, 0, 0, 1), 4096, shmlog.ErrTruncated}, // tail 64 KiB, file cut below
		{"empty", nil, 0, shmlog.ErrTruncated},
		{"short foreign", []byte("hello\n"), 0, frame.ErrBadMagic}, // not a truncated log
		{"short wal", walHdr[:100], 100, shmlog.ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := logPath(t)
			data := tc.data
			if tc.name == "truncated data" {
				data = data[:shmlog.HeaderSize]
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, open := range []struct {
				name string
				fn   func() error
			}{
				{"Open", func() error {
					l, err := shmlog.Open(path, nil)
					if err == nil {
						l.Close()
					}
					return err
				}},
				{"OpenReader", func() error {
					r, err := shmlog.OpenReader(path, nil)
					if err == nil {
						r.Close()
					}
					return err
				}},
				{"Verify", func() error { _, err := shmlog.Verify(path, nil); return err }},
			} {
				err := open.fn()
				var ce *shmlog.CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, tc.want) {
					t.Fatalf("%s: %v, want a CorruptError wrapping %v", open.name, err, tc.want)
				}
				if ce.File != path || ce.Offset != tc.off {
					t.Fatalf("%s: error names %s offset %d, want %s offset %d", open.name, ce.File, ce.Offset, path, tc.off)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset "+strconv.FormatInt(tc.off, 10)) {
					t.Fatalf("%s: message %q does not name file and offset", open.name, err)
				}
			}
		})
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []shmlog.Options{{MaxFileSize: 100}, {MaxFileSize: 8193}, {MaxFileSize: 8 << 30}, {CommitTimeout: -1},
		{Perm: 0o444}, {Perm: 0o200}, {Perm: os.ModeDir | 0o644}} { // the creator could not map its own log
		path := logPath(t)
		if l, err := shmlog.Open(path, &o); err == nil {
			l.Close()
			t.Errorf("Open with %+v succeeded", o)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open with %+v created %s (%v)", o, path, err)
		}
	}
	l, err := shmlog.Open(logPath(t), &shmlog.Options{MaxFileSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(make([]byte, 4096-15)); !errors.Is(err, shmlog.ErrTooLarge) {
		t.Fatalf("Append of a record larger than a file: %v", err)
	}
	if _, err := l.Append(make([]byte, 4096-16)); err != nil {
		t.Fatalf("Append of a record that fills a file: %v", err)
	}
	if _, err := l.NewReader(3); err == nil {
		t.Fatal("NewReader at an unaligned position succeeded")
	}
	dir := t.TempDir()
	if _, err := shmlog.Open(dir, nil); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
}

func TestClosed(t *testing.T) {
	l, err := shmlog.Open(logPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("x")); !errors.Is(err, shmlog.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, shmlog.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestNilContext: Sync and Wait refuse a nil context instead of panicking,
// and the log goes on working.
func TestNilContext(t *testing.T) {
	l, err := shmlog.Open(logPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if err := l.Sync(nil); !errors.Is(err, shmlog.ErrNilContext) {
		t.Fatalf("Sync(nil): %v", err)
	}
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	//lint:ignore SA1012 a nil context is the misuse under test
	if err := r.Wait(nil); !errors.Is(err, shmlog.ErrNilContext) {
		t.Fatalf("Wait(nil): %v", err)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatalf("Sync after Sync(nil): %v", err)
	}
	if err := r.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after Wait(nil): %v", err)
	}
}

// countProc returns the number of open descriptors of this process and of
// its mappings of files under dir.
func countProc(t *testing.T, dir string) (fds, maps int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	m, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	return len(ents), strings.Count(string(m), dir)
}

func TestNoLeak(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 16 << 10}
	// Warm up once, so lazily opened runtime descriptors are counted.
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	fds, maps := countProc(t, filepath.Dir(path))
	if maps != 0 {
		t.Fatalf("%d mappings of the log after Close", maps)
	}
	l, err = shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, m := countProc(t, filepath.Dir(path)); m != 2 {
		t.Fatalf("an open Log has %d mappings, want 2 (so the count sees them)", m)
	}
	l.Close()
	// Another Log holds the log open for most of the loop, so that most
	// Opens join and most Closes are not the last (no recovery, no trim);
	// every 100th round runs alone.
	holder, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		if i%100 == 50 {
			holder.Close()
		}
		if i%100 == 51 {
			if holder, err = shmlog.Open(path, o); err != nil {
				t.Fatal(err)
			}
		}
		l, err := shmlog.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 { // roll now and then, and read
			for range 100 {
				l.Append(make([]byte, 100))
			}
			r, err := l.NewReader(0)
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, ok, err := r.Next(); !ok || err != nil {
					break
				}
			}
			r.Close()
		} else {
			l.Append([]byte("x"))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	holder.Close()
	fds2, maps2 := countProc(t, filepath.Dir(path))
	if fds2 != fds || maps2 != maps {
		t.Fatalf("after 10,000 opens: %d descriptors and %d mappings, before %d and %d", fds2, maps2, fds, maps)
	}
}

func TestTrimAndCloseRaceWriters(t *testing.T) {
	const procs, goroutines, records, size = 4, 2, 1000, 100
	path := logPath(t)
	var jobs []job
	for p := range procs {
		j := job{path: path, first: p * goroutines, goroutines: goroutines, records: records, size: size, fileSize: shmlog.DefaultMaxFileSize, writers: procs * goroutines}
		if p%2 == 1 {
			j.hook = "cycle"
		}
		jobs = append(jobs, j)
	}
	runChildren(t, jobs)
	verify(t, path, size, counts(procs*goroutines, records))
	// The last Close trimmed the active file after its tail.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= shmlog.DefaultMaxFileSize {
		t.Fatalf("file 0 is %d bytes after the last Close: not trimmed", fi.Size())
	}
	// And the next Open preallocates it again.
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, _ := os.Stat(path); fi.Size() != shmlog.DefaultMaxFileSize {
		t.Fatalf("file 0 is %d bytes after Open, want %d", fi.Size(), shmlog.DefaultMaxFileSize)
	}
}

func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	path := filepath.Join(dir, "log")
	if _, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 16 << 20}); err == nil {
		t.Fatal("Open of a 16 MiB file on an 8 MiB disk succeeded")
	} else if !strings.Contains(err.Error(), "preallocate") {
		t.Fatalf("Open: %v", err)
	}
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := make([]byte, 1000)
	var n int
	for ; ; n++ {
		if _, err := l.Append(p); err != nil {
			if !strings.Contains(err.Error(), "preallocate") || !strings.Contains(err.Error(), "no space") {
				t.Fatalf("Append %d: %v", n, err)
			}
			break
		}
		if n > 10000 {
			t.Fatal("an 8 MiB disk took 10 MB of records")
		}
	}
	t.Logf("disk full after %d records", n)
	// Every record appended before is there.
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := 0
	for {
		_, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got++
	}
	if got != n {
		t.Fatalf("read %d records, appended %d", got, n)
	}
	// No temporary file is left behind.
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) != 0 {
		t.Fatalf("left %v", m)
	}
}

// TestTrimActive: the last Close trims the active file even when its own
// Log never moved to it.
func TestTrimActive(t *testing.T) {
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: 64 << 10}
	idle, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	busy, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	for range 700 { // 512 fill file 0
		if _, err := busy.Append(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	busy.Close()
	idle.Close()
	name := path + ".00000001"
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= 64<<10 {
		t.Fatalf("%s is %d bytes after the last Close: not trimmed", name, fi.Size())
	}
	if st, err := shmlog.Verify(path, nil); err != nil || st.Records != 700 {
		t.Fatalf("Verify: %d records, %v; want 700", st.Records, err)
	}
}

func TestNoSlot(t *testing.T) {
	path := logPath(t)
	var ls []*shmlog.Log
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range 48 {
		l, err := shmlog.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if l, err := shmlog.Open(path, nil); !errors.Is(err, shmlog.ErrNoSlot) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("49th Open: %v, want ErrNoSlot", err)
	}
	// A closed Log's slot is taken again.
	ls[7].Close()
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls[7] = l
}

// closedLog appends recs to a new log and closes it: the last Close trims
// the active file after its tail (rounded up to a page).
func closedLog(t *testing.T, recs ...[]byte) string {
	t.Helper()
	path := logPath(t)
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range recs {
		if _, err := l.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// noFault runs fn with faults on mapped memory turned into panics, and
// fails the test if one happens: a SIGBUS would otherwise kill the binary.
func noFault(t *testing.T, what string, fn func()) {
	t.Helper()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s faulted: %v", what, r)
		}
	}()
	fn()
}

// TestDamagedTrimmedFile: a damaged frame whose length runs past the end
// of a trimmed file (a log closed by its last process) is reported as
// damage naming the file and offset; reading the bytes past the end would
// be a SIGBUS.
func TestDamagedTrimmedFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage changes the file, whose first frame is at 4096.
		damage func(t *testing.T, f *os.File)
	}{
		{"length", func(t *testing.T, f *os.File) {
			// The first record's header says 100,000 payload bytes.
			var b [8]byte
			f.ReadAt(b[:], shmlog.HeaderSize)
			w := binary.LittleEndian.Uint64(b[:])&^(uint64(frame.MaxPayload)<<32) | 100000<<32
			binary.LittleEndian.PutUint64(b[:], w)
			if _, err := f.WriteAt(b[:], shmlog.HeaderSize); err != nil {
				t.Fatal(err)
			}
		}},
		{"cut at the tail", func(t *testing.T, f *os.File) {
			// Claim one word more and cut the file right after it, at a
			// page boundary (the test's records end 8 bytes before one):
			// a frame header cannot fit there.
			var b [8]byte
			f.ReadAt(b[:], 256)
			tail := binary.LittleEndian.Uint64(b[:]) + 8
			binary.LittleEndian.PutUint64(b[:], tail)
			f.WriteAt(b[:], 256)
			// The header word of an empty record there, whose seq the
			// reader then reads past the end.
			var h [12]byte
			binary.LittleEndian.PutUint32(h[:4], uint32(frame.KindRecord)<<30)
			binary.LittleEndian.PutUint64(h[4:], tail-8)
			binary.LittleEndian.PutUint32(b[:4], frame.Mask(crc32.Checksum(h[:], crc32.MakeTable(crc32.Castagnoli))))
			copy(b[4:], h[:4])
			f.WriteAt(b[:], int64(shmlog.HeaderSize+tail-8))
			if err := f.Truncate(int64(shmlog.HeaderSize + tail)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := closedLog(t, []byte("hello"), bytes.Repeat([]byte("x"), 4048))
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, f)
			f.Close()
			noFault(t, "Verify", func() {
				_, err = shmlog.Verify(path, nil)
			})
			var ce *shmlog.CorruptError
			if !errors.As(err, &ce) || ce.File != path {
				t.Fatalf("Verify: %v, want a CorruptError naming %s", err, path)
			}
			noFault(t, "Reader", func() {
				r, err := shmlog.OpenReader(path, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				for {
					_, ok, err := r.Next()
					if err != nil {
						if !errors.As(err, &ce) || ce.File != path {
							t.Fatalf("Next: %v, want a CorruptError naming %s", err, path)
						}
						return
					}
					if !ok {
						t.Fatal("Next reached the end past the damage")
					}
				}
			})
		})
	}
}

// TestReaderFromNotABoundary: a Reader asked to start inside a frame (a
// position no Append returned) is refused; it must not take the payload
// bytes there for an unfinished frame and pad over them, destroying the
// record.
func TestReaderFromNotABoundary(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{CommitTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pos, err := l.Append(make([]byte, 64)) // zero words: "claimed, not started"
	if err != nil {
		t.Fatal(err)
	}
	text, err := l.Append([]byte("01234567890123456789012345678901")) // words of kind 0: "in progress"
	if err != nil {
		t.Fatal(err)
	}
	end, err := l.Append([]byte("last"))
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{pos + 24, pos + 40, text + 16, text + 24, end + 64, 5 << 32} {
		r, err := l.NewReader(from)
		if err == nil {
			for range 10 {
				r.Next()
			}
			r.Close()
			t.Errorf("NewReader(%#x) inside a frame succeeded", from)
		}
	}
	// Every record is intact, and a Reader may start at each of them, at
	// the start of the file, at a frame still in progress and at the end.
	if st, err := shmlog.Verify(path, nil); err != nil || st.Records != 3 {
		t.Fatalf("Verify: %+v, %v; want 3 intact records", st, err)
	}
	res, err := l.Reserve(10)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{0, pos, text, end, res.Pos(), res.Pos() + 32} {
		r, err := l.NewReader(from)
		if err != nil {
			t.Fatalf("NewReader(%#x): %v", from, err)
		}
		r.Close()
	}
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenNotALog: Open of a path that exists but is not a shared-memory
// log (a foreign file, a directory, a FIFO) fails naming the path, and
// leaves nothing behind: no PATH.lock beside a file it does not own.
func TestOpenNotALog(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "00000000000000000001.seg")
	walHdr := make([]byte, shmlog.HeaderSize)
	frame.PutFileHeader(walHdr, frame.FileHeader{Kind: frame.FileWAL})
	if err := os.WriteFile(foreign, walHdr, 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := []string{foreign, text, sub}
	fifo := filepath.Join(dir, "fifo")
	if out, err := exec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
		t.Logf("no FIFO case: mkfifo: %v %s", err, out)
	} else {
		paths = append(paths, fifo)
	}
	for _, path := range paths {
		l, err := shmlog.Open(path, nil)
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", path)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%s): %v does not name the path", path, err)
		}
		if _, err := os.Lstat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open(%s) left %s.lock (%v)", path, path, err)
		}
		if r, err := shmlog.OpenReader(path, nil); err == nil {
			r.Close()
			t.Errorf("OpenReader(%s) succeeded", path)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("OpenReader(%s): %v does not name the path", path, err)
		}
	}
	if len(paths) == 4 {
		if _, err := shmlog.Verify(fifo, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Verify of a FIFO: %v", err)
		}
	}
}

// TestDamagedInProgressWord: a frame header word that says "in progress"
// but names no slot (slot+1 is 1 to 48 in every word a writer stores) is
// damage. Taking it for a dead writer's frame would pad over its length,
// here the committed record after it, and report the log whole.
func TestDamagedInProgressWord(t *testing.T) {
	path := closedLog(t, []byte("first"), []byte("second"), []byte("third"))
	// The first frame's word: in progress, slot+1 = 0xffff, and a length
	// that covers the second record.
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(8+24)<<32|0xffff)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b[:], shmlog.HeaderSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, err := shmlog.Verify(path, nil)
	var ce *shmlog.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, shmlog.ErrFrame) || ce.File != path || ce.Offset != shmlog.HeaderSize {
		t.Fatalf("Verify: %+v, %v; want ErrFrame at %s offset %d", st, err, path, shmlog.HeaderSize)
	}
	// Nor does the recovery of the next Open pad over it: it is damage,
	// and the log is cut there.
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rec := l.Recovery(); rec.Padded != 0 || !errors.As(rec.Damage, &ce) || ce.Offset != shmlog.HeaderSize {
		t.Fatalf("Recovery: %+v, want damage at offset %d and nothing padded", rec, shmlog.HeaderSize)
	}
}

// TestReservationAfterUnmap: a Reservation used after its Log closed, or
// committed a second time after its file was unmapped (the Log rolled on),
// returns an error; it must not touch the unmapped file (a SIGSEGV).
func TestReservationAfterUnmap(t *testing.T) {
	l, err := shmlog.Open(logPath(t), &shmlog.Options{MaxFileSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	twice, err := l.Reserve(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := twice.Commit(); err != nil {
		t.Fatal(err)
	}
	for range 200 { // roll to another file: the first is unmapped
		if _, err := l.Append(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if st := l.Stats(); st.ActiveFile == 0 {
		t.Fatalf("no roll: %+v", st)
	}
	noFault(t, "a second Commit after a roll", func() {
		if err := twice.Commit(); err == nil {
			t.Error("a second Commit succeeded")
		}
	})
	open, err := l.Reserve(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	noFault(t, "a Reservation after Close", func() {
		if b := open.Bytes(); len(b) != 0 {
			t.Errorf("Bytes after Close: %d bytes", len(b))
		}
		if err := open.Commit(); !errors.Is(err, shmlog.ErrClosed) {
			t.Errorf("Commit after Close: %v, want ErrClosed", err)
		}
	})
}

// TestOpenLaterFile: a log's file 1 given where its file 0 is due is named
// as such, with the name to use, not reported as a damaged header.
func TestOpenLaterFile(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := l.Append(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	file1 := path + ".00000001"
	for name, fn := range map[string]func() error{
		"Open": func() error {
			l, err := shmlog.Open(file1, nil)
			if err == nil {
				l.Close()
			}
			return err
		},
		"OpenReader": func() error {
			r, err := shmlog.OpenReader(file1, nil)
			if err == nil {
				r.Close()
			}
			return err
		},
		"Verify": func() error { _, err := shmlog.Verify(file1, nil); return err },
	} {
		err := fn()
		if err == nil || !strings.Contains(err.Error(), file1+" is file 1 of the log "+path) {
			t.Errorf("%s(%s): %v", name, file1, err)
		}
	}
	if _, err := os.Stat(file1 + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open left %s.lock (%v)", file1, err)
	}
}

// replaceFile renames a copy of path over it: path names a new file with
// the same bytes, while open Logs keep the old one mapped.
func replaceFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// TestSyncReplacedFile: Sync of a Log whose file was replaced under it (a
// copy renamed over it) fails: syncing the file now at that name would
// leave the Log's records, in the old file, not durable.
func TestSyncReplacedFile(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, path)
	if _, err := l.Append([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Sync after %s was replaced: %v", path, err)
	}
}

// TestCloseAfterRemoval: a Log whose files were removed, and a new log
// created at the same path by another Log, must not cut the new log's
// file when it closes: it is not its own. (The new Log's appends past the
// cut would fault.)
func TestCloseAfterRemoval(t *testing.T) {
	path := logPath(t)
	old, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Append([]byte("old")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{path, path + ".lock"} {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Close of a Log whose file was removed: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != shmlog.DefaultMaxFileSize {
		t.Fatalf("the new log's file after the old Log's Close: %v, %v; want %d bytes", fi.Size(), err, shmlog.DefaultMaxFileSize)
	}
	noFault(t, "appends to the new log", func() {
		for range 1000 {
			if _, err := l.Append(make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSecondCommitRacingRoll: second Commits of committed Reservations
// race the rolls that unmap their files. Each returns an error and none
// faults: were the file unmapped between Commit's look at it and its
// access to the mapping, the access would be a SIGSEGV. Every record
// committed once is in the log, once.
func TestSecondCommitRacingRoll(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const g, n = 4, 3000
	faults := make(chan any, g)
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					faults <- r
				}
			}()
			for range n {
				res, err := l.Reserve(100)
				if err != nil {
					t.Error(err)
					return
				}
				if err := res.Commit(); err != nil {
					t.Error(err)
					return
				}
				for range 3 {
					runtime.Gosched() // let another goroutine roll past the file
					if err := res.Commit(); err == nil {
						t.Error("a second Commit succeeded")
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(faults)
	for r := range faults {
		t.Fatalf("a second Commit faulted: %v", r)
	}
	if st := l.Stats(); st.ActiveFile < 10 {
		t.Fatalf("only %d rolls", st.ActiveFile)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := 0
	if _, err := shmlog.Verify(path, func(shmlog.Record) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != g*n {
		t.Fatalf("%d records in the log, want %d", got, g*n)
	}
}
