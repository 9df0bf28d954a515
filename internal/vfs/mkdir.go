package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// MkdirAllDurable creates dir and its missing parents, as MkdirAll, and
// makes each directory it created durable. A new directory is durable
// only once its parent is synced, so each one created is synced in its
// parent: syncing only dir's parent would leave the directories above it,
// and everything in dir with them, to a power cut. A dir that exists is
// left as it is, with no further call (an error reading it is MkdirAll's);
// something else there that is not a directory is ENOTDIR, as MkdirAll
// says it.
func MkdirAllDurable(fsys FS, dir string) error {
	var created []string
	var statErr error // of the last directory looked at
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var fi fs.FileInfo
		if fi, statErr = fsys.Stat(d); !errors.Is(statErr, fs.ErrNotExist) {
			if statErr == nil && len(created) == 0 && !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
			}
			break // there, or an error MkdirAll reports
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 && statErr == nil {
		return nil // dir is there
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	for _, d := range created {
		if parent := filepath.Dir(d); parent != d {
			if err := fsys.SyncDir(parent); err != nil {
				return fmt.Errorf("sync directory %s: %w", parent, err)
			}
		}
	}
	return nil
}
