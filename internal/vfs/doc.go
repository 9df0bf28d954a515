// Package vfs is the file-system interface the WAL and the log writers use,
// with three implementations: [OS] (real files through internal/sys), a
// crashable in-memory file system [MemFS] for power-cut tests, and
// [WithFaults], a wrapper that injects errors and short writes into any FS.
//
// # Semantics every FS provides
//
// File.WriteAt and File.WritevAt write all of their bytes or return an
// error; there is no silent short write. File.Sync is fdatasync: when it
// returns nil the file's data and size are durable. Directory entry changes
// (creating, renaming and removing files, and creating directories) are
// durable only after SyncDir on the parent directory. Errors are
// *fs.PathError where a path is involved; missing files and directories
// wrap fs.ErrNotExist, existing ones (O_EXCL) fs.ErrExist, and operations
// on a closed File wrap fs.ErrClosed. FS.OpenRegular and FS.Lock open
// only regular files, never through a symbolic link and never blocking on
// a named pipe; anything else is a *NotRegularError naming the path and
// what is there. MemFS has only files and directories (no symbolic links,
// pipes, sockets or devices), so a directory is all it can refuse.
//
// # The crash model of MemFS
//
// MemFS models a power cut. Every file has current content (what reads see)
// and durable content (what survives a crash). Every directory has current
// entries and durable entries.
//
//   - File.Sync makes the file's current content and size durable.
//   - Writes since the last Sync are kept in a per-file log of
//     (offset, bytes), and so are size changes (Truncate, Preallocate,
//     O_TRUNC). Sync makes the size durable; until then a crash may or
//     may not have committed a size change.
//   - SyncDir(dir) makes dir's current entries durable. Until then, after a
//     crash without an rng, a created file or directory does not exist, a
//     renamed file is back at its old name and a removed file is back with
//     its durable content. A file can be durable in content but not
//     reachable by name. With an rng, a random prefix of the entry changes
//     not yet durable survives, in the order they were made, as a journal
//     commits them; a rename is one change. A rename between directories
//     that SyncDir made durable on one side only is durable on each side
//     separately:
//     with only the new parent synced, a crash shows the file under both
//     names (one file); with only the old parent synced, under neither.
//
// [MemFS.Crash] returns a new, independent MemFS built from durable state
// only. With a nil rng, only synced content survives. With an rng, each
// unsynced write is independently kept or lost with probability 1/2, and a
// kept write may be torn at the 512-byte sector boundaries of the file
// inside it: then each piece between them survives or not independently,
// so a later part of a write may survive an earlier one, as page writeback
// and a disk's cache promise no order. Unsynced size changes survive as a
// journal commits them: in order, a random prefix of them (possibly none,
// possibly all). Kept writes and surviving size changes are applied in
// order on top of the durable content, so a crash leaves torn tails,
// zero-filled holes (a later write or sector kept, an earlier one lost),
// zero-filled tails (a preallocation kept, the writes into it lost), files
// emptied by a truncate whose rewrite was lost, and partially persisted
// writes, as a real disk can. The outcome depends only on the operations and the rng's
// seed. Locks do not survive a crash.
//
// After Crash the old MemFS is dead: every operation on it, on its open
// files and on its locks returns an error wrapping [ErrCrashed], so
// goroutines of a pre-crash log cannot touch the new file system. Crash may
// be called again on the dead MemFS; since its state no longer changes,
// that explores other outcomes of the same power cut.
//
// # Concurrency
//
// OS, MemFS and the FS returned by WithFaults are safe for concurrent use,
// and so are their Files: ReadAt, WriteAt and WritevAt at different offsets
// may run concurrently with each other and with Sync. Overlapping
// concurrent writes leave an unspecified mix of their bytes. MemFS
// serializes every operation with one mutex; it is meant for tests, not
// speed. An Injector passed to WithFaults is called from whichever
// goroutine performs the operation, so it must be safe for concurrent use;
// the helpers in this package are.
package vfs
