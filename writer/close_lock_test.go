package writer

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestCloseHoldsLockUntilJanitorDone: Close releases the file's lock only
// once the janitor has finished compressing and pruning. It released it
// first, so a second writer (a program restarted while the first closes,
// a reload that opens the log again) could open the file while the first
// one's janitor was still at work in the directory: its clean-up took the
// compression under way for a crash's leftover, and both compressed the
// same backup into one temporary file, the first renaming it into place,
// and removing the backup, while the second was rewriting it from the
// start. Here the janitor is held inside its compression while Close
// runs; the file must stay locked until it is let go.
func TestCloseHoldsLockUntilJanitorDone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	inCompress, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	o := faultyFS(func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if op == vfs.OpWrite && strings.HasSuffix(name, ".gz.tmp") {
			once.Do(func() { close(inCompress); <-release })
		}
		return n, nil
	})
	o.Size = 64 << 10
	o.Rotate = &Rotate{MaxBytes: MinRotateBytes, Compression: Gzip}
	r, err := OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	writeUntilRotated(t, r, 1, nil)
	<-inCompress // the janitor is compressing the backup
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	// Released with the current file, the lock is released as soon as
	// Close runs: a second writer gets in within the deadline. Held, it
	// is not released before the janitor is let go, whatever the
	// deadline.
	var second *Ring
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if second, err = OpenFile(path, nil); !errors.Is(err, ErrInUse) {
			break
		}
	}
	if err == nil {
		t.Errorf("a second writer opened the file while the first one's janitor was compressing")
		second.Close()
	} else if !errors.Is(err, ErrInUse) {
		t.Errorf("second OpenFile = %v, want ErrInUse", err)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v", err)
	}
	third, err := OpenFile(path, nil)
	if err != nil {
		t.Fatalf("OpenFile after Close = %v", err)
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
}
