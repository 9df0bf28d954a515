package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // America/New_York wherever the test runs

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/vfs"
)

// Tests of misuse and of odd but legal sequences: calls racing each other
// at the worst moment, files changed underneath a writer.

// hookFS is an FS that calls afterOpen after every OpenFile that
// succeeded, and whose files call beforeSync at the start of every Sync
// and afterClose at the end of every Close (any may be nil).
type hookFS struct {
	vfs.FS
	afterOpen  func(name string)
	beforeSync func(f vfs.File)
	afterClose func(f vfs.File)
}

func (h *hookFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if h.afterOpen != nil {
		h.afterOpen(name)
	}
	return &hookFile{File: f, fs: h}, nil
}

type hookFile struct {
	vfs.File
	fs *hookFS
}

func (f *hookFile) Sync() error {
	if f.fs.beforeSync != nil {
		f.fs.beforeSync(f)
	}
	return f.File.Sync()
}

func (f *hookFile) Close() error {
	err := f.File.Close()
	if f.fs.afterClose != nil {
		f.fs.afterClose(f)
	}
	return err
}

// within waits for ch for at most a minute, or fails the test.
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestReopenDuringSync: Reopen (a SIGHUP handler) switches files while the
// flusher is syncing the file it switches away from (Sync, SyncEvery). The
// file switched away from goes to the closer, which closes it; it must not
// be closed under the sync, which would then fail and stop the Ring for
// good. The flusher is held between its read of the current file and its
// fdatasync, where the scheduler may leave it at any time.
func TestReopenDuringSync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	entered, release := make(chan struct{}), make(chan struct{})
	oldClosed := make(chan struct{})
	var syncs, closes atomic.Int32
	fsys := &hookFS{
		FS: vfs.OS(),
		beforeSync: func(vfs.File) {
			if syncs.Add(1) == 1 { // the flusher's sync of the first file
				close(entered)
				<-release
			}
		},
		afterClose: func(vfs.File) {
			if closes.Add(1) == 1 {
				close(oldClosed)
			}
		},
	}
	r, err := OpenFile(path, &RingOptions{fsys: fsys})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("before\n"))
	syncErr := make(chan error, 1)
	go func() { syncErr <- r.Sync() }()
	within(t, entered, "the flusher's sync")

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	reopenErr := make(chan error, 1)
	go func() { reopenErr <- r.Reopen() }()
	// Reopen may not close the file while the sync is under way. If it
	// does, it does so at once; give it a moment to show it, then let the
	// sync go on (a Reopen that waits for the sync passes either way).
	select {
	case <-oldClosed:
		t.Error("Reopen closed the file while the flusher was syncing it")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-syncErr; err != nil {
		t.Errorf("Sync = %v", err)
	}
	if err := <-reopenErr; err != nil {
		t.Errorf("Reopen = %v", err)
	}
	mustWrite(t, r, []byte("after\n"))
	if err := r.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if got := string(readFile(t, path+".1")); got != "before\n" {
		t.Errorf("renamed file holds %q", got)
	}
	if got := string(readFile(t, path)); got != "after\n" {
		t.Errorf("new file holds %q", got)
	}
}

// TestReopenRacingClose runs Reopen's steps interleaved with Close as the
// scheduler may interleave them: Reopen has asked for the switch and
// flushed when Close runs to its end, and only then does Reopen make the
// switch. It must not open (and lock) a file after Close: that file would
// never be closed, its lock would keep every later OpenFile of the path
// out (ErrInUse), and Reopen would wait forever for the stopped closer.
func TestReopenRacingClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	r, err := OpenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("a\n"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	s := r.sink.(*rotSink)
	// Reopen, up to its switch:
	req := s.requestReopen(func() uint64 { pos, _ := r.e.Tail(); return pos })
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// ... and the rest of it, after Close.
	if _, err := s.finishReopen(req); !errors.Is(err, ErrClosed) {
		t.Errorf("Reopen's switch after Close = %v, want ErrClosed", err)
	}
	r2, err := OpenFile(path, nil)
	if err != nil {
		t.Fatalf("OpenFile after Close: %v", err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, path+".1")); got != "a\n" {
		t.Errorf("renamed file holds %q", got)
	}
}

