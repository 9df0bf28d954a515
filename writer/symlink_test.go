package writer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestRotateThroughSymlink: a log path that is a symbolic link is followed
// once, at OpenFile: rotation renames the file the link names, in that
// file's directory, and creates the next file there, so the link goes on
// naming the live log and every backup is a regular file beside it that
// compression and pruning handle. Renaming the link itself (what
// lumberjack does) would leave a backup that is a link, which the Ring
// never compresses or prunes, to a file no rotation touches again, and
// put a regular file where the user's link was.
func TestRotateThroughSymlink(t *testing.T) {
	// mkdirs makes the directories under root.
	mkdirs := func(t *testing.T, root string, dirs ...string) {
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name string
		// setup makes a link under root and returns it, and the path of
		// the file it names in the end.
		setup func(t *testing.T, root string) (link, target string)
		codec Compression
	}{
		{"absolute", func(t *testing.T, root string) (string, string) {
			mkdirs(t, root, "logs", "data")
			link, target := filepath.Join(root, "logs", "app.log"), filepath.Join(root, "data", "real.log")
			if err := os.WriteFile(target, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, target, link)
			return link, target
		}, NoCompression},
		{"relative-chain", func(t *testing.T, root string) (string, string) {
			// logs/app.log -> ../data/mid.log -> real.log (in data).
			mkdirs(t, root, "logs", "data")
			link := filepath.Join(root, "logs", "app.log")
			mustSymlink(t, filepath.Join("..", "data", "mid.log"), link)
			mustSymlink(t, "real.log", filepath.Join(root, "data", "mid.log"))
			return link, filepath.Join(root, "data", "real.log")
		}, Gzip},
		{"dangling", func(t *testing.T, root string) (string, string) {
			// The file does not exist yet: OpenFile creates it where the
			// link points, as open(2) through the link would.
			mkdirs(t, root, "logs", "data")
			link, target := filepath.Join(root, "logs", "app.log"), filepath.Join(root, "data", "real.log")
			mustSymlink(t, target, link)
			return link, target
		}, NoCompression},
		{"dotdot-after-linked-dir", func(t *testing.T, root string) (string, string) {
			// logs is a link to far/logs, and logs/app.log ->
			// ../data/real.log: ".." leaves far/logs, so the file is
			// far/data/real.log, not data/real.log as the text reads.
			mkdirs(t, root, "far/logs", "far/data", "data")
			mustSymlink(t, filepath.Join(root, "far", "logs"), filepath.Join(root, "logs"))
			link := filepath.Join(root, "logs", "app.log")
			mustSymlink(t, filepath.Join("..", "data", "real.log"), link)
			return link, filepath.Join(root, "far", "data", "real.log")
		}, NoCompression},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			link, target := tc.setup(t, t.TempDir())
			linkDir, dataDir := filepath.Dir(link), filepath.Dir(target)
			linkText, err := os.Readlink(link)
			if err != nil {
				t.Fatal(err)
			}
			rot := &Rotate{MaxBytes: MinRotateBytes, Compression: tc.codec}
			r, err := OpenFile(link, &RingOptions{Size: 64 << 10, Rotate: rot})
			if err != nil {
				t.Fatal(err)
			}
			expect := writeRecords(t, r, 4, 400)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			st := r.Stats()
			if st.Rotations < 2 {
				t.Fatalf("%d rotations, want several", st.Rotations)
			}
			if st.RotationErrors != 0 {
				t.Errorf("%d rotation errors", st.RotationErrors)
			}

			// The link is where it was, as it was.
			fi, err := os.Lstat(link)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("%s is now %v, want the symbolic link it was", link, fi.Mode())
			}
			if got, _ := os.Readlink(link); got != linkText {
				t.Errorf("%s links to %q, want %q", link, got, linkText)
			}
			ents, err := os.ReadDir(linkDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("the link's directory holds %v, want the link alone (backups belong beside the file)", names)
			}

			// The backups are regular files beside the target, and with it
			// they hold the log.
			names, contents := rotateFiles(t, vfs.OS(), target)
			if uint64(len(names)) != st.Rotations+1 {
				t.Errorf("%d files beside %s after %d rotations: %v", len(names), target, st.Rotations, names)
			}
			for _, n := range names {
				fi, err := os.Lstat(filepath.Join(dataDir, n))
				if err != nil {
					t.Fatal(err)
				}
				if !fi.Mode().IsRegular() {
					t.Errorf("%s is %v, want a regular file", n, fi.Mode())
				}
				if n != filepath.Base(target) && !strings.HasSuffix(n, ".log"+compressedExt(tc.codec)) {
					t.Errorf("backup %s with Compression %d", n, tc.codec)
				}
			}
			checkRotated(t, names, contents, expect, rot.MaxBytes)
			// The link shows the live file.
			if got := readFile(t, link); string(got) != string(contents[len(contents)-1]) {
				t.Errorf("reading through the link gives %d bytes, the current file holds %d", len(got), len(contents[len(contents)-1]))
			}
		})
	}
}

// TestRotateSymlinkLoop: a link that leads back to itself is refused with
// an error naming the path, and nothing is created.
func TestRotateSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	mustSymlink(t, "b.log", a)
	mustSymlink(t, "a.log", b)
	r, err := OpenFile(a, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}})
	if err == nil {
		r.Close()
		t.Fatal("OpenFile through a loop of links succeeded")
	}
	if !strings.Contains(err.Error(), a) {
		t.Errorf("error %q does not name %s", err, a)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Errorf("the directory holds %d entries after a refused open, want the 2 links", len(ents))
	}
}

// TestRotateSymlinkToDevice: a link to something that is not a regular
// file (a device) is refused, as the device itself is, with an error that
// names both the link and what it names.
func TestRotateSymlinkToDevice(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil {
		t.Skipf("no %s: %v", os.DevNull, err)
	}
	link := filepath.Join(t.TempDir(), "app.log")
	mustSymlink(t, os.DevNull, link)
	r, err := OpenFile(link, &RingOptions{Rotate: &Rotate{MaxBytes: MinRotateBytes}})
	if err == nil {
		r.Close()
		t.Fatalf("OpenFile with Rotate through a link to %s succeeded", os.DevNull)
	}
	for _, want := range []string{link, os.DevNull, "not a regular file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
}
