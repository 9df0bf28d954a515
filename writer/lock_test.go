package writer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// _lockChildEnv names the environment variable that makes the test binary
// run lockChild instead of the tests: "<kind> <path>".
const _lockChildEnv = "APPENDLOG_WRITER_LOCK_CHILD"

// lockKind is a writer that opens its file itself and so locks it.
type lockKind struct {
	name string
	open func(path string) (Writer, error)
}

func lockKinds() []lockKind {
	return []lockKind{
		{"ring-file", func(path string) (Writer, error) {
			return OpenFile(path, &RingOptions{Size: 64 << 10})
		}},
		{"ring-direct", func(path string) (Writer, error) {
			return OpenFile(path, &RingOptions{Size: 64 << 10, Direct: true})
		}},
		{"mmap", func(path string) (Writer, error) {
			return OpenMmap(path, &MmapOptions{ChunkSize: 64 << 10})
		}},
	}
}

func lockKindNamed(name string) (lockKind, bool) {
	for _, k := range lockKinds() {
		if k.name == name {
			return k, true
		}
	}
	return lockKind{}, false
}

// openOrSkip opens path with k, skipping the test where O_DIRECT is not
// supported.
func openOrSkip(t *testing.T, k lockKind, path string) Writer {
	t.Helper()
	w, err := k.open(path)
	if errors.Is(err, ErrDirectUnsupported) {
		t.Skipf("%s: %v", k.name, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", k.name, err)
	}
	return w
}

// writeLines writes lines "<tag>-<i>\n" for i in [from, to) through w.
func writeLines(t *testing.T, w Writer, tag string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := fmt.Fprintf(w, "%s-%d\n", tag, i); err != nil {
			t.Fatalf("write %s-%d: %v", tag, i, err)
		}
	}
}

// lines returns what writeLines(tag, from, to) writes.
func lines(tag string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%s-%d\n", tag, i)
	}
	return b.String()
}

// checkInUse checks that err is the refusal of a second writer on path
// held by pid; self says whether the holder is this process.
func checkInUse(t *testing.T, err error, path string, pid int, self bool) {
	t.Helper()
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: %v, want an error wrapping ErrInUse", err)
	}
	msg := err.Error()
	for _, want := range []string{"writer: open " + path + ": ", "in use by another writer", fmt.Sprintf("pid %d)", pid)} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}
	if got := strings.Contains(msg, "in this process"); got != self {
		t.Errorf("message %q: says \"in this process\" = %v, want %v", msg, got, self)
	}
	if strings.Contains(msg, "sys:") || strings.Contains(msg, "locked") {
		t.Errorf("message %q has an internal package's words", msg)
	}
}

// TestOneWriterPerFile: while one writer has a file open, a second open of
// it by any writer kind in the same process fails, naming the file and this
// process, and changes nothing in the file; the first writer's records are
// all there; once the first is closed the file opens again.
func TestOneWriterPerFile(t *testing.T) {
	for _, first := range lockKinds() {
		for _, second := range lockKinds() {
			t.Run(first.name+"/"+second.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "app.log")
				w1 := openOrSkip(t, first, path)
				writeLines(t, w1, "a", 0, 100)
				if err := w1.Sync(); err != nil {
					t.Fatal(err)
				}
				before := readFile(t, path)
				w2, err := second.open(path)
				if errors.Is(err, ErrDirectUnsupported) {
					w1.Close()
					t.Skipf("%s: %v", second.name, err)
				}
				if err == nil {
					w2.Write([]byte("b-0\n"))
					w2.Close()
					w1.Close()
					t.Fatalf("second open of %s succeeded", path)
				}
				checkInUse(t, err, path, os.Getpid(), true)
				if after := readFile(t, path); !bytes.Equal(after, before) {
					t.Errorf("the refused open changed the file: %d bytes, were %d", len(after), len(before))
				}
				writeLines(t, w1, "a", 100, 200)
				if err := w1.Close(); err != nil {
					t.Fatal(err)
				}
				want := lines("a", 0, 200)
				if got := string(readFile(t, path)); got != want {
					t.Fatalf("file after the first writer closed: %d bytes, want %d:\n%.200q", len(got), len(want), got)
				}
				w3 := openOrSkip(t, second, path)
				writeLines(t, w3, "b", 0, 10)
				if err := w3.Close(); err != nil {
					t.Fatal(err)
				}
				if got, want := string(readFile(t, path)), want+lines("b", 0, 10); got != want {
					t.Errorf("file after reopen: %d bytes, want %d", len(got), len(want))
				}
			})
		}
	}
}

