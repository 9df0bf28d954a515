package stream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogDirMissing: a stream whose log directory is gone (removed
// outside the store) does not come back as an empty stream whose sequence
// numbers start again at 1: its calls fail, naming the directory.
func TestLogDirMissing(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	s, err := st.Create("s", nil)
	noErr(t, err)
	for range 3 {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	noErr(t, st.Close())
	logDir := filepath.Join(dir, _streamsDir, "s", _logDir)
	noErr(t, os.RemoveAll(logDir))

	st = mustOpen(t, dir, nil)
	defer st.Close()
	s, err = st.Stream("s")
	noErr(t, err)
	seq, err := s.Publish([]byte("y"))
	if err == nil || !strings.Contains(err.Error(), logDir) {
		t.Fatalf("Publish on a stream whose log directory is gone = seq %d, %v; want an error naming %s", seq, err, logDir)
	}
	if _, err := os.Stat(logDir); !os.IsNotExist(err) {
		t.Fatalf("the log directory was made again (stat: %v)", err)
	}
}

// TestLogDirRemovedWhileOpen: the janitor shuts an open stream whose log
// directory (not the whole stream's) was removed outside the store, as
// it does one whose directory was: its log writes into files no one can
// open again.
func TestLogDirRemovedWhileOpen(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, &Options{IdleTimeout: -1}) // the test makes the janitor's pass
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	logDir := filepath.Join(dir, _streamsDir, "s", _logDir)
	noErr(t, os.RemoveAll(logDir))
	s.checkDir()
	if _, err := s.Publish([]byte("y")); err == nil || !strings.Contains(err.Error(), logDir) {
		t.Fatalf("Publish after the stream's log directory was removed = %v, want an error naming %s", err, logDir)
	}
}
