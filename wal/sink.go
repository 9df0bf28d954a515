package wal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/hist"
	"github.com/appendlog/appendlog/internal/vfs"
)

// segWriter is the engine's Sink: it lays the committed byte stream into
// segment files. All its methods run on the engine's flusher goroutine,
// except the atomic fields, which any goroutine may read.
//
// It walks the frame headers as the bytes go by (they arrive in claim order,
// cut at arbitrary points) so that it knows where each record ends: segments
// are sealed only at a record boundary, the durable mark names the end of
// the last whole record, and durable sequence numbers are exact.
//
// "Flusher only" below means under the engine's sink lock: on the flusher,
// or on a lone waiter's goroutine in engine.SyncInline, which also runs the
// prepared sync there instead of on the syncer.
type segWriter struct {
	fsys    vfs.FS
	dir     string
	segSize int64
	maxRec  int
	id      frame.LogID // written into each new segment's header

	f        vfs.File
	name     string
	firstSeq uint64 // first sequence number of the current segment
	count    uint64 // whole records in the current segment
	startPos uint64 // engine position of file offset startOff
	startOff int64
	// zeroed is the file offset up to which the current segment has been
	// written, records or zero padding (see _zeroAhead); iov gathers the
	// buffers of one writeOut. unsynced counts the bytes written since the
	// last sync, and padding is set while the last sync covered fewer
	// than _padBelow. Flusher only.
	zeroed   int64
	iov      [][]byte
	unsynced int64
	padding  bool

	// Frame walker state.
	frameStart uint64 // engine position of the frame being walked
	inFrame    bool   // header parsed; frameEnd valid
	frameEnd   uint64
	frameSeq   uint64
	hdr        [frame.HeaderSize]byte
	nhdr       int
	nextSeq    uint64 // sequence number after the last whole record written

	// Durable-mark bookkeeping: mark is what the last completed sync made
	// durable in this segment; it is written into the header by the next
	// sync (so the header never claims more than a completed sync covered).
	mark        frame.Mark
	markWritten frame.Mark
	markBuf     [frame.MarkSize]byte
	// markAt is when a mark was last written into the header, and
	// markEvery how long a completed sync's mark may wait (_markEvery;
	// tests change it). Flusher only.
	markAt    time.Time
	markEvery time.Duration

	// spare is a preallocated file under a temporary name that becomes the
	// next segment at rotation; sealing runs on the sealer goroutine.
	spare  vfs.File
	seals  chan *sealJob // to the sealer; capacity 1: one seal in flight
	sealed chan struct{} // closed when the sealer exits
	// pending is the seal in flight, or nil. Flusher only.
	pending *sealJob
	// sj is the sync PrepareSync prepared: the engine never has two in
	// flight, so one is reused. Its fields are written by the flusher in
	// PrepareSync and read by the syncer in runSync; the engine's hand-over
	// of the job (a channel send) orders the two, and the flusher prepares
	// the next only after the syncer reported this one's result.
	sj struct {
		fn        func() error // w.runSync, bound once so PrepareSync does not allocate
		seal      *sealJob
		f         vfs.File
		name      string
		writeMark bool
		next      uint64
		ok        bool          // the sync succeeded; written before its token is sent
		done      chan struct{} // capacity 1: a token per finished sync
		// finished is set, and notify (if set) closed, when the sync
		// ends, before its token is sent: how a rotation hands the wait
		// for a sync of the segment it seals to the sealer (see rotate).
		// Whichever of runSync and rotate swaps notify out closes it.
		finished atomic.Bool
		notify   atomic.Pointer[chan struct{}]
	}
	// syncing is set while a sync prepared on the current file, or on the
	// one a rotation just sealed (see rotate), has not been waited for
	// (waitSyncing); its token arrives on sj.done. Flusher only.
	syncing bool

	// syncErr is the error of the first sync that failed, stored before
	// that sync reports. No segment is fdatasynced after it (not by a
	// seal, not by a later sync): on Linux an fdatasync after a failed one
	// may succeed though the page cache dropped the data, and the records
	// it would report durable are not.
	syncErr atomic.Pointer[error]

	// syncLatency times each fdatasync the syncer runs; syncedRecords
	// counts the records they made durable. Syncer writes, Stats reads.
	syncLatency   hist.Atomic
	syncedRecords atomic.Uint64

	// durable is the sequence number after the last durable record.
	durable atomic.Uint64
	// written is the sequence number after the last whole record handed
	// to the OS: what a ReadWritten Reader may see. Stored after the
	// records' bytes were written (and, at a rotation, after the table
	// lists the new segment).
	written atomic.Uint64
	// live is the active segment's entry in table (nil without one), and
	// indexed the offset of the last frame noted in its index. Flusher
	// only.
	live    *liveSeg
	indexed int64
	// table lists the segments for Readers of the open Log; rotate adds
	// each new one. nil for a segWriter not behind a Log.
	table *segTable
	// onSeal, if set, runs on the sealer after each successful seal
	// (retention).
	onSeal func()
	// now reads the log's clock (seal times for retention).
	now func() time.Time
	// sealIdle, if set (Retention.MaxAge), seals the active segment
	// before a write when nothing was written to it for sealIdle, so that
	// retention can delete its old records (see sealAged). lastWrite is
	// the time of the last write. Flusher only.
	sealIdle  time.Duration
	lastWrite time.Time
	// segments counts segments created (for stats and tests).
	segments atomic.Int64
}

