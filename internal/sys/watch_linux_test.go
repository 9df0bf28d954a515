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
