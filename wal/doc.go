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
// SyncNever leaves it to the OS. A WaitDurable or Sync with nobody else
// waiting, on a log with no sync in flight, and a context that can never be
// cancelled (context.Background), writes and syncs on its caller's
// goroutine (as raft-wal does) instead of handing the work to the flusher
// and waiting to be woken; with several waiters, the flusher's group
// commit serves them all, and a cancellable wait always leaves the I/O to
// the flusher, so that cancelling it returns even while the disk hangs. The goroutine that runs an fdatasync is
// blocked in the system call, holding its P, unless Options.ParkedSync
// parks it (for processes where several logs sync at once).
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
// ErrInUse naming it and the holder), a sparse index file beside each
// sealed segment (NAME.idx, a hint rebuilt from the data when missing or
// damaged), a cursors directory holding one checkpoint file per consumer
// cursor (see Cursor), a spare segment next-segment.tmp (preallocated for
// the next rotation; from a rotation until the sealer names it, the new
// segment itself, which Open and Repair name if its writer stopped
// first, and OpenReader reads on into), and, after a repair, side files
// whose names contain .cut. A directory with none of these but other files is not
// a log: Open, OpenReader, Verify and Repair refuse it (ErrNotLog) and
// create nothing in it, and so they do the root directory of a stream
// store (a *StoreError; the log of its stream NAME is
// STORE/streams/NAME/log). An empty directory is an empty log. The log's own
// files are opened without following symbolic links and only as regular
// files (vfs.FS.OpenRegular): a link, named pipe, directory or device in
// the place of one is an error naming it, and so is a link that a
// listing of the directory shows under a name of the log's own.
//
//	segment := file header page (4096 B) | frame ... frame | [footer frame]
//
// The header page (frame.FileHeader) holds the magic, version, kind and
// first sequence number, and a durable mark (frame.Mark): the end offset and
// next sequence number that a completed fdatasync made durable. The mark is
// written behind the syncs: a sync writes the state an earlier, completed
// sync made durable, at most once per 10 ms, and the flusher writes the
// last one when the log goes quiet, so the mark trails the last sync by
// about 10 ms at most. The header never claims more than the disk holds,
// and a synced append costs one write and one fdatasync. Records are
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
// durable mark is a torn tail (writes that no sync the mark records
// covered): it is cut, and Log.Recovery reports where and how many bytes.
// Since the mark trails the syncs, records acknowledged in the last few
// milliseconds before a crash are in that tail: if the disk damaged them
// after their sync, they are cut too (Kafka's recovery point trails its
// log by far more). Damage anywhere the mark covers, a missing segment, or
// a bad footer is a *CorruptionError naming segment and byte offset: Open
// refuses to guess.
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
// # Reading
//
// Log.NewReader follows an open log; OpenReader reads a log nobody has
// open (dump, verify) and, with Wait, follows one another process writes
// (inotify where the platform has it, a bounded poll otherwise).
// Both return a *Reader: Next advances (false at the end of what is
// visible, at a recorded gap, or on error; see Err), Seq and Record give
// the record. A Reader goes on after Next returned false:
//
//	r, err := l.NewReader(from, nil)
//	for {
//		for r.Next() {
//			use(r.Seq(), r.Record())
//		}
//		if err := r.Err(); err != nil && !wal.IsGap(err) {
//			return err
//		}
//		if err := r.Wait(ctx); err != nil { // ctx done, or ErrClosed
//			return err
//		}
//	}
//
// Visibility. By default (ReadWritten) a record is visible once the
// flusher handed it to the OS: a crash of this process cannot take it
// back, but a power cut or OS crash can take back every record not yet
// synced (those above DurableSeq). With ReaderOptions{Visibility:
// ReadDurable} a Reader sees only records that survived fdatasync. A
// Reader waiting in Wait makes the flusher write at once (and, for
// ReadDurable, sync at once), as WaitDurable does: a record appended to
// an idle log reaches a waiting Reader without waiting for FlushInterval
// (BenchmarkReadLatency).
//
// Zero copy. A Reader of an open Log maps each segment read-only and
// Record returns a slice of the mapping: it is valid until the next call
// to Next or Close, and must not be written to. Every record's CRC is
// checked before it is returned. Where a file cannot be mapped the Reader
// reads with ReadAt into a buffer of its own (same lifetime rule). A
// Reader holds one segment (its file handle and mapping) at a time and
// releases it when it moves on and on Close.
//
// Positioning. NewReader finds the segment of from by its name and the
// frame through a sparse in-memory index of the segment: a frame offset
// every 16 KiB, noted by the flusher as it writes. The sealer saves a
// sealed segment's index beside it (00000000000000000001.seg.idx, see
// index.go); a later Log loads it the first time a Reader positions in
// the segment, or, when it is missing or does not check, walks the
// segment's frame headers instead. The index is a hint: the Reader checks
// the frame it points at and scans from the segment's start when it is
// wrong (after a Repair rewrote the segment, say).
//
// No SIGBUS. A mapped file is never truncated below the bytes a Reader
// touches: a Reader touches only whole records the flusher already wrote.
// Sealing truncates a segment just past its footer, which no Reader
// reads; Close truncates the active segment to its last record; recovery
// cuts a torn tail at Open, before any Reader of that Log exists; Repair
// needs the log's lock (no Log open, so no mapping in any process: a
// Reader from OpenReader reads with ReadAt, not a mapping) and rebuilds a
// segment under a temporary name and renames it. Retention deletes whole
// files only; a Reader inside one finishes it from its mapping.
//
// # Retention
//
// TruncateFront(seq) deletes every segment that holds only records below
// seq (never the active one) and fsyncs the directory; Options.Retention
// bounds the log by bytes and age, applied by the sealer goroutine after
// each seal. Neither blocks appends, and unless Retention.IgnoreCursors
// neither deletes records at or above a Cursor's checkpointed position,
// that of a cursor OpenCursor creates in another process meanwhile
// included (a lock file in the cursors directory orders the two).
// FirstSeq is the first record left; NewReader below it, or a Reader that
// falls behind into deleted segments, gets a *TruncatedError
// (ErrTruncated) naming it.
//
// # Concurrency
//
// Append, AppendBatch, Flush, Sync, WaitDurable, Stats, NextSeq,
// DurableSeq, FirstSeq, NewReader and TruncateFront are safe for
// concurrent use. Close may be called concurrently with them: every call
// either completes before Close's final sync or returns ErrClosed. A
// Reader is for one goroutine; many Readers may follow one Log, each at
// its own position.
package wal
