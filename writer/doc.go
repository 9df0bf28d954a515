// Package writer provides asynchronous io.Writers for logs: Ring, the
// flagship, and the reference strategies it is measured against (Direct,
// Buffered, Slab, Mmap). Each is an io.Writer with Sync, so it plugs into
// log/slog (slog.NewJSONHandler(ring, nil)), the standard log package
// (log.New(ring, "", 0)), zap (as a zapcore.WriteSyncer) or zerolog.
//
// # Records
//
// Every Write call is one record. A record is written whole: never split,
// never interleaved with another, even with many goroutines writing at
// once. Text logs stay plain bytes: the writers add nothing between
// records (except Ring's optional drop markers, below). Write copies p, so
// the caller may reuse it at once; Ring.Write does not allocate.
//
// # Ring
//
// A Ring is a claim/commit ring buffer (internal/engine) drained by one
// flusher goroutine:
//
//	producer:  claim len(p) bytes (one CAS) -> copy p -> commit (one atomic add)
//	flusher:   write the committed bytes, in claim order, in large batches
//
// The order of records in the output is the order in which their Write
// calls claimed space: one total order across goroutines, and each
// goroutine's records in the order it wrote them. The ring's memory
// (RingOptions.Size, 8 MiB by default) bounds what is buffered.
//
// The sink is a file opened by OpenFile (positional writes at the end of
// the file; with RingOptions.Direct, O_DIRECT writes of whole 4 KiB blocks
// straight from the ring, half the ring at a time, the partial last block
// rewritten in place and the file truncated to its true length on Close)
// or any io.Writer
// passed to NewRing, such as a network connection.
//
// A Ring from NewRing hands its io.Writer whole records only: every Write
// call it makes ends at a record boundary, so a writer that acts on each
// call (lumberjack rotates between calls; a datagram socket sends each one)
// never splits a record. Producers note where records start, once per
// 4 KiB, and the flusher carries a record a batch cut in two to the next
// batch (RingOptions.SplitWrites turns this off).
//
// The flusher writes when a quarter of the ring has filled, when Flush,
// Sync or Close ask, and otherwise at most FlushInterval (100 ms by
// default) after a record was written to an idle ring.
//
// # Rotation
//
// With RingOptions.Rotate, OpenFile rotates its file as lumberjack does:
// when the file has grown to about Rotate.MaxBytes it is renamed to a
// backup, app.log to app-2006-01-02T15-04-05.000.log (UTC unless
// LocalTime; a name is never reused, not even when the local clock goes
// back an hour, and a file already there is never replaced: the time in
// the name moves on a millisecond instead), and a new app.log takes its
// place.
// Backups are then gzipped (Compress) and the oldest deleted (MaxBackups,
// MaxAge, MaxTotalBytes). Backups are regular files: a directory or a
// symbolic link under a backup's name is left alone. The bytes a file
// holds when OpenFile opens it count toward MaxBytes; a file already at
// MaxBytes (or within 4 KiB of it) is rotated first.
//
// A log path that is a symbolic link (/var/log/app.log pointing to
// /data/log/app.log) is followed once, when OpenFile opens it: the file it
// names is the one that rotates, in its own directory (the backups, their
// compressed copies and each next file go there, on the file's file
// system), and the link stays as it was, naming the live file. Renaming
// the link instead (as lumberjack does) would make a backup that is a
// link, never compressed or pruned, to a file no rotation touches again;
// logrotate refuses links. Rotations and Reopen go on with the file found
// at OpenFile: a link pointed elsewhere later counts from the next
// OpenFile. Errors name the file, not the link. Without Rotate a link is
// followed as open(2) follows it, at OpenFile and at each Reopen.
//
// A file is cut only between two records. The mechanism keeps the
// producer's path lock-free: a record's claim position is its byte offset
// in the log, so a producer knows, from its own claim, whether the record
// holds a multiple of 4 KiB of the log (a mark). If it does, it stores
// the record's start and end in the mark's slots before it commits: two
// stores per 4 KiB of records. The flusher knows where the current file
// began, so it knows the first mark at least MaxBytes - 4 KiB past it;
// when a write reaches the start of the record holding that mark, it
// writes the bytes before it to the file, renames the file, creates the
// next one and goes on with the rest. (If that record is the file's
// first, the cut comes at its end instead.) A file is therefore at most
// MaxBytes long (unless one record is longer) and at least MaxBytes -
// 4 KiB - one record.
//
// Rotate.Every adds a schedule: at each boundary a goroutine asks for a cut
// at the claim tail, which is a record boundary, and the flusher makes it
// before writing the next record, so records claimed before the boundary
// end the old file and those after it start the next.
//
// Producers never wait for a rotation: the rename and the new file cost
// the flusher a few system calls. The rotated file is synced, closed and
// unlocked by a closer goroutine, and compressed and pruned by a janitor
// goroutine; Close joins both after their last job. Sync waits for the
// rotated files to be synced, so the contract below holds across files.
// A compression (Rotate.Compression: Gzip or Zstd) writes name.gz.tmp
// (name.zst.tmp), syncs it, renames it to name.gz (name.zst) and only then
// removes the backup: an error (a full disk) leaves the backup as it was,
// is counted (Stats.RotationErrors) and passed to OnError, and logging goes
// on. OpenFile finishes what a crash interrupted (a leftover temporary
// file, a backup whose compressed copy is in place), so that every record
// is in exactly one file. An error renaming the file or creating the next one
// is the log's own write error: sticky, with nothing deleted. A file that
// is no longer at its path when its rotation comes (another program
// deleted it, or renamed it away, perhaps creating another file there as
// logrotate's create mode does) is not renamed, nor is the file now at the
// path: that file, or a new one if there is none, is the next file, and
// the error is counted (Stats.RotationErrors) and passed to OnError. (If
// the file now at the path cannot be opened, that is counted and passed
// on too, and the Ring writes on to the file it has, as after a Reopen
// that fails; the next cut tries again.) (Without Rotate, a Ring writes on into a deleted file until
// Reopen.)
//
// Each file holds whole records, in order: reading the backups oldest
// first (their names sort by age) and then the file gives the log.
//
// # logrotate
//
// A Ring from OpenFile (without Direct) works with logrotate's default
// create mode: logrotate renames the file, and a postrotate script tells
// the process, which calls Ring.Reopen (records written before go to the
// renamed file, whole; records written after go to the new file):
//
//	/var/log/app.log {
//	    daily
//	    rotate 7
//	    compress
//	    delaycompress
//	    postrotate
//	        kill -HUP $(cat /run/app.pid)
//	    endscript
//	}
//
// and in the program:
//
//	hup := make(chan os.Signal, 1)
//	signal.Notify(hup, syscall.SIGHUP)
//	go func() {
//	    for range hup {
//	        if err := ring.Reopen(); err != nil {
//	            log.Print(err) // a sticky error, a misuse, or a file it could not open
//	        }
//	    }
//	}()
//
// (stop the goroutine with signal.Stop and a close before ring.Close.)
// delaycompress leaves the renamed file alone until the next rotation,
// by which time Reopen has long closed it.
//
// copytruncate is refused (with Direct too): a Ring writes at the offsets
// it tracks, so a file truncated under it would get a hole of zero bytes
// the size of everything written before. Before each write the Ring reads
// the file's size; if the file is shorter than what the Ring wrote, the
// write is refused and the Ring fails with an error wrapping ErrTruncated
// that names the file (every later call returns it). A truncation that lands
// between that check and the write it precedes is not caught. Records
// written between logrotate's copy and its truncation are lost by
// copytruncate with any writer. Use create mode and Reopen, or the
// built-in rotation (Rotate), which needs no external tool.
//
// # Durability contract
//
//	| call returns           | guarantee                                                       |
//	|------------------------|-----------------------------------------------------------------|
//	| Write                  | the record is in the buffer and will be written, in order; or  |
//	|                        | it was dropped and counted (Drop policy or BlockTimeout)       |
//	| Flush(ctx)             | every record written before the call was handed to the OS      |
//	|                        | (page cache; the device itself for O_DIRECT; w.Write for an    |
//	|                        | io.Writer sink)                                                |
//	| Sync(), SyncContext    | Flush, then fdatasync (w.Sync for an io.Writer that has one)   |
//	| Close(), CloseContext  | Flush and Sync of every record accepted before Close, the      |
//	|                        | flusher goroutine joined, the file closed (OpenFile)           |
//
// These hold for every writer in the package; for Direct and Mmap a
// returned Write is already handed to the OS, and for Buffered and Slab
// Flush writes from the calling goroutine or waits for the flusher.
//
// # Full buffer
//
// When the ring is full, Write waits for space (Block, the default), waits
// at most RingOptions.BlockTimeout, or returns at once (Drop). A record
// that is not stored is dropped and counted, and Write returns len(p) and a
// nil error: the record was accepted and dropped. The accounting is exact:
// once the Ring is closed, Stats().Records == WrittenRecords +
// DroppedRecords, and the same for bytes. With RingOptions.DropMarkers the
// stream also says where records went missing: the first record written
// after drops is preceded by a line
//
//	appendlog: N records dropped
//
// and Close writes one for the drops not yet reported. Markers are not
// records (Stats counts them apart). Drops that race with Close are counted
// but may miss the final marker.
//
// # Errors
//
// A failed write or fdatasync of a file is sticky: the page cache may have
// dropped the data, so the Ring stops, and every later call (Write, Flush,
// Sync, Close) returns the error. That holds for the fdatasync of a
// rotated or reopened file too, which the closer goroutine makes: every
// call that starts after it failed returns its error, even on a Ring with
// nothing left to write. Close cuts a file that took part of a failed
// write (a disk that filled up mid-write) back to where the last
// successful write ended. A failed write to an io.Writer sink (a
// network connection that hiccups) is retried instead: the bytes not yet
// written are written again, in order, after a pause that doubles from
// RetryBackoff to RetryMaxBackoff; each failure is counted
// (Stats.Retries) and passed to RingOptions.OnError. Meanwhile the ring
// fills and producers block (or drop). The Ring gives up, making the error
// sticky, after RetryLimit consecutive failures if set, or when Close's
// timeout (CloseContext's context) expires. Write after Close returns
// ErrClosed; Close is idempotent. A method that takes a context refuses a
// nil one with an error wrapping ErrNilContext, and does nothing else.
//
// # Exiting
//
// os.Exit does not run deferred calls, so records still in a Ring would be
// lost by a program that exits with os.Exit or log.Fatal. Use Exit, which
// closes the writers first:
//
//	defer ring.Close() // normal return from main
//	...
//	writer.Exit(1, ring) // instead of os.Exit(1) or log.Fatal
//
// # One writer per file
//
// OpenFile (buffered or O_DIRECT) and OpenMmap take an exclusive advisory
// lock (flock(2)) on the log file before they write anything, and hold it
// until Close. A second open of the same file, by any of them, in this
// process or another, fails with an error wrapping ErrInUse that names the
// file and the holder's pid:
//
//	writer: open /var/log/app.log: in use by another writer (pid 1234)
//
// Two writers on one file would each write at the offsets they track and
// overwrite each other's records. Where the platform has no flock(2), the
// lock only excludes other writers in the same process; where it cannot
// say who holds a lock (other than Linux), the pid reads "unknown". The
// lock is advisory: a program that opens the file without this package is
// not stopped.
//
// For many processes logging to one file, either give the file one writer
// process and have the others send it their records (a pipe, a socket,
// NewRing's io.Writer sink in the senders), or use the shared mmap log,
// package shmlog: many processes append to one log through a shared
// mapping, in one total order, with no lock and no system call per record
// (Linux).
//
// # Reference strategies
//
// Direct (one write(2) per record), Buffered (a page-aligned buffer under a
// mutex), Slab (a pool of buffers and a flusher goroutine) and Mmap (copy
// into a shared mapping of a file grown by chunks) implement the same
// Writer interface and Stats, so benchmarks compare them with Ring on equal
// terms. They are correct (records whole, in order, exactly once) but trade
// speed for simplicity: all but Direct serialize producers on a mutex.
package writer
