package writer

import (
	"io"
	"os"

	"github.com/appendlog/appendlog/internal/sys"
)

// The writers' test seams are unexported option fields, so that tests
// replace them per writer and no package-level hook exists: RingOptions
// fsys, lockFile, syncDir and clock, MmapOptions syncDir. This file holds
// the stand-ins the tests put there (the fake clock is clock.Fake, made by
// newFakeClock).

// noLock stands in for lockFile where the file is not a real one (an
// in-memory vfs.FS).
func noLock(string, os.FileMode) (io.Closer, error) { return &fileLock{}, nil }

// recordSyncDir returns a syncDir that appends each directory to synced,
// then syncs it.
func recordSyncDir(synced *[]string) func(string) error {
	return func(dir string) error {
		*synced = append(*synced, dir)
		return sys.SyncDir(dir)
	}
}

// failSyncDir returns a syncDir that fails with err.
func failSyncDir(err error) func(string) error {
	return func(string) error { return err }
}
