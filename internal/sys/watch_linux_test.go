//go:build linux

package sys

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatcher: Wait reports a file created and a file written in the
// directory, and times out when nothing happens.
func TestWatcher(t *testing.T) {
	dir := t.TempDir()
	w, err := WatchDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Notifies() {
		t.Fatal("no inotify on Linux")
	}
	if changed, err := w.Wait(10 * time.Millisecond); changed || err != nil {
		t.Fatalf("Wait with nothing changed = %v, %v", changed, err)
	}
	f, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if changed, err := w.Wait(10 * time.Second); !changed || err != nil {
		t.Fatalf("Wait after a create = %v, %v", changed, err)
	}
	if changed, _ := w.Wait(0); changed {
		t.Fatal("the create's events were not all consumed")
	}
	if _, err := f.WriteAt([]byte("x"), 100); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Wait(10 * time.Second); !changed || err != nil {
		t.Fatalf("Wait after a write = %v, %v", changed, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Wait(time.Millisecond); err == nil {
		t.Fatal("Wait after Close succeeded")
	}
	if _, err := WatchDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("watching a missing directory succeeded")
	}
}

// TestWatcherWaitsItsWholeTimeout: with nothing changing, Wait returns
// only once its timeout has passed, also for a timeout that is not whole
// milliseconds. poll(2) takes milliseconds, and rounding down made
// Wait(500µs) return at once and Wait(1.5ms) after one millisecond.
func TestWatcherWaitsItsWholeTimeout(t *testing.T) {
	w, err := WatchDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, d := range []time.Duration{500 * time.Microsecond, 1500 * time.Microsecond} {
		start := time.Now()
		if changed, err := w.Wait(d); changed || err != nil {
			t.Fatalf("Wait(%v) with nothing changed = %v, %v", d, changed, err)
		}
		if got := time.Since(start); got < d {
			t.Errorf("Wait(%v) returned after %v", d, got)
		}
	}
}
