package writer

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRotateAfterCreateMode: logrotate's create mode renames the file and
// creates an empty one at its path (with the mode and owner it is told),
// and the Ring's own rotation comes before Reopen. The file at the path is
// then not the Ring's: rotation must not rename it into a backup of its
// own (pruned and compressed with the Ring's, and its mode lost) but
// take it as the next file, as Reopen would, and report that the file
// was renamed by another program. The renamed file and the file at the
// path hold every record, in order.
func TestRotateAfterCreateMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	var reported atomic.Pointer[error]
	r, err := OpenFile(path, &RingOptions{
		Size:    64 << 10,
		Rotate:  &Rotate{MaxBytes: MinRotateBytes},
		OnError: func(err error) { reported.CompareAndSwap(nil, &err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first := []byte("into the renamed file\n")
	mustWrite(t, r, first)
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	created, err := f.Stat()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	all := writeUntilRotated(t, r, 1, first)
	if err := r.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if fi, err := os.Stat(path); err != nil || !os.SameFile(fi, created) {
		t.Errorf("the file logrotate created is no longer at %s (renamed into a backup?): %v", path, err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want logrotate's 0600", path, fi.Mode().Perm())
	}
	if p := reported.Load(); p == nil || !strings.Contains((*p).Error(), path) {
		t.Errorf("OnError got %v, want an error naming %s", p, path)
	}
	if st := r.Stats(); st.RotationErrors != 1 || st.Rotations != 1 {
		t.Errorf("%d rotations, %d rotation errors; want 1, 1", st.Rotations, st.RotationErrors)
	}
	renamed := readFile(t, path+".1")
	if got := append(bytes.Clone(renamed), logContents(t, path)...); !bytes.Equal(got, all) {
		t.Errorf("the renamed file and the log hold %d bytes, want the %d written, in order", len(got), len(all))
	}
	if !bytes.HasPrefix(renamed, first) || renamed[len(renamed)-1] != '\n' {
		t.Errorf("the renamed file holds %q...: want the records written before the rotation, whole", renamed[:min(len(renamed), 40)])
	}
}
