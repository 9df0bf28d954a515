//go:build linux

package sys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
	const goroutines, each = 16, 40
	taken := syncStorm(t, r, goroutines, each)
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

// TestSyncRingWorkersBatch: the kernel workers that run the ring's
// fdatasyncs end up SCHED_BATCH (see workerSched), set by the ring's own
// submissions.
func TestSyncRingWorkersBatch(t *testing.T) {
	r := newTestRing(t, 8)
	if taken := syncStorm(t, r, 4, 20); taken != 80 {
		t.Fatalf("the ring took %d of 80 syncs, with a slot for each caller", taken)
	}
	tids, err := workerTIDs()
	if err != nil {
		t.Skipf("cannot list this process's threads: %v", err)
	}
	if len(tids) == 0 {
		t.Fatal("no io-wq worker after 80 fdatasyncs through the ring")
	}
	// Submissions due to scan, that run on no worker themselves (a
	// timeout), until no worker is left SCHED_OTHER: the kernel may make a
	// worker after a scan (when a worker sleeps in its I/O, through the
	// submitting thread's task work), and the next scan changes it.
	var left []string
	for range 100 {
		r.workers.due.Store(0)
		ts := &unix.Timespec{Nsec: int64(time.Microsecond)}
		sqe := uringSQE{opcode: _ioringOpTimeout, addr: uint64(uintptr(unsafe.Pointer(ts))), len: 1}
		if ok, err := r.do(&sqe); !ok || !errors.Is(err, unix.ETIME) {
			t.Fatalf("timeout through the ring: taken %v, %v", ok, err)
		}
		runtime.KeepAlive(ts)
		tids, err = workerTIDs()
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		for _, tid := range tids {
			p, err := workerPolicy(tid)
			if errors.Is(err, unix.ESRCH) {
				continue // it exited meanwhile
			}
			if err != nil {
				t.Fatalf("sched_getattr of worker %d: %v", tid, err)
			}
			if p != unix.SCHED_BATCH {
				left = append(left, fmt.Sprintf("worker %d: policy %d", tid, p))
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Where sched_setattr is refused (seccomp, an old kernel), the scan
	// leaves the workers as they are, as documented.
	if tids, err := workerTIDs(); err == nil && len(tids) > 0 {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_BATCH}
		if err := unix.SchedSetAttr(tids[0], &attr, 0); errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) {
			t.Skipf("sched_setattr of an io-wq worker refused here: %v", err)
		}
	}
	t.Errorf("io-wq workers not SCHED_BATCH (%d) after 100 scans: %v", unix.SCHED_BATCH, left)
}

func TestParseTID(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
		ok   bool
	}{
		{"1", 1, true}, {"4194304", 4194304, true}, {"2147483647", 1<<31 - 1, true},
		{"", 0, false}, {".", 0, false}, {"..", 0, false}, {"0", 0, false}, {"12a", 0, false},
		{"2147483648", 0, false}, {"99999999999", 0, false}, {"-1", 0, false},
	} {
		if got, ok := parseTID([]byte(c.in)); got != c.want || ok != c.ok {
			t.Errorf("parseTID(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestStatFlags(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"12 (iou-wrk-10) S 1 12 12 0 -1 4194384 0 0", 4194384, true},
		{"12 (a b) c)) R 1 12 12 0 -1 16 0", 16, true},
		{"12 (x) S 1 12 12 0 -1", 0, false},
		{"12 (x) S 1 12 12 0 -1 zz 0", 0, false},
		{"garbage", 0, false},
	} {
		if got, ok := statFlags([]byte(c.in)); got != c.want || ok != c.ok {
			t.Errorf("statFlags(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// workerPolicy returns the scheduling policy of thread tid (tests).
func workerPolicy(tid int) (uint32, error) {
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, err
	}
	return attr.Policy, nil
}

// workerTIDs returns the tids of this process's io-wq workers (tests).
func workerTIDs() ([]int, error) {
	var w workerSched
	var tids []int
	fd, err := unix.Open("/proc/self/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return tids, nil
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if w.isWorker([]byte(name)) {
				tid, _ := strconv.Atoi(name)
				tids = append(tids, tid)
			}
		}
	}
}

// syncStorm has goroutines goroutines each write a byte to a file of its
// own and sync it through r (fdatasync and fsync in turn), each times, and
// returns how many syncs the ring took.
func syncStorm(t *testing.T, r *syncRing, goroutines, each int) (taken int) {
	t.Helper()
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
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
	return taken
}
