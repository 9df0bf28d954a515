package writer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecoverLeavesOthersEntries checks that OpenFile's clean-up after a
// crash (recover) takes only regular files for backups and their
// compressed copies: a directory or a symbolic link under a compressed
// backup's name is not a finished compression, so the backup beside it
// keeps its records, and a directory or link under a temporary file's name
// is not ours to remove.
func TestRecoverLeavesOthersEntries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	bdir := backupName(path, at)                    // beside a directory named as its .gz
	blink := backupName(path, at.Add(time.Second))  // beside a link named as its .zst
	tdir := backupName(path, at.Add(2*time.Second)) // a directory named as its .gz.tmp
	for _, b := range []string{bdir, blink, tdir} {
		if err := os.WriteFile(b, []byte("kept\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{bdir + ".gz", tdir + ".gz.tmp"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), blink+".zst"); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFile(path, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{bdir, blink, tdir} {
		if got, err := os.ReadFile(b); err != nil || string(got) != "kept\n" {
			t.Errorf("backup %s: %q, %v: removed as if compressed", filepath.Base(b), got, err)
		}
	}
	for _, d := range []string{bdir + ".gz", tdir + ".gz.tmp", blink + ".zst"} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s, not ours: %v", filepath.Base(d), err)
		}
	}
}

// TestCompressNeverWritesThroughALink: a symbolic link under the name of
// a backup's temporary compressed file (someone else's: rotation makes
// regular files only) is not followed. Compression wrote through it,
// truncating the file it named and filling it with the backup's
// compressed bytes, then renamed the link into the compressed copy's
// place and removed the backup. The compression is refused instead,
// reported, and the backup left as it was.
func TestCompressNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := backupName(path, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if err := os.WriteFile(b, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, b+".gz.tmp"); err != nil {
		t.Fatal(err)
	}
	reported := make(chan error, 16)
	r, err := OpenFile(path, &RingOptions{
		Rotate:  &Rotate{MaxBytes: MinRotateBytes, Compression: Gzip},
		OnError: func(err error) { reported <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != "precious\n" {
		t.Errorf("the file the link names: %q, %v: written through the link", got, err)
	}
	if got, err := os.ReadFile(b); err != nil || string(got) != "kept\n" {
		t.Errorf("backup: %q, %v", got, err)
	}
	if fi, err := os.Lstat(b + ".gz.tmp"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link: %v, %v", fi, err)
	}
	select {
	case err := <-reported:
		if !strings.Contains(err.Error(), b) {
			t.Errorf("reported %v: does not name the backup", err)
		}
	default:
		t.Errorf("the refused compression was not reported (Stats.RotationErrors = %d)", r.Stats().RotationErrors)
	}
}