var (
	_ engine.PipelinedSink = (*segWriter)(nil)
	_ engine.TimedSink     = (*segWriter)(nil)
)

// fileOff returns the segment file offset of engine position pos.
func (w *segWriter) fileOff(pos uint64) int64 {
	return w.startOff + int64(pos-w.startPos)
}

// Write implements engine.Sink. The bytes bound for one segment go out in
// one gathered write (writeOut), so a range that wraps the ring costs one
// system call; zero padding may follow it (see _zeroAhead).
func (w *segWriter) Write(pos uint64, a, b []byte) error {
	if w.sealIdle > 0 {
		if err := w.sealAged(pos); err != nil {
			return err
		}
	}
	w.iov = w.iov[:0]
	from := pos
	for _, chunk := range [2][]byte{a, b} {
		for len(chunk) > 0 {
			n, rotate, err := w.walk(chunk, pos)
			if err != nil {
				return err
			}
			w.iov = append(w.iov, chunk[:n])
			pos += uint64(n)
			chunk = chunk[n:]
			if rotate {
				if err := w.writeOut(from, pos); err != nil {
					return err
				}
				if err := w.rotate(pos); err != nil {
					return err
				}
				w.iov, from = w.iov[:0], pos
			}
		}
	}
	if len(w.iov) > 0 {
		if err := w.writeOut(from, pos); err != nil {
			return err
		}
	}
	engine.StoreMax(&w.written, w.nextSeq)
	return nil
}

// _zeroAhead is the unit of zero padding, and _padBelow the most bytes a
// sync, or a write, may cover for the writes after it to be padded.
//
// A segment file is preallocated (fallocate), so its blocks start as
// unwritten extents. The first write into one converts it, and the
// fdatasync after that write must then commit the file system's journal
// too, which costs about as much again as the data write. Group commit
// writes a few KiB per fdatasync, so nearly every sync would pay it. While
// the syncs are that small (the last one covered fewer than _padBelow
// bytes), a small write that reaches past what the file has had written is
// therefore followed, in the same system call, by zeros up to the next
// multiple of _zeroAhead: one conversion then serves every sync until the
// records reach it. (PostgreSQL zero-fills whole WAL segments,
// wal_init_zero, for the same reason.) Readers and recovery already take
// zeros past the last record for the end of the data; seal and Close
// truncate them away. A log whose syncs each cover more (a busy stream, a
// log that rarely syncs) converts its extents at a cost the sync
// amortizes, and a large write converts its own: padding them would write
// every byte twice for nothing.
//
// The zeros go in pieces of at most _padPiece, each a write of its own
// ending on a multiple of _padPiece (the first one in the same call as the
// records). Written as one call, the padding became large page-cache
// folios, and the readers' mappings of the segments held far more of
// them in the process's RSS: with a thousand streams read at once, enough
// to break the store's memory bound (BENCHMARKS.md, stream).
const (
	_zeroAhead = 256 << 10
	_padPiece  = 64 << 10
	_padBelow  = 64 << 10
)

