//go:build linux

package stream

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMetaNotRegular: a metadata file that is a named pipe makes Open
// (and Describe) fail naming it, instead of blocking for ever in open(2);
// a symbolic link where a metadata file's temporary file goes is refused,
// and the file it points to, outside the store, is left as it is.
func TestMetaNotRegular(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		dir := t.TempDir()
		noErr(t, mustOpen(t, dir, nil).Close())
		marker := filepath.Join(dir, _storeFile)
		noErr(t, os.Remove(marker))
		if out, err := exec.Command("mkfifo", marker).CombinedOutput(); err != nil {
			t.Skipf("mkfifo(1): %v: %s", err, out)
		}
		for _, call := range []struct {
			name string
			fn   func() error
		}{
			{"Open", func() error {
				st, err := Open(dir, nil)
				if err == nil {
					st.Close()
				}
				return err
			}},
			{"Describe", func() error { _, err := Describe(dir); return err }},
		} {
			done := make(chan error, 1)
			go func() { done <- call.fn() }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), marker) {
					t.Errorf("%s with %s a named pipe = %v, want an error naming it", call.name, marker, err)
				}
			case <-time.After(5 * time.Second):
				// Unblock the open(2) so that the goroutine ends.
				if w, err := os.OpenFile(marker, os.O_WRONLY, 0); err == nil {
					w.Close()
				}
				<-done
				t.Errorf("%s blocked opening %s, a named pipe", call.name, marker)
			}
		}
	})
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		outside := filepath.Join(t.TempDir(), "precious")
		noErr(t, os.WriteFile(outside, []byte("precious"), 0o644))
		st := mustOpen(t, dir, nil)
		defer st.Close()
		s, err := st.Create("s", nil)
		noErr(t, err)
		gdir := filepath.Join(dir, _streamsDir, "s", _groupsDir)
		noErr(t, os.Symlink(outside, filepath.Join(gdir, "g.json"+_tmpSuffix)))
		g, err := s.Group("g", nil)
		if err == nil {
			g.Close()
		} else if !strings.Contains(err.Error(), "g.json") {
			t.Errorf("Group with its file's temporary name a symbolic link = %v, want an error naming it", err)
		}
		if b, err := os.ReadFile(outside); err != nil || string(b) != "precious" {
			t.Errorf("the file the link points to, outside the store, now holds %q (%v)", b, err)
		}
		if _, err := os.Lstat(outside); errors.Is(err, os.ErrNotExist) {
			t.Errorf("the file the link points to is gone")
		}
	})
}

// TestDeleteFollowsNoLink: deleting a stream removes a symbolic link in
// its directory, never what the link points to outside the store.
func TestDeleteFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	precious := filepath.Join(outside, "precious")
	noErr(t, os.WriteFile(precious, []byte("precious"), 0o644))
	st := mustOpen(t, dir, nil)
	defer st.Close()
	_, err := st.Create("s", nil)
	noErr(t, err)
	sdir := filepath.Join(dir, _streamsDir, "s")
	noErr(t, os.Symlink(outside, filepath.Join(sdir, _logDir, "backup")))
	noErr(t, st.Delete("s"))
	if b, err := os.ReadFile(precious); err != nil || string(b) != "precious" {
		t.Fatalf("Delete removed %s, outside the store, through a link in the stream's directory: %q, %v", precious, b, err)
	}
	if _, err := os.Lstat(sdir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stream's directory is still there: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, _streamsDir)); len(ents) != 0 {
		t.Fatalf("Delete left %v in streams/", ents)
	}
}