// writeUntilRotated writes numbered lines to r until it has rotated n
// times in all, and returns what it wrote appended to all.
func writeUntilRotated(t *testing.T, r *Ring, n uint64, all []byte) []byte {
	t.Helper()
	for i := 0; r.Stats().Rotations < n; i++ {
		if i > 100*MinRotateBytes/64 {
			t.Fatalf("%d rotations, want %d", r.Stats().Rotations, n)
		}
		line := fmt.Appendf(nil, "line %06d of 64 bytes, padded .......................\n", len(all)/64)
		mustWrite(t, r, line)
		all = append(all, line...)
		if i%16 == 15 {
			if err := r.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return all
}

// logContents returns the backups of path (in name order), then the file.
func logContents(t *testing.T, path string) []byte {
	t.Helper()
	_, contents := rotateFiles(t, vfs.OS(), path)
	return bytes.Join(contents, nil)
}

// TestRotateNamesDST rotates, with LocalTime, at 01:30 on the night daylight
// saving time ends and again an hour later, when the local clock shows
// 01:30 again. The second backup must not take (and replace) the first
// one's name.
func TestRotateNamesDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	edt := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC).In(ny) // 01:30 EDT
	clk := newFakeClockAt(edt)
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes, LocalTime: true}, clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	all := writeUntilRotated(t, r, 1, nil)
	clk.Advance(time.Hour) // 01:30 EST
	all = writeUntilRotated(t, r, 2, all)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := rotateFiles(t, vfs.OS(), path)
	if len(names) != 3 {
		t.Errorf("files %v after 2 rotations", names)
	}
	if got := logContents(t, path); !bytes.Equal(got, all) {
		t.Errorf("the files hold %d bytes, want the %d written", len(got), len(all))
	}
}

// TestRotateKeepsOthersFiles puts a file at the name the next backup would
// take (a user's copy, a backup restored from elsewhere) after OpenFile
// has looked at the directory. Rotation must not replace it.
func TestRotateKeepsOthersFiles(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes}, clock: newFakeClockAt(at)})
	if err != nil {
		t.Fatal(err)
	}
	mine := backupName(path, at)
	if err := os.WriteFile(mine+".gz", []byte("not a log's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all := writeUntilRotated(t, r, 1, nil)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, mine)); got != "mine\n" {
		t.Fatalf("%s holds %d bytes (%.20q...), want the user's", mine, len(got), got)
	}
	if err := os.Remove(mine); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(mine + ".gz"); err != nil {
		t.Fatal(err)
	}
	if got := logContents(t, path); !bytes.Equal(got, all) {
		t.Errorf("the files hold %d bytes, want the %d written", len(got), len(all))
	}
}

// TestSecondRotatingOpenTouchesNothing opens a file that a Ring with Rotate
// already has open, with Rotate too. The second OpenFile is refused
// (ErrInUse), and must be refused before it tidies the directory as if
// the first writer had crashed: the first writer's janitor may be in the
// middle of compressing a backup (name.gz.tmp being written; or name.gz
// in place and name about to be removed), and the files it works on must
// not vanish under it.
func TestSecondRotatingOpenTouchesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	// The first writer does not compress, so that its own janitor leaves
	// the files below alone; the second open's tidying does not depend
	// on the options.
	r, err := OpenFile(path, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, r)
	// Compressions under way, as the second open sees them.
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	half := backupName(path, at)
	done := backupName(path, at.Add(time.Second))
	files := []string{half, half + ".gz.tmp", done, done + ".gz"}
	for _, name := range files {
		if err := os.WriteFile(name, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rot := &Rotate{MaxBytes: MinRotateBytes, Compress: true}
	if r2, err := OpenFile(path, &RingOptions{Rotate: rot}); !errors.Is(err, ErrInUse) {
		if err == nil {
			r2.Close()
		}
		t.Fatalf("second OpenFile = %v, want ErrInUse", err)
	}
	for _, name := range files {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("the refused OpenFile removed %s: %v", filepath.Base(name), err)
		}
	}
}

