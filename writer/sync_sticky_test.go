package writer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncingWriter is a collectWriter with a Sync whose results are scripted
// per call (1-based): as fsync on Linux, a sync after a failed one may
// succeed though the pages it should have written were dropped.
type syncingWriter struct {
	collectWriter
	smu   sync.Mutex
	calls int
	sync  func(call int) error
}

func (w *syncingWriter) Sync() error {
	w.smu.Lock()
	w.calls++
	c := w.calls
	w.smu.Unlock()
	return w.sync(c)
}

func (w *syncingWriter) syncCalls() int {
	w.smu.Lock()
	defer w.smu.Unlock()
	return w.calls
}

// TestDirectSyncErrorSticky: Direct never retries a failed sync: the next
// Sync, Flush, Write and Close return the error, and the sink is not
// synced again (a second fsync would report success for pages the first
// one lost).
func TestDirectSyncErrorSticky(t *testing.T) {
	w := &syncingWriter{sync: func(call int) error {
		if call == 1 {
			return syscall.EIO
		}
		return nil
	}}
	d := NewDirect(w)
	mustWrite(t, d, []byte("a record\n"))
	if err := d.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync = %v, want EIO", err)
	}
	if err := d.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("second sync = %v, want EIO (never retried)", err)
	}
	if err := d.Flush(context.Background()); !errors.Is(err, syscall.EIO) {
		t.Errorf("flush = %v, want EIO", err)
	}
	if _, err := d.Write([]byte("later\n")); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after a failed sync = %v, want EIO", err)
	}
	if err := d.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
	if n := w.syncCalls(); n != 1 {
		t.Errorf("the sink was synced %d times, want 1", n)
	}
}

// TestSlabSyncAfterFailedSync: a Sync that reaches the sink after another
// Sync's failed must not sync again and report success: the two run one
// at a time, and the second returns the first's error.
func TestSlabSyncAfterFailedSync(t *testing.T) {
	entered1, release1, returned1 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	entered2 := make(chan struct{})
	w := &syncingWriter{sync: func(call int) error {
		switch call {
		case 1:
			close(entered1)
			<-release1
			defer close(returned1)
			return syscall.EIO
		case 2:
			close(entered2)
			<-returned1 // this sync starts after the first failed
		}
		return nil
	}}
	s, err := NewSlab(w, &SlabOptions{SlabSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, []byte("a record\n"))
	errA := make(chan error, 1)
	go func() { errA <- s.Sync() }()
	<-entered1
	errB := make(chan error, 1)
	go func() { errB <- s.Sync() }()
	select {
	case <-entered2:
	case <-time.After(100 * time.Millisecond): // B waits for A, as it should
	}
	close(release1)
	if err := <-errA; !errors.Is(err, syscall.EIO) {
		t.Fatalf("first sync = %v, want EIO", err)
	}
	if err := <-errB; !errors.Is(err, syscall.EIO) {
		t.Errorf("sync after a failed sync = %v, want EIO", err)
	}
	if err := s.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
}

// TestMmapSyncAfterFailedSync: as TestSlabSyncAfterFailedSync, for Mmap.
func TestMmapSyncAfterFailedSync(t *testing.T) {
	entered1, release1, returned1 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	entered2 := make(chan struct{})
	var smu sync.Mutex
	calls := 0
	fdatasync := func(f *os.File) error {
		smu.Lock()
		calls++
		c := calls
		smu.Unlock()
		switch c {
		case 1:
			close(entered1)
			<-release1
			defer close(returned1)
			return syscall.EIO
		case 2:
			close(entered2)
			<-returned1 // this sync starts after the first failed
		}
		return nil
	}
	m, err := OpenMmap(filepath.Join(t.TempDir(), "m.log"), &MmapOptions{fdatasync: fdatasync})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, m, []byte("a record\n"))
	errA := make(chan error, 1)
	go func() { errA <- m.Sync() }()
	<-entered1
	errB := make(chan error, 1)
	go func() { errB <- m.Sync() }()
	select {
	case <-entered2:
	case <-time.After(100 * time.Millisecond): // B waits for A, as it should
	}
	close(release1)
	if err := <-errA; !errors.Is(err, syscall.EIO) {
		t.Fatalf("first sync = %v, want EIO", err)
	}
	if err := <-errB; !errors.Is(err, syscall.EIO) {
		t.Errorf("sync after a failed sync = %v, want EIO", err)
	}
	if err := m.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close = %v, want EIO", err)
	}
}
