// Package shmlog lets many processes, and many goroutines in each, append
// records to one log through shared memory (MAP_SHARED mappings of the log's
// files), with no lock and no system call per record. Any process opens the
// log with [Open]; the first creates it and the rest join. Readers follow new
// records as they are committed ([Log.NewReader], [OpenReader]).
//
// # Files
//
// A log named P is a series of files of one fixed size, MaxFileSize bytes
// each: P is file 0 and file i ≥ 1 is P.%08d (P.00000001, ...), plus the
// lock file P.lock. A symlink given as P stands for the name it leads to,
// after which the other files are named. Every file is preallocated for
// real (fallocate(2)) before any process maps it, so a full disk is an
// error from Open or Append, never a fault on a mapped page. Each file is a 4096-byte header page followed by
// its data region of C = MaxFileSize-4096 bytes. All integers are
// little-endian; every shared word is 8 bytes at an 8-aligned offset and is
// read and written only with atomic 64-bit loads, stores, adds and CASes.
//
//	offset  size  field (header page)
//	     0    64  frame file header (see package frame): magic "APNDLOG\x00",
//	              version 1, file kind 2 (shm), first position (i<<32), CRC
//	    64    64  zero
//	   128     8  C, the data bytes of each file (a multiple of 8, ≥ 4096)
//	   136     8  i, this file's index
//	   144     4  frame alignment: 8
//	   148     4  slot count: 48
//	   152     4  log id: random, drawn when file 0 is made and copied
//	              into every later file (0: unknown, from a writer that
//	              predates it); a file whose id is another log's is
//	              refused
//	   156     4  masked CRC-32C (frame.Mask) of [128:156)
//	   256     8  tail: bytes of the data region claimed so far (atomic;
//	              may run past C once the file is full)
//	   320     8  active: index of the file being appended to (file 0 only)
//	   384     8  padded: frames padded over for dead writers (file 0 only)
//	   448     8  waiters: readers asleep on wake (file 0 only)
//	   512     8  wake: bumped by writers that see waiters (file 0 only;
//	              readers sleep on its low 32 bits with futex(2))
//	  1024  3072  slot table (file 0 only): 48 slots of 64 bytes, one per
//	              open Log, see Slots
//
// # Positions and frames
//
// A record's position is i<<32 | o, where o is the offset of its frame in
// the data region of file i (file offset 4096+o). Frames are those of
// package frame: a 16-byte header (CRC u32, kind<<30|length u32, seq u64)
// and the payload; seq is the frame's position. Each frame starts at a
// multiple of 8: a frame of n payload bytes takes S(n) = (16+n+7)&^7 bytes,
// and the 0 to 7 bytes after its payload are zero. The first 8 bytes of a
// frame header, read as one little-endian u64 W, say where the frame is:
//
//	W == 0                         claimed (o < tail) but not yet started,
//	                               or, at o ≥ tail, not claimed
//	W>>62 == 0, W != 0             in progress: W = n<<32 | gen<<16 | slot+1
//	                               (payload length n, owner slot and the
//	                               low 16 bits of the slot's generation)
//	W>>62 == 1 (record)            committed: W = (1<<30|n)<<32 | CRC, CRC
//	                               over header bytes [4:16) and the payload
//	W>>62 == 2 (padding)           skipped: W = (2<<30|n)<<32 | CRC, CRC over
//	                               header bytes [4:16) only; the n body
//	                               bytes are not checked
//
// # Appending
//
// To append n bytes (n ≤ C-16), a writer:
//
//  1. adds 1 to its slot's entered counter;
//  2. claims: o = atomic add of S(n) to the file's tail, minus S(n);
//  3. if o+S(n) ≤ C: CASes W at o from 0 to its in-progress word, then
//     adds 1 to its slot's left counter, stores seq, copies the payload, computes
//     the CRC and commits by CASing W from its in-progress word to the
//     record word. A failed commit CAS means another process padded the
//     frame over (the owner was judged dead): the record is not in the log
//     and the append reports an error; the bytes under the padding are
//     never read. A failed first CAS means the same.
//  4. if o < C < o+S(n) (the claim crosses the end): if C-o ≥ 16, CASes W
//     at o from 0 to a padding frame of C-o-16 bytes (seq stored first);
//     adds 1 to left; then rolls (5) and retries in file i+1.
//  5. if o ≥ C: adds 1 to left and rolls: under an exclusive
//     flock of P.lock, if active is still i, creates file i+1 (written to
//     a temporary name of its own, preallocated, header filled and
//     fdatasynced, linked into place: a file of that name is never
//     replaced, but kept)
//     and sets active to i+1; then maps file active and retries there.
//     A Log whose P no longer names the file 0 it opened (the log was
//     removed or replaced) fails instead: the files named P.%08d may be
//     another log's.
//
// P.lock must be a regular file of its own (a symlink to one will do): one
// that is file 0 through a link, whose flock every Log holds shared, is
// refused. Whoever takes the flock of P.lock (Open, a roll, Close) checks,
// once it holds it, that P.lock still names the file it locked, and opens
// the name again and retries if not: were P.lock removed while the log is
// in use, processes holding the old file and processes that created a
// new one would otherwise each hold "the" lock. A removal while a process holds
// the lock is seen at its next lock; meanwhile a process that locks a new
// P.lock may roll at the same time, and as no file is made by replacing
// another, the two rolls end in the same file.
//
// After a successful commit, a writer that reads waiters ≠ 0 adds 1 to
// wake and wakes every futex(2) waiter on it (FUTEX_WAKE, not private). A
// writer that skips this step is still correct: sleeping readers then see
// its record when their sleep times out.
//
// A reader reaching offset o of file i with C-o < 16 moves to file i+1
// (found by name: it fails instead if P no longer names the file 0 it
// opened, as a roll does). A
// reader with nothing to read adds 1 to waiters, reads wake, looks again,
// then sleeps with FUTEX_WAIT on wake's value with a timeout, and subtracts
// 1 from waiters. A reader killed while asleep leaves waiters above 0, and
// writers then wake on every commit until the next recovering Open.
//
// # Slots
//
// A slot is [0:8) state = generation<<32 | pid (pid 0: free), [8:16) the
// process start time (field 22 of /proc/PID/stat, 0 while registering),
// [16:24) entered and [24:32) left, the counts of the process's claims that
// passed step 1 and that passed the end of step 3, 4 or 5: entered - left
// claims are between their tail add and their header, and [32:40) first,
// the position where appends stood when the process took the slot
// (active<<32 | min(tail, C)): every claim of the process is at or after
// it. Open takes a free slot, or one whose process is gone, under the
// exclusive flock of P.lock, by CASing state to generation+1 and the new
// pid, then stores the start time, zeroes the counts and stores first;
// Close frees it (generation+1, pid 0). An in-progress word holds only the
// generation's low 16 bits, which come round again after 65,536 takes of
// the slot: first tells a claim left by an earlier owner from one of the
// live owner whose generation matches it so. The full 32-bit generation in
// state, which snapshots compare, would take 2^32 takes to come round. A
// process is gone if /proc/PID/stat is a zombie's or its start time
// differs, or if it is missing and kill(PID, 0) fails with ESRCH (procfs
// mounted with hidepid hides other users' processes, which are then live
// with an unknown start time). Pids are those of one pid namespace. At
// most 48 Logs have the log open at once; Open returns
// ErrNoSlot beyond that.
//
// # Dead writers
//
// A reader whose next frame stays unfinished for CommitTimeout pads it
// over, counted in padded, when it is safe:
//
//   - in progress (W>>62 == 0): when the owner slot's generation no longer
//     matches, the frame is before the slot's first, or the owner's
//     process is gone (or, with LiveTimeout set, after
//     LiveTimeout whatever the owner): store seq, then CAS W from the
//     in-progress word to a padding word of the same length. The owner, if
//     it was only stopped, fails its commit CAS and never overwrites. A
//     word in progress whose slot+1 is not 1 to 48 is no writer's: it is
//     damage (a *CorruptError), never padded over.
//   - claimed but not started (W == 0 at o < tail): the reader reads tail
//     T, then each slot's state and entered count E; once every slot
//     still in that state has been seen since with left = entered (left
//     loaded first: no claim in flight), or has a process that is gone, or
//     entered below E (an Open taking the slot over zeroed the counts after
//     the snapshot read them), every claim below T by a live process has
//     written its W, so the zero words from o up to the next non-zero word
//     below min(T, C) belong to dead claimers: CAS W at o from 0 to one
//     padding frame over that range, or, if the range is longer than a
//     frame can be (frame.MaxPayload+16 bytes, as with files of more than
//     1 GiB of data), to the first of several, each CASed from 0 in turn
//     where the one before ends (a recovering Open pads so too). The
//     word at o+8 may hold o's position instead of zero: whoever pads
//     (step 4, a reader, a recovering Open) stores seq before W, and may
//     have been killed between the two.
//     left ≥ E is not enough: a process's goroutines leave in any order,
//     so claims entered after the snapshot could stand in for a stalled
//     one below T, and the padding would cover a live claim whose header
//     CAS then succeeds inside the padding's body (a record acknowledged
//     and never read). Each slot is seen quiet on its own, not all at one
//     moment, so busy writers in many processes do not starve the reader.
//
// A live writer is never padded over while its process lives, unless
// LiveTimeout says so. Writers never wait for each other (except for the
// flock while one creates the next file): only readers wait for a frame,
// and a dead writer stalls them for CommitTimeout.
//
// # Durability
//
// Append returns once the frame is committed in the shared mapping: the
// bytes are in the page cache, so a record whose Append returned survives
// SIGKILL of any or all processes. [Log.Sync] fdatasyncs every file
// appended to since the last Sync, and, after a roll, the directory and
// then file 0 (its active word): after a power cut, every record
// committed before a completed Sync is in the file, whole. Frames after
// that may be torn: readers and [Verify] check each record's CRC and report
// a torn frame as a [*CorruptError] naming the file and byte offset, and
// the next Open of the otherwise closed log cuts it (see Recovery).
//
// # Recovery
//
// An Open that finds no other process with the log open (it gets the
// exclusive flock on file 0, see below) recovers the active file before
// joining: every process that had it is gone. It walks the frames from the
// start, past a stale tail if frames decode there; pads over unfinished
// frames; stops at the first frame that does not decode (a torn write);
// zeroes every non-zero word after the last valid frame (to the end of the
// file, or of what a clean Close left); sets the tail there; and zeroes
// waiters and every slot's first (the tail may have moved back before a
// first stored earlier, and a process of a binary that predates the word
// takes a slot without storing it). Files after the active one are
// recovered so too: a power cut that lost file 0's move of active (not
// yet made durable by a Sync) leaves the file it moved to with records, a
// tail word that may lag them and maybe a torn last frame. If one holds
// records, active moves on to the last that does, and the space left in
// the files before it is padded over: appends follow those records. A
// power cut can also keep that move but lose the new file's directory
// entry: if the file active names is missing and the one before it is
// there, the Open moves active back to it. It removes the temporary files
// that processes killed while making a file left. [Log.Recovery] reports
// what it did. Files before the active one are full and were not being
// written; [Verify] checks them.
//
// # Closing and trimming
//
// Every open Log and Reader holds a shared flock on file 0 for its
// lifetime. Close takes the exclusive flock of P.lock (which Open also
// holds while it joins; if it cannot, it trims nothing and returns why),
// unmaps, and if it can then take an exclusive flock
// on file 0 it is the last user: it cuts the active file after its tail
// (rounded up to a page, never past the file's full size), unless P no
// longer names the file 0 it opened (the files were removed or replaced: a
// new log may be there). The next Open preallocates the file again
// before mapping it. No mapped page is ever cut under a live process.
//
// # Concurrency and lifetimes
//
// A Log is safe for concurrent use by many goroutines, except Close, which
// must not run concurrently with other calls. A Reader is not safe for
// concurrent use; a Record's Payload aliases the mapping and is valid until
// the Reader's next call.
package shmlog