// _zeros is the padding writeOut writes; never written to.
var _zeros [_padPiece]byte

// writeOut writes w.iov, the bytes at engine positions [from, to) of the
// current segment, in one system call. A small write that reaches past
// w.zeroed while syncs are small (see _zeroAhead) carries zeros up to the
// next multiple of _padPiece in the same call, and is followed by writes
// of _padPiece zeros up to the next multiple of _zeroAhead.
func (w *segWriter) writeOut(from, to uint64) error {
	off, end := w.fileOff(from), w.fileOff(to)
	w.unsynced += int64(to - from)
	padFrom, padTo := int64(0), int64(0) // zeros written after the call
	if end > w.zeroed {
		w.zeroed = end
		if w.padding && to-from < _padBelow {
			if pad := min((end+_zeroAhead-1)/_zeroAhead*_zeroAhead, w.segSize); pad > end {
				if padFrom = min((end+_padPiece-1)/_padPiece*_padPiece, pad); padFrom > end {
					w.iov = append(w.iov, _zeros[:padFrom-end])
				}
				padTo, w.zeroed = pad, pad
			}
		}
	}
	var err error
	if len(w.iov) == 1 {
		_, err = w.f.WriteAt(w.iov[0], off)
	} else {
		_, err = w.f.WritevAt(w.iov, off)
	}
	for o := padFrom; err == nil && o < padTo; o += _padPiece {
		off = o
		_, err = w.f.WriteAt(_zeros[:min(_padPiece, padTo-o)], o)
	}
	if err != nil {
		return fmt.Errorf("wal: write %s at %d: %w", w.name, off, err)
	}
	return nil
}

// walk advances the frame walker over p (at engine position pos). It returns
// how many bytes of p belong to the current segment: all of p, or the bytes
// up to the end of the record that filled the segment (rotate true).
func (w *segWriter) walk(p []byte, pos uint64) (n int, rotate bool, err error) {
	end := pos + uint64(len(p))
	at := pos
	for at < end {
		if !w.inFrame {
			k := copy(w.hdr[w.nhdr:], p[at-pos:])
			w.nhdr += k
			at += uint64(k)
			if w.nhdr < frame.HeaderSize {
				break
			}
			w.nhdr = 0
			word := binary.LittleEndian.Uint32(w.hdr[4:8])
			length := word & (1<<30 - 1)
			if frame.Kind(word>>30) != frame.KindRecord || int(length) > w.maxRec {
				// We encoded every frame ourselves: this is a bug, and
				// writing on would lay garbage into the log.
				return 0, false, fmt.Errorf("wal: internal error: bad frame at log position %d (word %#x)", w.frameStart, word)
			}
			w.frameSeq = binary.LittleEndian.Uint64(w.hdr[8:16])
			w.frameEnd = w.frameStart + frame.HeaderSize + uint64(length)
			w.inFrame = true
		}
		if w.frameEnd > end {
			break
		}
		at = w.frameEnd
		w.inFrame = false
		if w.live != nil {
			if off := w.fileOff(w.frameStart); off-w.indexed >= _indexEvery {
				w.live.note(w.frameSeq, off, binary.LittleEndian.Uint32(w.hdr[0:4]))
				w.indexed = off
			}
		}
		w.frameStart = w.frameEnd
		w.nextSeq = w.frameSeq + 1
		w.count++
		if w.fileOff(at) >= w.segSize-frame.FooterSize {
			return int(at - pos), true, nil
		}
	}
	return len(p), false, nil
}