// lockChild runs in a child process: it opens spec's path with spec's
// writer kind, writes one line, syncs, prints "ready" and holds the file
// until its stdin closes, then closes the writer.
func lockChild(spec string) {
	kind, path, _ := strings.Cut(spec, " ")
	k, ok := lockKindNamed(kind)
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown writer kind %q\n", kind)
		os.Exit(2)
	}
	w, err := k.open(path)
	if errors.Is(err, ErrDirectUnsupported) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(_exitDirectUnsupported)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := w.Write([]byte("child\n")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := w.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	if err := w.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// TestOneWriterPerFileAcrossProcesses: while a child process holds the
// file, every writer kind's open fails naming the child's pid; after the
// child closed its writer and exited, the file opens again and holds the
// child's line.
func TestOneWriterPerFileAcrossProcesses(t *testing.T) {
	for _, holder := range lockKinds() {
		t.Run(holder.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.log")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), _lockChildEnv+"="+holder.name+" "+path,
				// A race-enabled child otherwise sleeps 1 s at exit.
				"GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" {
				in.Close()
				err := cmd.Wait()
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.ExitCode() == _exitDirectUnsupported {
					t.Skipf("O_DIRECT unsupported: %s", stderr.Bytes())
				}
				t.Fatalf("child printed %q: %v\n%s", line, err, stderr.Bytes())
			}
			for _, k := range lockKinds() {
				w, err := k.open(path)
				if errors.Is(err, ErrDirectUnsupported) {
					continue
				}
				if err == nil {
					w.Close()
					in.Close()
					cmd.Wait()
					t.Fatalf("%s: open of a file another process writes succeeded", k.name)
				}
				checkInUse(t, err, path, cmd.Process.Pid, false)
			}
			in.Close()
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v\n%s", err, stderr.Bytes())
			}
			w := openOrSkip(t, lockKinds()[0], path)
			writeLines(t, w, "p", 0, 1)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := string(readFile(t, path)), "child\n"+lines("p", 0, 1); got != want {
				t.Errorf("file %q, want %q", got, want)
			}
		})
	}
}

// TestInUseMessage: the refusal reads the same whatever the platform can
// tell about the holder.
func TestInUseMessage(t *testing.T) {
	cases := []struct {
		err  *inUseError
		want string
	}{
		{&inUseError{path: "/var/log/app.log", pid: 1234}, "writer: open /var/log/app.log: in use by another writer (pid 1234)"},
		{&inUseError{path: "/var/log/app.log", pid: 1234, self: true}, "writer: open /var/log/app.log: in use by another writer in this process (pid 1234)"},
		{&inUseError{path: "app.log"}, "writer: open app.log: in use by another writer (pid unknown)"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if !errors.Is(c.err, ErrInUse) {
			t.Errorf("%q does not wrap ErrInUse", c.err)
		}
	}
}

// TestDevicesAreNotLocked: only regular files are locked; two writers may
// open /dev/null.
func TestDevicesAreNotLocked(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/null")
	}
	l1, err := lockFile(os.DevNull, DefaultPerm)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := lockFile(os.DevNull, DefaultPerm)
	if err != nil {
		t.Errorf("second lock of %s: %v", os.DevNull, err)
	} else if err := l2.Close(); err != nil {
		t.Error(err)
	}
	if err := l1.Close(); err != nil {
		t.Error(err)
	}
}

// TestDeviceFile: a Ring on a device writes to it, and Sync and Close do
// not fail on the device's missing fdatasync or its size of 0 (which is
// not a copytruncate); rotation of a device is refused before anything is
// renamed.
func TestDeviceFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/null")
	}
	r, err := OpenFile(os.DevNull, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := []byte("a record for /dev/null\n")
	for i := 0; i < 1000; i++ {
		if _, err := r.Write(rec); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if i%100 == 0 {
			if err := r.Flush(context.Background()); err != nil {
				t.Fatalf("flush after %d: %v", i, err)
			}
		}
	}
	if err := r.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := r.Stats(); st.WrittenRecords != 1000 {
		t.Fatalf("written %d records, want 1000", st.WrittenRecords)
	}
	_, err = OpenFile(os.DevNull, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("rotating %s: %v, want a refusal", os.DevNull, err)
	}
	if _, err := os.Stat(os.DevNull); err != nil {
		t.Fatal(err)
	}
}

// TestOpenFileRenamedWhileOpened: a file renamed away between OpenFile's
// lock and its open (logrotate's rename as the service starts) leaves the
// Ring locking the file it writes: the lock is taken again on the new file
// at the path, so a second OpenFile of the path is refused, and the file
// renamed away gets nothing.
func TestOpenFileRenamedWhileOpened(t *testing.T) {
	for _, o := range []struct {
		name string
		opts RingOptions
	}{
		{"plain", RingOptions{}},
		{"rotate", RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}}},
		{"direct", RingOptions{Direct: true}},
	} {
		t.Run(o.name, func(t *testing.T) {
			dir := t.TempDir()
			path, away := filepath.Join(dir, "app.log"), filepath.Join(dir, "app.log.1")
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			locks := 0
			opts := o.opts
			opts.lockFile = func(p string, perm os.FileMode) (io.Closer, error) {
				l, err := lockFile(p, perm)
				if locks++; locks == 1 {
					if err := os.Rename(p, away); err != nil {
						t.Error(err)
					}
				}
				return l, err
			}
			w, err := OpenFile(path, &opts)
			if errors.Is(err, ErrDirectUnsupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			writeLines(t, w, "a", 0, 100)
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			w2, err := OpenFile(path, nil)
			if err == nil {
				w2.Close()
				w.Close()
				t.Fatalf("a second OpenFile of %s succeeded: the first Ring does not lock the file it writes", path)
			}
			checkInUse(t, err, path, os.Getpid(), true)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := string(readFile(t, path)), lines("a", 0, 100); got != want {
				t.Errorf("%s holds %d bytes, want the 100 lines (%d bytes)", path, len(got), len(want))
			}
			if b := readFile(t, away); len(b) != 0 {
				t.Errorf("the file renamed away holds %d bytes", len(b))
			}
		})
	}
}
