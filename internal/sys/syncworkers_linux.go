//go:build linux

package sys

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// workerSched moves the kernel workers that run the sync ring's requests
// to SCHED_BATCH.
//
// The kernel runs each IORING_OP_FSYNC on an io-wq worker: a thread of
// this process, named "iou-wrk-<tid>", created by the kernel when a
// request finds none free and inheriting the scheduling policy of the
// thread that submitted it (a Go thread: SCHED_OTHER). Under SCHED_OTHER
// a worker woken by its fdatasync's I/O preempts whichever thread runs on
// its CPU, usually one of Go's, holding a P: the goroutines queued on that
// P wait until the worker is done writing back. Under SCHED_BATCH the
// worker keeps its fair share of CPU time (a sync is not starved, whatever
// else runs on the host) but its wake-ups do not preempt: it runs when the
// current thread's slice ends or that thread blocks. BENCHMARKS.md has
// the measurements.
//
// No system call creates or names the workers for the process, so the
// first sync ring submission and then one at most every _workerScanEvery
// list /proc/self/task and change any io_uring worker thread not seen
// before. That is every io_uring worker of the process, those of its other
// rings (sys.Uring) too: a write that one of those punts to a worker is
// background work as much as a sync.
// A worker the kernel creates between two scans runs SCHED_OTHER until
// the next. Workers live until they have been idle for some seconds, so
// under a steady load nearly every sync runs on a changed one. A failure
// (no /proc, a kernel that refuses) leaves the workers as they are: the
// policy is an optimisation, never needed for correctness.
type workerSched struct {
	due  atomic.Int64 // time.Duration since _workerEpoch of the next scan
	scan sync.Mutex   // held by the one scan running; TryLock

	// Guarded by scan. seen holds the tids already looked at (workers
	// changed and other threads), so each thread's name is read once.
	seen  []int32
	dents [4096]byte
	stat  [1024]byte
}

// _workerScanEvery bounds how often a sync ring submission lists the
// process's threads.
const _workerScanEvery = 100 * time.Millisecond

// _maxSeenThreads bounds workerSched.seen; past it the list starts again
// (a thread seen before is only looked at once more).
const _maxSeenThreads = 4096

var _workerEpoch = time.Now()

// maybeScan runs a scan if one is due and none is running.
func (w *workerSched) maybeScan() {
	now := time.Since(_workerEpoch)
	if int64(now) < w.due.Load() || !w.scan.TryLock() {
		return
	}
	defer w.scan.Unlock()
	if int64(now) < w.due.Load() {
		return // another scan just ran
	}
	w.due.Store(int64(now + _workerScanEvery))
	w.batchWorkers()
}

// batchWorkers lists /proc/self/task and sets SCHED_BATCH on each io_uring
// worker thread it has not seen. It allocates only to read the name of
// a thread not seen before. REQUIRES: w.scan held.
func (w *workerSched) batchWorkers() {
	fd, err := unix.Open("/proc/self/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Getdents(fd, w.dents[:])
		if err != nil || n <= 0 {
			return
		}
		for b := w.dents[:n]; len(b) > 0; {
			// struct linux_dirent64: ino u64, off i64, reclen u16, type
			// u8, then the NUL-terminated name, in the machine's byte
			// order. The read of reclen stays inside b (len(b) > 0 and
			// getdents returns whole records, at least nameOff long;
			// checked below before b is cut).
			const nameOff = 19
			if len(b) < nameOff {
				return
			}
			reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
			if reclen < nameOff || reclen > len(b) {
				return
			}
			name := b[nameOff:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			tid, ok := parseTID(name)
			if !ok || w.isSeen(tid) {
				continue
			}
			w.markSeen(tid)
			if w.isWorker(name) {
				attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_BATCH}
				_ = unix.SchedSetAttr(int(tid), &attr, 0)
			}
		}
	}
}

// parseTID reads a decimal thread id, without allocating.
func parseTID(name []byte) (int32, bool) {
	if len(name) == 0 || len(name) > 10 {
		return 0, false
	}
	var v int64
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if v <= 0 || v > 1<<31-1 {
		return 0, false
	}
	return int32(v), true
}

func (w *workerSched) isSeen(tid int32) bool {
	for _, s := range w.seen {
		if s == tid {
			return true
		}
	}
	return false
}

func (w *workerSched) markSeen(tid int32) {
	if len(w.seen) >= _maxSeenThreads {
		w.seen = w.seen[:0]
	}
	w.seen = append(w.seen, tid)
}

// _pfIOWorker is PF_IO_WORKER, the flag the kernel sets on the threads it
// creates for io_uring (include/linux/sched.h).
const _pfIOWorker = 0x10

// isWorker reports whether thread name (a tid in /proc/self/task) is an
// io-wq worker, from the flags in its stat file: they are set when the
// kernel creates the thread, before it is listed, where its name
// ("iou-wrk-<tid>") is set only once it runs.
func (w *workerSched) isWorker(name []byte) bool {
	fd, err := unix.Open("/proc/self/task/"+string(name)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, w.stat[:])
	if err != nil || n <= 0 {
		return false
	}
	flags, ok := statFlags(w.stat[:n])
	return ok && flags&_pfIOWorker != 0
}

// statFlags returns the flags field (the 9th) of a /proc/PID/stat line.
// The name (2nd, in parentheses) may hold spaces and parentheses: the
// fields after it start after the last ')'.
func statFlags(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:]) // state, ppid, pgrp, session, tty_nr, tpgid, flags, ...
	if len(fields) < 7 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(fields[6]), 10, 64)
	return v, err == nil
}