// TestDirectCopytruncateRefused truncates the file of a Ring with Direct
// under it, as logrotate's copytruncate does. Writing on at the Ring's
// offset would leave a hole of zero bytes the size of everything written
// before; the Ring must refuse (ErrTruncated), as it does without Direct.
func TestDirectCopytruncateRefused(t *testing.T) {
	r, path := openRingFile(t, &RingOptions{Direct: true})
	defer r.Close()
	mustWrite(t, r, bytes.Repeat([]byte("before the copy\n"), 1000))
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("after the truncation\n"))
	err := r.Flush(t.Context())
	if !errors.Is(err, ErrTruncated) {
		b := readFile(t, path)
		t.Fatalf("Flush after the truncation = %v, want ErrTruncated; the file holds %d bytes, %d of them zero",
			err, len(b), bytes.Count(b, []byte{0}))
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "open it again") {
		t.Errorf("error %q does not name the file and what to do", err)
	}
	if err := r.Close(); !errors.Is(err, ErrTruncated) {
		t.Errorf("Close = %v, want ErrTruncated", err)
	}
}

// TestEmptyWritesCounted writes empty records, alone and between others,
// through each writer. An empty Write is not a record (Ring and Mmap
// count none); whatever a writer counts, Records == WrittenRecords must
// hold once it is closed.
func TestEmptyWritesCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) Writer
	}{
		{"ring", func(t *testing.T) Writer {
			r, err := NewRing(io.Discard, nil)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}},
		{"direct", func(*testing.T) Writer { return NewDirect(io.Discard) }},
		{"buffered", func(*testing.T) Writer { return NewBuffered(io.Discard, 0) }},
		{"slab", func(t *testing.T) Writer {
			s, err := NewSlab(io.Discard, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		for _, seq := range []string{"e", "re", "ere"} { // e: empty, r: a record
			t.Run(tc.name+"/"+seq, func(t *testing.T) {
				w := tc.open(t)
				for _, c := range seq {
					p := []byte("record\n")
					if c == 'e' {
						p = nil
					}
					if n, err := w.Write(p); err != nil || n != len(p) {
						t.Fatalf("Write(%q) = %d, %v", p, n, err)
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				st := w.Stats()
				if st.Records != st.WrittenRecords || st.Bytes != st.WrittenBytes {
					t.Errorf("closed: %d records (%d bytes) accepted, %d (%d bytes) written",
						st.Records, st.Bytes, st.WrittenRecords, st.WrittenBytes)
				}
			})
		}
	}
}

// TestRotateAfterFileDeleted deletes the file of a Ring with Rotate under
// it (an operator freeing space with rm). The records written to the
// deleted file are gone with it, but the next rotation must not fail the
// Ring for good: it starts a new file at the path, and says what happened
// (OnError, Stats.RotationErrors).
func TestRotateAfterFileDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	var reported atomic.Pointer[error]
	r, err := OpenFile(path, &RingOptions{
		Size:    64 << 10,
		Rotate:  &Rotate{MaxBytes: MinRotateBytes},
		OnError: func(err error) { reported.CompareAndSwap(nil, &err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mustWrite(t, r, []byte("into the file deleted\n"))
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	all := writeUntilRotated(t, r, 1, nil)
	all = writeUntilRotated(t, r, 2, all)
	if err := r.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if p := reported.Load(); p == nil || !strings.Contains((*p).Error(), path) {
		t.Errorf("OnError got %v, want an error naming %s", p, path)
	}
	if st := r.Stats(); st.RotationErrors != 1 || st.Rotations != 2 {
		t.Errorf("%d rotations, %d rotation errors; want 2, 1", st.Rotations, st.RotationErrors)
	}
	// The first switch left no backup (there was no file to rename); the
	// second was an ordinary rotation. Its backup and the file hold the
	// records written since the first switch.
	names, contents := rotateFiles(t, vfs.OS(), path)
	if got := bytes.Join(contents, nil); len(names) != 2 || !bytes.HasSuffix(all, got) || len(got) < MinRotateBytes-1<<_markShift-64 {
		t.Errorf("files %v hold %d bytes, want a backup and the file, a full backup's worth, ending the %d bytes written",
			names, len(got), len(all))
	}
}

// TestRotateCountsExistingBytes reopens a log that a previous run left
// part full (a restart), and writes on: the bytes already in the file count
// toward MaxBytes, so no file grows past it. A file within 4 KiB of
// MaxBytes is rotated at once, as a full one is.
func TestRotateCountsExistingBytes(t *testing.T) {
	for _, existing := range []int{10 << 10, MinRotateBytes - 2<<10, MinRotateBytes - 5<<10} {
		t.Run(fmt.Sprint("existing=", existing), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.log")
			old := bytes.Repeat([]byte("an old line of 32 bytes........\n"), existing/32)
			if err := os.WriteFile(path, old, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes}})
			if err != nil {
				t.Fatal(err)
			}
			all := writeUntilRotated(t, r, 3, old)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			names, contents := rotateFiles(t, vfs.OS(), path)
			for i, b := range contents {
				if len(b) > MinRotateBytes {
					t.Errorf("%s holds %d bytes, above MaxBytes %d", names[i], len(b), MinRotateBytes)
				}
			}
			if got := bytes.Join(contents, nil); !bytes.Equal(got, all) {
				t.Errorf("the files hold %d bytes, want the %d written", len(got), len(all))
			}
		})
	}
}

// TestReopenInUse renames the file of a Ring and has another writer open
// a new file at the path before the Ring's Reopen: Reopen is refused with
// ErrInUse, in a message that names the file and the package once.
func TestReopenInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := OpenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	other, err := OpenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, other)
	err = r.Reopen()
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("Reopen = %v, want ErrInUse", err)
	}
	if msg := err.Error(); strings.Count(msg, "writer:") != 1 || !strings.Contains(msg, path) || !strings.HasPrefix(msg, "writer: reopen: ") {
		t.Errorf("Reopen's error %q: want one \"writer:\", then reopen, and the path", msg)
	}
}

// TestReopenFailureKeepsLogging: a Reopen that cannot open the new file
// (here another writer holds it) loses nothing: the Ring writes on to the
// file it has, and Reopen returns the error, whether Reopen itself or the
// flusher, writing records that came after the request, tried the switch.
// The flusher's try is made here by a record written between Reopen's
// request and its flush, as a producer may write it.
func TestReopenFailureKeepsLogging(t *testing.T) {
	for _, flusher := range []bool{false, true} {
		t.Run(fmt.Sprint("flusher=", flusher), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.log")
			r, err := OpenFile(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			mustWrite(t, r, []byte("one\n"))
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			other, err := OpenFile(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			closeAtEnd(t, other)
			if flusher {
				// Reopen's steps, with a record between the request
				// and the flush.
				s := r.sink.(*rotSink)
				req := s.requestReopen(func() uint64 { pos, _ := r.e.Tail(); return pos })
				mustWrite(t, r, []byte("two\n"))
				if err := r.Flush(t.Context()); err != nil {
					t.Fatalf("Flush = %v", err)
				}
				if _, err := s.finishReopen(req); !errors.Is(err, ErrInUse) {
					t.Errorf("Reopen = %v, want ErrInUse", err)
				}
			} else {
				if err := r.Reopen(); !errors.Is(err, ErrInUse) {
					t.Errorf("Reopen = %v, want ErrInUse", err)
				}
				mustWrite(t, r, []byte("two\n"))
			}
			mustWrite(t, r, []byte("three\n"))
			if err := r.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			if got := string(readFile(t, path+".1")); got != "one\ntwo\nthree\n" {
				t.Errorf("the Ring's file holds %q", got)
			}
		})
	}
}

// shortWriter accepts half of every write and reports no error, which
// io.Writer forbids but writers in the wild do.
type shortWriter struct{ collectWriter }

func (s *shortWriter) Write(p []byte) (int, error) {
	s.collectWriter.Write(p[:len(p)/2])
	return len(p) / 2, nil
}

// TestShortWriteNotSilent gives Direct and each batching writer a sink that
// writes short without an error. The bytes it did not take must not count as
// written, and the writer must say so (io.ErrShortWrite), as bufio does;
// a Ring from NewRing writes the rest instead.
func TestShortWriteNotSilent(t *testing.T) {
	rec := []byte("a record that is handed to a short writer\n")
	for _, tc := range []struct {
		name string
		open func(w io.Writer) Writer
	}{
		{"direct", func(w io.Writer) Writer { return NewDirect(w) }},
		{"buffered", func(w io.Writer) Writer { return NewBuffered(w, 0) }},
		{"buffered-large", func(w io.Writer) Writer { return NewBuffered(w, MinBufferedSize) }},
		{"slab", func(w io.Writer) Writer {
			s, err := NewSlab(w, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"slab-large", func(w io.Writer) Writer {
			s, err := NewSlab(w, &SlabOptions{SlabSize: 16})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &shortWriter{}
			w := tc.open(sink)
			p := rec
			if strings.HasSuffix(tc.name, "-large") {
				p = bytes.Repeat(rec, 200) // larger than the buffer: written directly
			}
			_, werr := w.Write(p)
			cerr := w.Close()
			if !errors.Is(werr, io.ErrShortWrite) && !errors.Is(cerr, io.ErrShortWrite) {
				t.Errorf("Write = %v, Close = %v; want io.ErrShortWrite", werr, cerr)
			}
			st := w.Stats()
			if st.WrittenBytes != uint64(len(sink.bytes())) && st.WrittenBytes != 0 {
				t.Errorf("WrittenBytes %d, the sink took %d", st.WrittenBytes, len(sink.bytes()))
			}
			if st.WrittenRecords != 0 {
				t.Errorf("WrittenRecords %d for a record the sink took half of", st.WrittenRecords)
			}
		})
	}
}

// TestRenameDuringSwitch renames the file away (logrotate, run besides the
// built-in rotation) at the worst moment of a switch to a new file: just
// after the Ring opened it. The file is the Ring's all the same, and the
// Ring must go on writing to it, not fail for good because the path no
// longer names it.
func TestRenameDuringSwitch(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprint("reopen=", reopen), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "app.log")
			var armed atomic.Bool
			fsys := &hookFS{FS: vfs.OS(), afterOpen: func(name string) {
				if name == path && armed.CompareAndSwap(true, false) {
					if err := os.Rename(path, path+".moved"); err != nil {
						t.Error(err)
					}
				}
			}}
			r, err := OpenFile(path, &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes}, fsys: fsys})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			all := writeUntilRotated(t, r, 1, nil)
			armed.Store(true)
			if reopen {
				if err := os.Rename(path, path+".1"); err != nil {
					t.Fatal(err)
				}
				if err := r.Reopen(); err != nil {
					t.Fatalf("Reopen = %v", err)
				}
			} else {
				all = writeUntilRotated(t, r, 2, all)
			}
			if armed.Load() {
				t.Fatal("the switch opened no file")
			}
			line := []byte("after the switch\n")
			mustWrite(t, r, line)
			all = append(all, line...)
			if err := r.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			// Every record is in one of the files, once: the backups
			// (their names sort by age), then the renamed ones.
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				if _, ok := backupTime(path, e.Name(), false); ok {
					names = append(names, e.Name())
				}
			}
			names = append(names, filepath.Base(path)+".1", filepath.Base(path)+".moved", filepath.Base(path))
			var got []byte
			for _, name := range names {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
					got = append(got, b...)
				}
			}
			if !bytes.Equal(got, all) {
				t.Errorf("files %v hold %d bytes, want the %d written", names, len(got), len(all))
			}
		})
	}
}