// spareName is the temporary name of the preallocated next segment, and
// of a rotation's new segment until the sealer names it. Records in it
// are never reported durable (see rotate), but the flusher writes into it
// before it has its name: Open names it if it is the next segment (see
// adoptSpare) and removes it otherwise.
const spareName = "next-segment.tmp"

// sealJob is one rotation's work for the sealer goroutine.
type sealJob struct {
	old      vfs.File // the sealed segment: footer written, truncated
	oldName  string
	next     vfs.File // the new segment, still under spareName
	nextName string
	nextSeq  uint64 // sequence number after the old segment's last record
	// synced, if not nil, is closed when the sync of the old segment that
	// was in flight at the rotation ends: the sealer waits for it before
	// it syncs and closes the file.
	synced   chan struct{}
	done     chan struct{}
	err      error    // set before done is closed
	oldLive  *liveSeg // the sealed segment's table entry (its index), or nil
	spare    vfs.File
	spareErr error
	// nextLive is the new segment's table entry, whose named the sealer
	// closes; nil when the writer has no table.
	nextLive *liveSeg
}

// rotate seals the current segment at engine position pos (a record
// boundary) and continues in the next one without waiting for the disk:
// the flusher writes the footer and truncates (page-cache work), turns the
// spare file into the next segment by writing its header, and goes on
// writing into it; the sealer goroutine then fdatasyncs the old segment,
// and only after that gives the new one its real name (rename + directory
// fsync). So a segment with a successor is always durably sealed, as
// recovery assumes, and records in a segment still under spareName are
// never reported durable: Sync waits for the seal first.
func (w *segWriter) rotate(pos uint64) error {
	if err := w.waitSeal(); err != nil {
		return err
	}
	// A sync still in flight is on this segment (the seal just waited for
	// covered any sync of the one before). The flusher does not wait for
	// it, which would hold every append for an fdatasync: the sealer does,
	// before it syncs and closes the file. Its token stays for the flusher
	// to collect (settled), and its mark is the old segment's, which the
	// reset below leaves behind.
	var synced chan struct{}
	if w.syncing && !w.syncSettled() {
		c := make(chan struct{})
		w.sj.notify.Store(&c)
		if w.sj.finished.Load() {
			if p := w.sj.notify.Swap(nil); p != nil {
				close(*p)
			}
		}
		synced = c
	}
	dataEnd := w.fileOff(pos)
	var ft [frame.FooterSize]byte
	frame.PutFooter(ft[:], frame.Footer{FirstSeq: w.firstSeq, Count: w.count, DataEnd: dataEnd})
	if _, err := w.f.WriteAt(ft[:], dataEnd); err != nil {
		return fmt.Errorf("wal: seal %s: %w", w.name, err)
	}
	if err := w.f.Truncate(dataEnd + frame.FooterSize); err != nil {
		return fmt.Errorf("wal: seal %s: %w", w.name, err)
	}
	next := w.spare
	w.spare = nil
	if next == nil {
		var err error
		if next, err = createSpare(w.fsys, w.dir, w.segSize); err != nil {
			return err
		}
	}
	if _, err := next.WriteAt(headerPageFor(w.nextSeq, w.id), 0); err != nil {
		next.Close()
		return fmt.Errorf("wal: start segment %s: %w", segmentName(w.nextSeq), err)
	}
	oldLive := w.live
	var nextLive *liveSeg
	if w.table != nil {
		// Readers reach the new segment through this handle: its name is
		// spareName until the sealer renames it.
		rf, err := w.fsys.OpenRegular(filepath.Join(w.dir, spareName), os.O_RDONLY, 0)
		if err != nil {
			next.Close()
			return fmt.Errorf("wal: start segment %s: open for readers: %w", segmentName(w.nextSeq), err)
		}
		at := time.Now()
		if w.now != nil {
			at = w.now()
		}
		ls := &liveSeg{firstSeq: w.nextSeq, name: segmentName(w.nextSeq), refs: 1, f: rf, named: make(chan struct{})}
		w.table.rotated(w.nextSeq, dataEnd+frame.FooterSize, at, ls)
		w.live, w.indexed, nextLive = ls, headerPage, ls
	}
	job := &sealJob{old: w.f, oldName: w.name, next: next, nextName: segmentName(w.nextSeq), nextSeq: w.nextSeq, synced: synced, done: make(chan struct{}), oldLive: oldLive, nextLive: nextLive}
	w.pending = job
	w.seals <- job
	w.segments.Add(1)
	w.f, w.name = next, job.nextName
	w.firstSeq, w.count = w.nextSeq, 0
	w.startPos, w.startOff, w.zeroed = pos, headerPage, headerPage
	w.mark, w.markWritten = frame.Mark{}, frame.Mark{}
	return nil
}

