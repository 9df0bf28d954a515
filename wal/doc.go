// Package wal is a durable, segmented, append-only log with group commit
// and crash recovery.
//
// # Basics
//
// Open a directory, Append records from as many goroutines as you like, and
// wait for durability when you need it:
//
//	l, err := wal.Open(dir, nil) // group commit by default
//	seq, err := l.Append(payload)
//	err = l.WaitDurable(ctx, seq) // shares one fdatasync with every concurrent waiter
//	err = l.Close()
//
// Records get consecutive sequence numbers (the first record of a new log
// is 1) in one total order across goroutines, which is also their order in
// the files. Append copies the payload into an in-memory claim/commit buffer
// (see internal/engine) and returns; one flusher goroutine writes the buffer
// to the active segment in large writes and, when asked, fdatasyncs once for
// every waiter it covers.
//
// # Durability contract
//
//	call                          guarantees when it returns
//	Append/AppendBatch            the record is in the log's buffer
//	Flush(ctx)                    every record appended before the call was handed to the OS
//	Sync(ctx)                     every record appended before the call survived fdatasync,
//	                              and the directory was fsynced for every segment created
//	WaitDurable(ctx, seq)         record seq survived fdatasync
//	Close                         Flush and Sync done, flusher joined, files and lock released
//
// SyncMode decides what happens between those calls: SyncBatch (default)
// syncs a batch once it reaches Options.BatchBytes or Options.BatchAge, or
// at once when someone waits; SyncInterval syncs every Options.SyncEvery;
// SyncNever leaves it to the OS.
//
// An I/O error on the write path, fdatasync errors included, is sticky: the
// page cache may have dropped the data, so the log never retries an fsync.
// It enters a failed state and every later call returns the error.
//
// # Files
//
// A log is a directory of segment files named by the sequence number of
// their first record (00000000000000000001.seg), a LOCK file holding an
// exclusive flock (a second Open, in this process or another, gets
// ErrInUse naming it and the holder), and, after a repair, side files whose
// names contain .cut. A directory with none of these but other files is not
// a log: Open, OpenReader, Verify and Repair refuse it (ErrNotLog) and
// create nothing in it. An empty directory is an empty log.
//
//	segment := file header page (4096 B) | frame ... frame | [footer frame]
//
// The header page (frame.FileHeader) holds the magic, version, kind and
// first sequence number, and a durable mark (frame.Mark): the end offset and
// next sequence number that a completed fdatasync made durable. The mark is
// written one sync behind (sync k writes the state sync k-1 made durable),
// so the header never claims more than the disk holds. Records are
// frame.KindRecord frames (see package frame). A segment is sealed when it
// reaches Options.SegmentSize: a footer frame (first sequence number, count,
// data end) is appended, the file is truncated to its true length and
// fdatasynced, and only then is the next segment created, preallocated,
// and its name made durable with a directory fsync.
//
// A gap frame (a frame.KindPadding frame, see GapError) records that a
// forced Repair cut the records of a range of sequence numbers: its seq is
// the first missing one and its payload the count. Footers and durable
// marks count a gap's sequence numbers, so the chain of segments holds.
//
// # Recovery
//
// Open trusts the footer of every segment that has a successor, checks that
// the sequence numbers chain, and CRC-scans the last segment. With
// Options.VerifyOnOpen it CRC-scans every segment, and damage in a sealed
// one is a *CorruptionError too. Damage in the last segment past its
// durable mark is a torn tail (writes that no completed sync covered): it
// is cut, and Log.Recovery reports where and how many bytes. Damage
// anywhere a completed sync covered, a missing segment, or a bad footer is
// a *CorruptionError naming segment and byte offset: Open refuses to guess.
//
// Sequence numbers are consecutive, with one exception: a gap that a forced
// Repair recorded. Open accepts a recorded gap (Recovery.Gaps lists those
// it read) and appends continue after it; a hole in the sequence numbers
// with no gap frame is still a *CorruptionError. A Reader never passes a
// gap silently: Next stops at it and Err returns a *GapError; calling Next
// again goes on after it. Verify lists gaps in VerifyReport.Gaps and
// treats a log whose only flaws are recorded gaps as consistent.
//
// Repair cuts a torn tail. Forced, it repairs every damaged place and keeps
// every intact record: it cuts only the bytes that do not decode, keeps
// them in side files, and records the records lost there as gaps.
//
// # Concurrency
//
// Append, AppendBatch, Flush, Sync, WaitDurable, Stats, NextSeq and
// DurableSeq are safe for concurrent use. Close may be called concurrently
// with them: every call either completes before Close's final sync or
// returns ErrClosed. A Reader is for one goroutine.
package wal
