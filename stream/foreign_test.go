package stream

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenForeignStreamsDir: a directory with no STORE whose streams
// subdirectory holds anything is not a store a killed Open left (that
// leaves streams empty): Open refuses it, naming it, and neither writes
// into it nor removes what looks like an unfinished Create or Delete.
func TestOpenForeignStreamsDir(t *testing.T) {
	for _, entry := range []string{".del-photos", ".new-x", "data"} {
		t.Run(entry, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, _streamsDir, entry)
			noErr(t, os.MkdirAll(p, 0o755))
			noErr(t, os.WriteFile(filepath.Join(p, "keep.txt"), []byte("precious"), 0o644))
			st, err := Open(dir, nil)
			if err == nil {
				st.Close()
			}
			if !errors.Is(err, ErrNotStore) {
				t.Errorf("Open of a directory whose streams/ holds %s = %v, want ErrNotStore", entry, err)
			}
			if _, err := os.Stat(filepath.Join(p, "keep.txt")); err != nil {
				t.Errorf("Open removed a foreign file: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, _storeFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open wrote %s into a foreign directory (stat: %v)", _storeFile, err)
			}
		})
	}
}