// waitSeal waits for the seal in flight, if any, and returns its error.
// Flusher only.
func (w *segWriter) waitSeal() error {
	job := w.pending
	if job == nil {
		return nil
	}
	<-job.done
	w.pending = nil
	if job.spare != nil {
		w.spare = job.spare
	}
	return job.err
}

// sealLoop is the sealer goroutine: it makes each rotation durable in
// order, and prepares the next spare file. It exits when seals is closed.
func (w *segWriter) sealLoop() {
	defer close(w.sealed)
	var failed error
	for job := range w.seals {
		if failed == nil {
			failed = w.seal(job)
			if failed == nil {
				// Prepare the next rotation's file now, off the write path.
				job.spare, job.spareErr = createSpare(w.fsys, w.dir, w.segSize)
			}
		} else {
			if job.synced != nil {
				<-job.synced
			}
			job.old.Close()
		}
		job.err = failed
		if s := job.nextLive; s != nil {
			s.nameErr = failed
			close(s.named)
		}
		close(job.done)
		if failed == nil && job.oldLive != nil {
			_ = w.table.writeIndexFile(job.oldLive) // a hint: without it a later Open walks the segment
		}
		if failed == nil && w.onSeal != nil {
			w.onSeal()
		}
	}
}

func (w *segWriter) seal(job *sealJob) error {
	if job.synced != nil {
		<-job.synced // the sync that was in flight on it at the rotation
	}
	if p := w.syncErr.Load(); p != nil {
		job.old.Close()
		return fmt.Errorf("wal: seal %s after a failed sync: %w", job.oldName, *p)
	}
	if err := job.old.Sync(); err != nil {
		job.old.Close()
		return fmt.Errorf("wal: seal %s: fdatasync: %w", job.oldName, err)
	}
	if err := job.old.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", job.oldName, err)
	}
	// The new segment's header must be durable before its name is.
	if err := job.next.Sync(); err != nil {
		return fmt.Errorf("wal: start segment %s: fdatasync: %w", job.nextName, err)
	}
	if err := w.fsys.Rename(filepath.Join(w.dir, spareName), filepath.Join(w.dir, job.nextName)); err != nil {
		return fmt.Errorf("wal: start segment %s: %w", job.nextName, err)
	}
	if err := w.fsys.SyncDir(w.dir); err != nil {
		return fmt.Errorf("wal: start segment %s: sync directory: %w", job.nextName, err)
	}
	engine.StoreMax(&w.durable, job.nextSeq) // every record of the sealed segment
	return nil
}

// createSpare creates and preallocates the spare file.
func createSpare(fsys vfs.FS, dir string, size int64) (vfs.File, error) {
	f, err := fsys.OpenRegular(filepath.Join(dir, spareName), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: create spare segment: %w", err)
	}
	if err := f.Preallocate(0, size); err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: preallocate spare segment: %w", err)
	}
	return f, nil
}

