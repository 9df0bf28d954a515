// Package sys is the only place in appendlog that makes platform system
// calls. Everything above it (wal, writer, shmlog, vfs, bench, cmd) calls
// these portable functions. Only this package imports golang.org/x/sys and
// unsafe; other packages import syscall only for its errno and signal
// constants (syscall.EIO, syscall.ENOSPC, syscall.SIGTERM), which name no
// system call. internal/lint's TestForbiddenImports enforces both rules.
//
// # Platforms
//
// The Linux implementation (files ending in _linux.go, built with
// //go:build linux) uses golang.org/x/sys/unix:
//   - fdatasync(2), fallocate(2), pwritev(2), O_DIRECT, mmap(2)/madvise(2)
//     and huge-page buffers, for the write paths;
//   - flock(2): TryLock and Lock (blocking, shared or exclusive);
//   - open(2) with O_NOFOLLOW|O_NONBLOCK: OpenNoFollow, which neither
//     follows a symbolic link nor blocks on a named pipe (also on the BSDs
//     and macOS; elsewhere it checks with Lstat first);
//   - /proc/locks: LockHolder, the pid holding a flock on a file (writer
//     names it when a second open of a log file is refused);
//   - statfs(2): FreeSpace, the bytes free (appendlog load refuses a run
//     that needs more), and FSType;
//   - futex(2) and shared atomic words (FutexWait, FutexWake, Uint64At) for
//     shmlog, and /proc/PID/stat (ProcStart) to tell a dead writer;
//   - io_uring_setup(2) and io_uring_enter(2) (Uring), and a process-wide
//     ring with an eventfd read through Go's poller behind
//     FdatasyncParked and SyncDirParked (IORING_OP_FSYNC), whose kernel
//     workers it finds in /proc/self/task and moves to SCHED_BATCH with
//     sched_setattr(2);
//   - getrusage(2): MaxRSS.
//
// Every other platform gets a portable fallback (files ending in _other.go)
// with the same unexported signatures: Fdatasync (parked or not) becomes
// (*os.File).Sync,
// Fallocate extends the size with ftruncate, Pwritev becomes one WriteAt per
// buffer; OpenDirect, Mmap, FreeSpace, FSType, MaxRSS and NewUring report
// that they are unsupported; LockHolder cannot tell; FutexWait sleeps out
// its timeout; ProcStart reports every pid alive. flock(2) is also used on
// the BSDs and macOS; elsewhere TryLock only excludes other opens within the
// same process.
//
// Optional system calls are probed and degraded: fallocate falls back to
// ftruncate on EOPNOTSUPP/ENOSYS, madvise ignores ENOSYS/EINVAL, and
// opening with O_DIRECT on a file system that rejects it (EINVAL, as tmpfs
// did before Linux 6.6) reports an error wrapping [ErrDirectUnsupported] so
// callers can fall back to buffered I/O.
//
// # Errors
//
// Failures are returned as *fs.PathError whose Op names the system call
// ("fdatasync", "fallocate", "pwritev", "mmap", "flock", ...) and whose Path
// is the file's name, so errors.Is(err, syscall.EIO) and
// errors.As(err, new(*fs.PathError)) both work. A call on a closed *os.File
// returns a *fs.PathError wrapping [os.ErrClosed]. EINTR is retried.
//
// # Concurrency
//
// All functions are safe for concurrent use on the same *os.File; each
// holds a reference to the descriptor for the duration of the call (via
// (*os.File).SyscallConn), so a concurrent Close cannot make a call operate
// on a reused descriptor. Positional calls (Pwritev) do not serialize with
// each other; callers writing overlapping ranges must order them.
//
// # unsafe
//
// This package may use unsafe: AlignedBuffer needs the address of a byte
// slice, Uint64At and the futex calls turn a word of a shared mapping into a
// pointer, and Uring hands buffer addresses to the kernel; only unsafe can
// do these. Mapped memory returned by Mmap must be unmapped with Munmap and
// must not be touched afterwards.
package sys
