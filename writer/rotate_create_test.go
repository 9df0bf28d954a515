package writer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
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

// TestRotateAfterCreateModeCannotOpen: as TestRotateAfterCreateMode, but
// the file logrotate created cannot be opened (logrotate made it for
// another user). Nothing was renamed or created, so the rotation fails
// as a Reopen that cannot open the file does: it is reported, and the
// Ring writes on to the file it has, whole records, instead of failing
// for good. The file logrotate made is left as it was.
func TestRotateAfterCreateModeCannotOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	var refuse atomic.Bool
	o := faultyFS(func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if op == vfs.OpOpen && name == path && refuse.Load() {
			return 0, syscall.EACCES
		}
		return n, nil
	})
	reported := make(chan error, 64)
	o.Size = 64 << 10
	o.Rotate = &Rotate{MaxBytes: MinRotateBytes}
	o.OnError = func(err error) { reported <- err }
	r, err := OpenFile(path, o)
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
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	created, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	all := bytes.Clone(first)
	for i := 0; len(all) < 3*MinRotateBytes; i++ {
		line := fmt.Appendf(nil, "line %06d of 64 bytes, padded .......................\n", i)
		mustWrite(t, r, line)
		all = append(all, line...)
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("Flush = %v: the Ring failed for good", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	close(reported)
	refused := 0
	for err := range reported {
		if errors.Is(err, syscall.EACCES) {
			refused++
			if !strings.Contains(err.Error(), path) {
				t.Errorf("reported %v: does not name %s", err, path)
			}
		}
	}
	if refused == 0 {
		t.Errorf("the failed open of %s was not reported (Stats.RotationErrors = %d)", path, r.Stats().RotationErrors)
	}
	if st := r.Stats(); st.Rotations != 0 {
		t.Errorf("%d rotations, want 0", st.Rotations)
	}
	if got := readFile(t, path+".1"); !bytes.Equal(got, all) {
		t.Errorf("the renamed file holds %d bytes, want all %d written", len(got), len(all))
	}
	if fi, err := os.Stat(path); err != nil || !os.SameFile(fi, created) || fi.Size() != 0 {
		t.Errorf("the file logrotate created: %v, %v", fi, err)
	}
}