// Sync implements engine.Sink.
func (w *segWriter) Sync() error { return w.PrepareSync()() }

// PrepareSync implements engine.PipelinedSink: it captures, on the flusher,
// what a sync started now covers, and returns the function the engine's
// syncer runs while the flusher goes on writing: wait for a seal in flight
// (records of a segment are durable only once it has its name), write the
// mark of an earlier sync into the header if one is due (markDueIn), fdatasync,
// and publish the new durable sequence number.
//
// A mark describes a sync that the engine finished before calling
// PrepareSync again: the header never claims more than a completed sync
// covered.
func (w *segWriter) PrepareSync() func() error {
	if w.sj.fn == nil {
		w.sj.fn = w.runSync
		w.sj.done = make(chan struct{}, 1)
	}
	// The engine finished the sync before this one: collect its token so
	// that the one this sync sends is the only one.
	w.waitSyncing()
	writeMark := w.markDueIn(w.now()) == 0 // settled: waitSyncing above
	if writeMark {
		w.putMark()
	}
	w.sj.seal, w.sj.f, w.sj.name, w.sj.writeMark, w.sj.next = w.pending, w.f, w.name, writeMark, w.nextSeq
	w.sj.finished.Store(false)
	// True once this sync completes; written into the header later.
	w.mark = frame.Mark{DurableEnd: w.fileOff(w.frameStart), NextSeq: w.nextSeq}
	w.syncing = true // a rotation hands the wait for it to the sealer
	w.padding, w.unsynced = w.unsynced < _padBelow, 0
	return w.sj.fn
}

// _markEvery is how long a completed sync's mark may wait to be written
// into the header.
//
// The mark is a second write to another page of the file. Written with
// every sync, it would make each synced append cost two writes and each
// fdatasync flush two pages; instead a sync writes the mark only if the
// last one was written _markEvery ago, and the flusher writes a mark left
// behind when the log goes quiet (TimedTick). So the mark trails the
// durable records by at most about _markEvery, which bounds two things: how
// much of a crashed log's tail recovery can only treat as possibly torn
// (damage there is cut rather than reported: Kafka's recovery point trails
// the log by far more), and how late a process that follows the files
// (OpenReader, OpenCursor) learns from the header how far the log is
// durable.
const _markEvery = 10 * time.Millisecond

// putMark encodes the mark of the completed sync into markBuf, to be
// written by the caller, and notes it as written.
func (w *segWriter) putMark() {
	frame.PutMark(w.markBuf[:], w.mark)
	w.markWritten = w.mark
	w.markAt = w.now()
}

// runSync runs the sync PrepareSync prepared, on the engine's syncer.
func (w *segWriter) runSync() (err error) {
	j := &w.sj
	defer func() {
		j.ok = err == nil
		if err != nil {
			first := err // escapes only on failure
			w.syncErr.CompareAndSwap(nil, &first)
		}
		j.finished.Store(true)
		if p := j.notify.Swap(nil); p != nil {
			close(*p)
		}
		j.done <- struct{}{}
	}()
	if j.seal != nil {
		<-j.seal.done
		if j.seal.err != nil {
			return j.seal.err
		}
	}
	if p := w.syncErr.Load(); p != nil {
		return *p // never retried, whoever asks
	}
	if j.writeMark {
		if _, err := j.f.WriteAt(w.markBuf[:], frame.MarkOffset); err != nil {
			return fmt.Errorf("wal: write mark %s: %w", j.name, err)
		}
	}
	start := time.Now()
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("wal: fdatasync %s: %w", j.name, err)
	}
	w.syncLatency.Record(time.Since(start))
	if prev := w.durable.Load(); j.next > prev {
		w.syncedRecords.Add(j.next - prev)
	}
	engine.StoreMax(&w.durable, j.next)
	return nil
}

