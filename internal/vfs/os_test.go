//go:build unix

package vfs_test

import (
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestOSOpenRegularRefusesLinksAndSpecialFiles: OS's OpenRegular and Lock
// neither follow a symbolic link (to a file, or dangling with O_CREATE)
// nor hang on a named pipe; each is refused with an error naming the path
// and what is there, and the link's target is left as it was. Lock
// followed a link named LOCK and wrote its holder text over the target.
func TestOSOpenRegularRefusesLinksAndSpecialFiles(t *testing.T) {
	fsys := vfs.OS()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "user-file")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	danglingTarget := filepath.Join(t.TempDir(), "not-yet")
	if err := os.Symlink(danglingTarget, dangling); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_TRUNC, os.O_RDWR | os.O_CREATE | os.O_TRUNC} {
		_, err := fsys.OpenRegular(link, flag, 0o644)
		wantNotRegular(t, err, link, "a symbolic link")
	}
	_, err := fsys.OpenRegular(dangling, os.O_RDWR|os.O_CREATE, 0o644)
	wantNotRegular(t, err, dangling, "a symbolic link")
	_, err = fsys.Lock(link, "pid 1")
	wantNotRegular(t, err, link, "a symbolic link")
	_, err = fsys.Lock(dangling, "pid 1")
	wantNotRegular(t, err, dangling, "a symbolic link")
	if b, err := os.ReadFile(outside); err != nil || string(b) != "precious" {
		t.Fatalf("link target now %q, %v", b, err)
	}
	if _, err := os.Lstat(danglingTarget); !os.IsNotExist(err) {
		t.Fatalf("dangling link's target was created: %v", err)
	}

	entries, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type() != fs.ModeSymlink {
			t.Fatalf("ReadDir: %s has type %v, want a symbolic link", e.Name(), e.Type())
		}
	}

	if _, err := exec.LookPath("mkfifo"); err == nil {
		fifo := filepath.Join(dir, "fifo")
		if out, err := exec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
			t.Fatalf("mkfifo: %v: %s", err, out)
		}
		for _, flag := range []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR | os.O_CREATE} {
			done := make(chan error, 1)
			go func() {
				_, err := fsys.OpenRegular(fifo, flag, 0o644)
				done <- err
			}()
			select {
			case err := <-done:
				wantNotRegular(t, err, fifo, "a named pipe (FIFO)")
			case <-time.After(time.Minute):
				t.Fatalf("OpenRegular of a named pipe with flag %#x hangs", flag)
			}
		}
	}

	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("unix socket: %v", err)
	}
	defer ln.Close()
	_, err = fsys.OpenRegular(sock, os.O_RDONLY, 0)
	wantNotRegular(t, err, sock, "a socket")
}
