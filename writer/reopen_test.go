package writer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/appendlog/appendlog/internal/payload"
)

// TestReopenRename does what logrotate's create mode does, over and over,
// while 8 goroutines write: rename the file, then Reopen. The files, in
// rename order and then the current one, hold every record exactly once,
// whole, in per-producer order. A record written just before each Reopen
// is in the renamed file, one written just after it in the new file; the
// renamed file is unlocked once Reopen returns.
func TestReopenRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	// Each producer writes at most perProducer records, so that the test
	// stays small however slowly Reopen goes; they stop early when the
	// reopens are done, or the test fails.
	const producers, reopens, perProducer = 8, 20, 4000
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() {
		stop.Store(true)
		wg.Wait()
		r.Close()
	}()
	counts := make([]uint64, producers+1)
	for p := range producers {
		wg.Go(func() {
			var buf []byte
			for c := uint64(0); c < perProducer && !stop.Load(); c++ {
				buf, _ = payload.Append(buf[:0], p, c, 60+int(c%100))
				if _, err := r.Write(buf); err != nil {
					t.Error(err)
					return
				}
				counts[p] = c + 1
			}
		})
	}
	var files []string
	var mark []byte
	main := uint64(0) // the main goroutine's counter, writer id producers
	for i := range reopens {
		mark, _ = payload.Append(mark[:0], producers, main, 50)
		mustWrite(t, r, mark)
		before := bytes.Clone(mark)
		main++
		old := filepath.Join(dir, fmt.Sprintf("app.log.%d", i))
		if err := os.Rename(path, old); err != nil {
			t.Fatal(err)
		}
		if err := r.Reopen(); err != nil {
			t.Fatal(err)
		}
		files = append(files, old)
		l, err := lockFile(old, 0o644)
		if err != nil {
			t.Fatalf("the renamed file is still locked after Reopen: %v", err)
		}
		l.Close()
		mark, _ = payload.Append(mark[:0], producers, main, 50)
		mustWrite(t, r, mark)
		main++
		if !bytes.Contains(readFile(t, old), before) {
			t.Fatalf("reopen %d: the record written before Reopen is not in the renamed file", i)
		}
	}
	stop.Store(true)
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files = append(files, path)
	counts[producers] = main
	if n := r.Stats().Reopens; n != reopens {
		t.Errorf("Stats.Reopens = %d, want %d", n, reopens)
	}
	k, err := payload.NewChecker(payload.Options{Expect: counts})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		b := readFile(t, f)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Errorf("%s ends inside a record", f)
		}
		if i > 0 {
			// The first record of each new file is the main goroutine's
			// record written after Reopen, or a producer's written
			// meanwhile: never a piece of one.
			line, _, _ := bytes.Cut(b, []byte("\n"))
			if _, _, err := payload.Decode(append(line, '\n')); err != nil {
				t.Errorf("%s starts inside a record: %v", f, err)
			}
		}
		k.Write(b)
	}
	if res := k.Finish(); !res.OK() {
		t.Fatal(res.Err())
	}
}

// TestReopenSameFile: Reopen with nothing renamed keeps the file (it is
// not locked against itself), and records go on after the old ones.
func TestReopenSameFile(t *testing.T) {
	r, path := openRingFile(t, nil)
	mustWrite(t, r, []byte("one\n"))
	if err := r.Reopen(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, []byte("two\n"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, path)); got != "one\ntwo\n" {
		t.Errorf("file holds %q", got)
	}
	if n := r.Stats().Reopens; n != 0 {
		t.Errorf("Stats.Reopens = %d after reopening the same file", n)
	}
}

// TestReopenMisuse: Reopen on a Ring that cannot reopen, or after Close,
// returns an error and changes nothing.
func TestReopenMisuse(t *testing.T) {
	r, err := NewRing(io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reopen(); err == nil {
		t.Error("Reopen of a NewRing succeeded")
	}
	mustWrite(t, r, []byte("x\n"))
	closeAtEnd(t, r)

	f, path := openRingFile(t, nil)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Reopen(); !errors.Is(err, ErrClosed) {
		t.Errorf("Reopen after Close = %v, want ErrClosed", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}

	d, _ := openRingFile(t, &RingOptions{Direct: true})
	defer d.Close()
	if err := d.Reopen(); err == nil {
		t.Error("Reopen of a Direct Ring succeeded")
	}
}

// TestReopenIdle: with no producer running, Reopen makes the switch
// itself (no flush will reach the cut): the record before it is in the
// renamed file, the one after it in the new one.
func TestReopenIdle(t *testing.T) {
	r, path := openRingFile(t, nil)
	mustWrite(t, r, []byte("before\n"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Reopen created no new file: %v", err)
	}
	mustWrite(t, r, []byte("after\n"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if old, cur := string(readFile(t, path+".1")), string(readFile(t, path)); old != "before\n" || cur != "after\n" {
		t.Errorf("renamed file %q, new file %q", old, cur)
	}
}

// TestCopytruncateRefused does what logrotate's copytruncate does (copy
// the file, then truncate it to 0) under a Ring between two flushes: the
// Ring's next write is refused with an error wrapping ErrTruncated that
// names the file, every later call returns it, and the file holds no hole
// (no byte at all was written after the truncation). The copy holds every
// record written before it.
func TestCopytruncateRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := OpenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for c := range 100 {
		buf, _ = payload.Append(buf[:0], 0, uint64(c), 80)
		mustWrite(t, r, buf)
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)
	if err := os.WriteFile(path+".1", before, 0o644); err != nil { // copy
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil { // truncate
		t.Fatal(err)
	}
	buf, _ = payload.Append(buf[:0], 0, 100, 80)
	mustWrite(t, r, buf)
	err = r.Flush(t.Context())
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Flush after copytruncate = %v, want ErrTruncated naming %s", err, path)
	}
	if _, err := r.Write(buf); !errors.Is(err, ErrTruncated) {
		t.Errorf("Write after the refusal = %v, want ErrTruncated", err)
	}
	if cerr := r.Close(); !errors.Is(cerr, ErrTruncated) {
		t.Errorf("Close = %v, want ErrTruncated", cerr)
	}
	if b := readFile(t, path); len(b) != 0 {
		t.Errorf("the truncated file holds %d bytes, %q...", len(b), b[:min(len(b), 20)])
	}
	k, _ := payload.NewChecker(payload.Options{Expect: []uint64{100}})
	k.Write(readFile(t, path+".1"))
	if res := k.Finish(); !res.OK() {
		t.Error(res.Err())
	}
}
