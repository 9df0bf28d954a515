// Package sys is the only place in appendlog that makes platform system
// calls. Everything above it (wal, writer, shmlog, vfs) calls these portable
// functions and never imports golang.org/x/sys or syscall directly.
//
// # Platforms
//
// The Linux implementation (files ending in _linux.go, built with
// //go:build linux) uses golang.org/x/sys/unix: fdatasync(2),
// fallocate(2), pwritev(2), O_DIRECT, mmap(2)/madvise(2) and flock(2).
// Every other platform gets a portable fallback (files ending in
// _other.go) with the same unexported signatures: Fdatasync becomes
// (*os.File).Sync, Fallocate extends the size with ftruncate, Pwritev
// becomes one WriteAt per buffer, OpenDirect and Mmap report that they are
// unsupported. flock(2) is also used on the BSDs and macOS; elsewhere
// TryLock only excludes other opens within the same process.
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
// slice, which only unsafe can provide. Mapped memory returned by Mmap must
// be unmapped with Munmap and must not be touched afterwards.
package sys