// TickIn implements engine.TimedSink: the earlier of when the mark of a
// completed sync is due (_markEvery after the last mark was written) and
// when a quiet active segment is due to be sealed (sealDueIn).
func (w *segWriter) TickIn(now time.Time) time.Duration {
	d := w.sealDueIn(now)
	if m := w.markDueIn(now); m >= 0 && (d < 0 || m < d) {
		d = m
	}
	return d
}

// markDueIn returns how long until the mark of the last sync is due to be
// written, or -1 when there is none to write, or the sync is still in
// flight (its completion brings the flusher round). Flusher only.
func (w *segWriter) markDueIn(now time.Time) time.Duration {
	if w.mark == w.markWritten || !w.syncSettled() {
		return -1
	}
	return max(w.markEvery-now.Sub(w.markAt), 0)
}

// TimedTick implements engine.TimedSink. It writes the mark of the last
// sync into the header if it is due, the mark a log that went quiet would
// otherwise leave unwritten; it does not sync: the next sync, or Close,
// makes it durable, and readers in other processes see it at once. And it
// seals the active segment if it is due (Retention.MaxAge), so that a log
// that gets no more appends still loses its expired records.
func (w *segWriter) TimedTick() error {
	now := w.now()
	if w.markDueIn(now) == 0 {
		w.putMark()
		if _, err := w.f.WriteAt(w.markBuf[:], frame.MarkOffset); err != nil {
			return fmt.Errorf("wal: write mark %s: %w", w.name, err)
		}
	}
	if w.sealDueIn(now) == 0 {
		// With no frame partly walked, frameStart is the end of every
		// byte written.
		return w.sealQuiet(w.frameStart, w.lastWrite)
	}
	return nil
}

// waitSyncing waits for a sync in flight on the current file. Flusher only.
func (w *segWriter) waitSyncing() {
	if w.syncing {
		<-w.sj.done
		w.settled()
	}
}

// syncSettled reports, without waiting, whether no sync is in flight on
// the current file. Flusher only.
func (w *segWriter) syncSettled() bool {
	if w.syncing {
		select {
		case <-w.sj.done:
			w.settled()
		default:
			return false
		}
	}
	return true
}

// settled notes that the sync in flight finished: its mark is true now,
// unless it failed, which made nothing durable (the engine fails on its
// result; until then no mark may claim it).
func (w *segWriter) settled() {
	w.syncing = false
	if !w.sj.ok {
		w.mark = w.markWritten
	}
}

// closeFile writes the final mark (everything written is durable after the
// engine's last sync), syncs it and closes the file. Called after the
// engine has stopped.
func (w *segWriter) closeFile(synced bool) error {
	w.waitSyncing()
	serr := w.waitSeal()
	if w.seals != nil {
		close(w.seals)
		<-w.sealed
		w.seals = nil
	}
	if w.spare != nil {
		w.spare.Close()
		w.spare = nil
		// A spare never holds records; leave the directory as it was.
		w.fsys.Remove(filepath.Join(w.dir, spareName))
	}
	if w.f == nil {
		return serr
	}
	err := serr
	if err == nil && synced {
		// Drop the preallocated zeros after the last record, so the next
		// Open's scan ends at EOF instead of reading them (it preallocates
		// again), and record the final durable state.
		// Everything written is synced: the last whole record ends the data.
		w.mark = frame.Mark{DurableEnd: w.fileOff(w.frameStart), NextSeq: w.nextSeq}
		if err = w.f.Truncate(w.mark.DurableEnd); err == nil {
			frame.PutMark(w.markBuf[:], w.mark)
			if _, err = w.f.WriteAt(w.markBuf[:], frame.MarkOffset); err == nil {
				err = w.f.Sync()
			}
		}
		if err != nil {
			err = fmt.Errorf("wal: close %s: %w", w.name, err)
		}
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: close %s: %w", w.name, cerr)
	}
	w.f = nil
	return err
}