// TestDropDuringCloseIsMarked: with Drop and DropMarkers, Close writes a
// final marker for the drops not yet reported, and waits for room for it
// in a full ring. A Write made meanwhile must not drop its record after
// Close took the count for that marker, where no marker would ever report
// it: it returns ErrClosed. Once closed, the markers report every drop.
func TestDropDuringCloseIsMarked(t *testing.T) {
	g := &gateWriter{open: make(chan struct{})}
	r, err := NewRing(g, &RingOptions{Size: 64 << 10, Full: Drop, DropMarkers: true})
	if err != nil {
		t.Fatal(err)
	}
	var rec []byte
	c := 0
	for ; r.Stats().DroppedRecords < 10; c++ {
		rec = appendRecord(rec[:0], 0, c)
		mustWrite(t, r, rec)
	}
	// Fill the ring to the last byte that a smallest record can take:
	// then not even the final marker fits.
	for d := r.Stats().DroppedRecords; r.Stats().DroppedRecords == d; c++ {
		rec, _ = payload.Append(rec[:0], 0, uint64(c), payload.MinSize)
		mustWrite(t, r, rec)
	}
	closeErr := make(chan error, 1)
	go func() { closeErr <- r.Close() }()
	for !r.closed.Load() {
		runtime.Gosched()
	}
	// Close is under way, and cannot finish before the sink takes bytes.
	for range 10 {
		rec = appendRecord(rec[:0], 0, c)
		c++
		if _, err := r.Write(rec); !errors.Is(err, ErrClosed) {
			t.Fatalf("Write during Close = %v, want ErrClosed", err)
		}
	}
	close(g.open)
	if err := <-closeErr; err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	res := verifyRecords(t, g.bytes(), 1, false, true, nil)
	if res.markedDrops != st.DroppedRecords || st.Records != st.WrittenRecords+st.DroppedRecords {
		t.Errorf("markers report %d drops; stats: %d accepted, %d written, %d dropped",
			res.markedDrops, st.Records, st.WrittenRecords, st.DroppedRecords)
	}
}

