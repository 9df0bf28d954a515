//go:build linux

package sys

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func newTestRing(t *testing.T, entries int) *syncRing {
	t.Helper()
	r, err := newSyncRing(entries)
	if errors.Is(err, ErrUringUnsupported) {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// TestSyncRingConcurrent runs many more concurrent syncs than a small
// ring has slots: every call returns (leadership passes from caller to
// caller), the ring takes what it has room for, and after the storm every
// slot is free again and no one leads.
func TestSyncRingConcurrent(t *testing.T) {
	r := newTestRing(t, 4)
	dir := t.TempDir()
	const goroutines, each = 16, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for g := range goroutines {
		wg.Go(func() {
			f, err := os.Create(filepath.Join(dir, string(rune('a'+g))))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := range each {
				if _, err := f.Write([]byte{byte(i)}); err != nil {
					t.Error(err)
					return
				}
				flags := uint32(0)
				if i%2 == 0 {
					flags = _ioringFsyncDatasync
				}
				ok, err := r.fsync(int(f.Fd()), flags)
				if err != nil {
					t.Errorf("fsync: %v", err)
					return
				}
				if ok {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if taken == 0 {
		t.Fatal("the ring took none of the syncs")
	}
	t.Logf("the ring took %d of %d syncs", taken, goroutines*each)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.free) != len(r.slots) || r.pending != 0 || r.leading {
		t.Fatalf("after the storm: %d of %d slots free, %d pending, leading %v", len(r.free), len(r.slots), r.pending, r.leading)
	}
}

// TestSyncRingError: a completion's error reaches its caller (fsync(2) of
// a pipe is EINVAL).
func TestSyncRingError(t *testing.T) {
	r := newTestRing(t, 2)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	ok, err := r.fsync(int(pr.Fd()), _ioringFsyncDatasync)
	if !ok || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("fsync of a pipe through the ring: ok %v, err %v; want EINVAL", ok, err)
	}
	for name, sync := range map[string]func(*os.File) error{"Fdatasync": Fdatasync, "FdatasyncParked": FdatasyncParked} {
		if err := sync(pr); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "fdatasync") {
			t.Fatalf("%s of a pipe: %v; want an fdatasync error wrapping EINVAL", name, err)
		}
	}
}

// TestParkedSyncs: the parked forms sync a file and a directory, and
// name what they could not sync.
func TestParkedSyncs(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := FdatasyncParked(f); err != nil {
		t.Fatal(err)
	}
	if err := SyncDirParked(dir); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := FdatasyncParked(f); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("FdatasyncParked of a closed file: %v", err)
	}
	if err := SyncDirParked(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("SyncDirParked of a missing directory: %v", err)
	}
}

// TestSyncRingWaitHoldsNoP is the reason for the ring: a caller waiting
// for its completion is parked in the network poller ("IO wait"), not
// blocked in a system call holding its P. An IORING_OP_TIMEOUT stands in
// for a slow fdatasync.
func TestSyncRingWaitHoldsNoP(t *testing.T) {
	r := newTestRing(t, 2)
	ts := &unix.Timespec{Nsec: int64(300 * time.Millisecond)}
	done := make(chan error, 1)
	go func() {
		sqe := uringSQE{opcode: _ioringOpTimeout, addr: uint64(uintptr(unsafe.Pointer(ts))), len: 1}
		ok, err := r.do(&sqe)
		runtime.KeepAlive(ts)
		if !ok {
			err = errors.New("the ring did not take the call")
		}
		done <- err
	}()
	if state := waiterState("(*syncRing).lead"); state != "IO wait" {
		t.Errorf("a caller waiting on the ring is in state %q, want %q", state, "IO wait")
	}
	if err := <-done; !errors.Is(err, unix.ETIME) {
		t.Fatalf("timeout through the ring: %v, want ETIME", err)
	}
}

// waiterState waits up to 250 ms for a goroutine whose stack holds fn and
// returns its scheduling state ("IO wait", "syscall", ...), or "" if none
// showed up.
func waiterState(fn string) string {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(250 * time.Millisecond); time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !strings.Contains(g, fn) {
				continue
			}
			// "goroutine 7 [IO wait]:" or "goroutine 7 [syscall, 2 minutes]:"
			head := g[:strings.IndexByte(g, '\n')]
			s := head[strings.IndexByte(head, '[')+1 : strings.LastIndexByte(head, ']')]
			s, _, _ = strings.Cut(s, ",")
			return s
		}
	}
	return ""
}

// TestTimerWaitsInPoller: a Timer's sleep is parked in the network poller
// (where a timerfd's expiry wakes it on time), not on a runtime timer.
func TestTimerWaitsInPoller(t *testing.T) {
	tm, err := NewTimer()
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	done := make(chan error, 1)
	go func() { done <- tm.Sleep(300 * time.Millisecond) }()
	if state := waiterState("(*timer).sleep"); state != "IO wait" {
		t.Errorf("a sleeping Timer's goroutine is in state %q, want %q", state, "IO wait")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSyncRingFailedSubmitLeavesNothingQueued: a submission the kernel
// refuses (here io_uring_enter on a descriptor that is not the ring) is
// taken back. Left in the submission queue, the next call's
// io_uring_enter submitted it in place of its own, and that call was
// handed the stale entry's completion: its fdatasync of a good file
// returned the stale entry's EBADF (or succeeded without syncing).
func TestSyncRingFailedSubmitLeavesNothingQueued(t *testing.T) {
	r := newTestRing(t, 4)
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ringFd := r.u.fd
	r.u.fd = int(f.Fd()) // not an io_uring: io_uring_enter fails, taking nothing
	ok, err := r.fsync(-1, _ioringFsyncDatasync)
	r.u.fd = ringFd
	if ok || err != nil {
		t.Fatalf("fsync through a broken ring: ok=%v err=%v, want the caller to sync itself", ok, err)
	}
	if h, tl := r.u.sqHead.Load(), r.u.sqTail.Load(); h != tl {
		t.Fatalf("after a refused submission the queue holds %d entries", tl-h)
	}
	ok, err = r.fsync(int(f.Fd()), _ioringFsyncDatasync)
	if !ok || err != nil {
		t.Fatalf("fsync of a good file after a refused submission: ok=%v err=%v", ok, err)
	}
	if h, tl := r.u.sqHead.Load(), r.u.sqTail.Load(); h != tl {
		t.Fatalf("%d entries left unsubmitted", tl-h)
	}
}
