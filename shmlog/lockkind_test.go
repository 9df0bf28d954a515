package shmlog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// TestLockFileKind: PATH.lock that is not a lock file of its own. A
// directory, or a symlink to the log's file 0, whose flock every Log and
// Reader holds shared for its lifetime: Open took the exclusive flock of
// file 0 through the link, then waited for ever for its own shared one.
// Each is refused with an error naming PATH.lock; a symlink to a file of
// its own works.
func TestLockFileKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(path string) error
		ok   bool
	}{
		{"directory", func(path string) error { return os.Mkdir(path+".lock", 0o755) }, false},
		{"symlink to file 0", func(path string) error { return os.Symlink(filepath.Base(path), path+".lock") }, false},
		{"symlink to a file", func(path string) error {
			if err := os.WriteFile(path+".real-lock", nil, 0o644); err != nil {
				return err
			}
			return os.Symlink(filepath.Base(path)+".real-lock", path+".lock")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := logPath(t)
			l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path + ".lock"); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
				if err == nil {
					_, err = l.Append([]byte("x"))
					if cerr := l.Close(); err == nil {
						err = cerr
					}
				}
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Open did not return")
			}
			switch {
			case tc.ok && err != nil:
				t.Fatal(err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), path+".lock")):
				t.Fatalf("Open: %v, want an error naming %s.lock", err, path)
			}
		})
	}
}