// TestOnErrorWritesToRing: OnError logs the sink's failures through the
// Ring itself (a logger that writes to it), while the Ring is full because
// the sink is down. The record OnError writes waits for room, which only
// the flusher makes; the flusher must not be the goroutine waiting, or
// the Ring hangs for good, even after the sink comes back.
func TestOnErrorWritesToRing(t *testing.T) {
	const size, recLen = 64 << 10, 1000
	var r *Ring
	var calls atomic.Int32
	sink := &collectWriter{fail: func(call, n int) (int, error) {
		c := calls.Add(1)
		if c == 1 {
			// Down until the producer has filled the ring: then not even
			// OnError's record fits.
			for r.Stats().QueuedBytes <= size-2*recLen {
				runtime.Gosched()
			}
		}
		if c <= 3 {
			return 0, errors.New("sink down")
		}
		return 0, nil
	}}
	var err error
	r, err = NewRing(sink, &RingOptions{
		Size:            size,
		RetryBackoff:    time.Millisecond,
		RetryMaxBackoff: time.Millisecond,
		OnError: func(err error) {
			// What a logger writing to the Ring does; its error is
			// dropped, as slog drops it.
			r.Write(append(bytes.Repeat([]byte("."), 2*recLen), fmt.Sprintf(" %v\n", err)...))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var want []byte
	for i := range 3 * size / recLen {
		rec, _ := payload.Append(nil, 0, uint64(i), recLen)
		want = append(want, rec...)
	}
	go func() {
		defer close(done)
		for rec := range bytes.Lines(want) {
			if _, err := r.Write(rec); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	within(t, done, "the producer; the Ring hangs")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for line := range bytes.Lines(sink.bytes()) {
		if !bytes.HasPrefix(line, []byte("....")) {
			got = append(got, line...)
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the sink got %d bytes of records, want %d", len(got), len(want))
	}
}

// TestWrittenRecordsNeverGoesBack: Stats().WrittenRecords (exported as a
// Prometheus counter) never decreases while producers write and Stats is
// read at once. It was tailSeq when everything claimed was written, and
// otherwise the count as of the last write that ended at the tail, which
// can be far lower.
func TestWrittenRecordsNeverGoesBack(t *testing.T) {
	r, err := NewRing(io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	const writers = 4
	done := make(chan struct{})
	line := []byte(strings.Repeat("x", 40) + "\n")
	for range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			for !stop.Load() {
				if _, err := r.Write(line); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var last uint64
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		w := r.Stats().WrittenRecords
		if w < last {
			stop.Store(true)
			for range writers {
				<-done
			}
			r.Close()
			t.Fatalf("WrittenRecords went from %d back to %d", last, w)
		}
		last = w
	}
	stop.Store(true)
	for range writers {
		<-done
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.WrittenRecords != st.Records || st.WrittenRecords < last {
		t.Fatalf("after Close: %+v (last seen %d)", st, last)
	}
}
