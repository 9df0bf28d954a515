package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// recoverLog checks the segments in dir and returns a writer positioned at
// the end of the last good record.
//
// Crash states it must accept, given the order the writer does things in
// (seal = footer + truncate + fdatasync, and only then create the next
// segment = preallocate + header + fdatasync + directory fsync). Only the
// footers of segments with a successor are trusted; the last segment is
// always scanned:
//   - the tail segment has a torn tail past its durable mark: cut it;
//   - the tail segment was being created: no valid header and nothing but
//     zeros after it: remove it, continue after the sealed one before it;
//   - the tail segment was being sealed, or was sealed just before the
//     crash: a valid footer frame follows its last record: finish the seal
//     and start the next segment, or continue in the one the rotation
//     started if it is still under spareName (the sealer had not named
//     it: records handed to the OS may be in it).
//
// Anything else that does not decode is corruption. With
// Options.VerifyOnOpen every sealed segment is CRC-scanned too, and damage
// in one is corruption.
func recoverLog(fsys vfs.FS, dir string, o *Options) (*segWriter, Recovery, error) {
	rec := Recovery{TruncatedAt: -1}
	// A segment a Repair was rebuilding when it stopped holds nothing of
	// the log's (see salvage). A file under spareName that recoverTail
	// does not adopt as the next segment is removed once recovery is done.
	if err := fsys.Remove(filepath.Join(dir, repairTmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, rec, fmt.Errorf("wal: remove %s: %w", repairTmp, err)
	}
	segs, _, _, err := listSegments(fsys, dir)
	if err != nil {
		return nil, rec, err
	}
	rec.Segments = len(segs)
	w := &segWriter{fsys: fsys, dir: dir, segSize: o.SegmentSize, maxRec: o.MaxRecordSize, now: time.Now, markEvery: o.markEvery}
	corrupt := func(name string, off int64, err error) error {
		return &CorruptionError{Dir: dir, Segment: name, Offset: off, Err: err}
	}

	if o.VerifyOnOpen && len(segs) > 1 {
		// CRC-scan every sealed segment instead of trusting its footer.
		r := &Reader{fsys: fsys, dir: dir, segs: segs, from: math.MaxUint64, maxRec: o.MaxRecordSize, expect: segs[0].firstSeq, footerAt: -1, sealedOnly: true}
		r.readThroughGaps()
		r.Close()
		if err := r.Err(); err != nil {
			return nil, rec, err
		}
		rec.Gaps = append(rec.Gaps, r.gaps...)
	}

	// The log's ID: from its segments' headers, checked as they are read
	// (a segment of another log is ErrForeign); a new log's is chosen when
	// its first segment is created. A log whose segments predate log IDs
	// keeps none, so that every file of it is judged alike.
	var ids logIDs
	// Sealed segments: trust the footers, check the chain of sequence numbers.
	next := uint64(1)
	if len(segs) > 0 {
		next = segs[0].firstSeq
	}
	rec.FirstSeq = next
	for i, s := range segs {
		if s.firstSeq != next {
			prev := "the log's start"
			if i > 0 {
				prev = segs[i-1].name
			}
			return nil, rec, corrupt(s.name, 0, chainError(prev, next, s.firstSeq))
		}
		if i < len(segs)-1 {
			// A segment with a successor was sealed and synced before the
			// successor was created: trust its footer.
			info, id, err := checkSealed(fsys, dir, s)
			if err != nil {
				return nil, rec, corrupt(s.name, err.offset, fmt.Errorf("sealed segment is not whole: %w", err.err))
			}
			if err := ids.see(filepath.Join(dir, s.name), id); err != nil {
				return nil, rec, err
			}
			next = info.FirstSeq + info.Count
			if o.VerifyOnOpen {
				rec.ScannedBytes += info.DataEnd - headerPage
			}
			continue
		}
		// The tail segment is scanned even if it ends in a footer: a crash
		// during its seal may have kept the footer but lost records before
		// it (a power cut persists unsynced writes in any order).
		if err := recoverTail(fsys, dir, s, o, w, &rec, &ids); err != nil {
			return nil, rec, err
		}
	}
	w.id = ids.id
	if w.f == nil && len(segs) <= 1 && w.id.IsZero() {
		// No segment, or only one whose creation never finished (removed
		// above): a new log.
		if w.id, err = frame.NewLogID(); err != nil {
			return nil, rec, fmt.Errorf("wal: open %s: %w", dir, err)
		}
	}
	if w.f == nil {
		// An empty log, or a tail that was removed (an unfinished creation:
		// continue after its predecessor).
		if err := w.startSegment(next); err != nil {
			return nil, rec, err
		}
	}
	// A spare prepared for the next rotation never holds a record, nor
	// does a new segment that recoverTail did not adopt: the segment
	// before it did not end in its footer (a power cut took records
	// before the footer, none of them durable), so the new one's records
	// do not follow it. The removal is made durable before any record
	// is appended: a power cut must not bring the file back, after a
	// seal of the tail made its footer name the same next record, for
	// the next Open to adopt records that never followed it.
	if err := fsys.Remove(filepath.Join(dir, spareName)); err == nil {
		if err := fsys.SyncDir(dir); err != nil {
			w.closeFile(false)
			return nil, rec, fmt.Errorf("wal: remove %s: sync directory: %w", spareName, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		w.closeFile(false)
		return nil, rec, fmt.Errorf("wal: remove %s: %w", spareName, err)
	}
	w.durable.Store(w.nextSeq)
	rec.NextSeq = w.nextSeq
	rec.TailSegment = w.name
	return w, rec, nil
}

// chainError describes a segment whose first sequence number, first, is
// not next, the one after the records of prev (a segment, or the log's
// start).
func chainError(prev string, next, first uint64) error {
	if first < next {
		return fmt.Errorf("segments overlap: %s holds records up to seq %d, but the next segment starts at seq %d (a segment of another log, or a copy?)", prev, next-1, first)
	}
	return fmt.Errorf("gap in the log: %s ends before seq %d, but the next segment starts at seq %d (a segment is missing)", prev, next, first)
}

// segErr is a problem found in a segment, with where.
type segErr struct {
	offset int64
	err    error
}

// checkSealed validates a sealed segment's header and footer, and returns
// the footer and the log ID in the header.
func checkSealed(fsys vfs.FS, dir string, s segInfo) (frame.Footer, frame.LogID, *segErr) {
	f, err := fsys.OpenRegular(filepath.Join(dir, s.name), os.O_RDONLY, 0)
	if err != nil {
		return frame.Footer{}, frame.LogID{}, &segErr{0, err}
	}
	defer f.Close()
	h, _, err := readHeader(f)
	if err != nil {
		return frame.Footer{}, frame.LogID{}, &segErr{0, fmt.Errorf("bad header: %w", err)}
	}
	if h.FirstSeq != s.firstSeq {
		return frame.Footer{}, h.Log, &segErr{0, fmt.Errorf("header says first seq %d, name says %d", h.FirstSeq, s.firstSeq)}
	}
	size, err := f.Size()
	if err != nil {
		return frame.Footer{}, h.Log, &segErr{0, err}
	}
	ft, err := readFooter(f, size)
	if err != nil {
		return ft, h.Log, &segErr{max(size-frame.FooterSize, 0), err}
	}
	if ft.FirstSeq != s.firstSeq {
		return ft, h.Log, &segErr{size - frame.FooterSize, fmt.Errorf("footer says first seq %d, name says %d", ft.FirstSeq, s.firstSeq)}
	}
	return ft, h.Log, nil
}

// recoverTail scans the tail segment with a Reader (one set of rules for
// Open, Verify and dump), then acts on what it found: remove an unfinished
// segment, finish an interrupted seal, or cut a torn tail; and positions w
// after the last good record.
//
// ids holds the log ID of the segments before it; the tail's header must
// match it, and gives it if it is zero. w.id is set from it before a new
// segment is started here.
func recoverTail(fsys vfs.FS, dir string, s segInfo, o *Options, w *segWriter, rec *Recovery, ids *logIDs) error {
	r := &Reader{fsys: fsys, dir: dir, segs: []segInfo{s}, from: math.MaxUint64, maxRec: o.MaxRecordSize, expect: s.firstSeq, footerAt: -1, ids: *ids}
	r.readThroughGaps()
	r.Close()
	if err := r.Err(); err != nil {
		return err
	}
	*ids = r.ids
	w.id = ids.id
	rec.Gaps = append(rec.Gaps, r.gaps...)
	path := filepath.Join(dir, s.name)
	if r.unfinished {
		if err := fsys.Remove(path); err != nil {
			return fmt.Errorf("wal: remove unfinished segment %s: %w", s.name, err)
		}
		if err := fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("wal: remove unfinished segment %s: %w", s.name, err)
		}
		rec.RemovedSegment = s.name
		return nil
	}
	end, next := r.dataEnd, r.expect
	rec.ScannedBytes += end - headerPage

	f, err := fsys.OpenRegular(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", s.name, err)
	}
	if r.footerAt >= 0 {
		// Finish the interrupted seal, then continue in a new segment.
		err := f.Truncate(end + frame.FooterSize)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("wal: finish seal of %s: %w", s.name, err)
		}
		// The rotation that wrote the footer may have started the next
		// segment under spareName, and written records into it that were
		// handed to the OS (Flush returned, Readers saw them), before the
		// sealer gave it its name: a process that stopped then leaves
		// them there. Continue in it.
		if ok, err := adoptSpare(fsys, dir, next, ids); err != nil || !ok {
			if err != nil {
				return err
			}
			return w.startSegment(next)
		}
		return recoverTail(fsys, dir, segInfo{name: segmentName(next), firstSeq: next}, o, w, rec, ids)
	}
	w.f, w.name, w.firstSeq, w.count = f, s.name, s.firstSeq, next-s.firstSeq
	w.startOff, w.startPos = end, 0
	w.nextSeq = next
	w.mark, w.markWritten = r.mark, r.mark

	// Cut whatever follows the last good record, so later appends can never
	// be followed by stale bytes, and make the cut durable before any new
	// record is written after it.
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("wal: stat %s: %w", s.name, err)
	}
	if t := r.Torn(); t != nil && t.Bytes > 0 {
		rec.TruncatedAt, rec.TruncatedBytes, rec.Damage = t.Offset, t.Bytes, t.Damage
		if err := f.Truncate(end); err != nil {
			return fmt.Errorf("wal: cut torn tail of %s at %d: %w", s.name, end, err)
		}
		size = end
	}
	if size < o.SegmentSize {
		if err := f.Preallocate(end, o.SegmentSize-end); err != nil {
			return fmt.Errorf("wal: preallocate %s: %w", s.name, err)
		}
	}
	// The records found may have been only in the page cache of a process
	// that died: make them durable before calling them so, unless a
	// completed sync already covered them all (a clean Close) and nothing
	// was cut. (The preallocation need not be durable: a shorter file only
	// grows again.)
	if r.mark.DurableEnd != end || rec.TruncatedBytes > 0 {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("wal: fdatasync %s: %w", s.name, err)
		}
	}
	return nil
}

// adoptSpare gives the file under spareName the name of segment next, as
// the sealer would have (fdatasync, rename, directory fsync), if it is a
// rotation's new segment that starts at next: its header, which rotate
// writes and createSpare never does, says so, with the log's ID. It
// reports whether it did. REQUIRES: the segment before next is durably
// sealed.
func adoptSpare(fsys vfs.FS, dir string, next uint64, ids *logIDs) (bool, error) {
	path := filepath.Join(dir, spareName)
	f, err := fsys.OpenRegular(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, vfs.ErrNotRegular) {
		return false, nil // none; or not a file, left to the removal of a spare
	}
	if err != nil {
		return false, fmt.Errorf("wal: open %s: %w", spareName, err)
	}
	if ok, err := isNextSegment(f, next, ids.id); !ok || err != nil {
		f.Close()
		return false, err // a spare prepared for a rotation, or not the next segment
	}
	name := segmentName(next)
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(path, filepath.Join(dir, name))
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return false, fmt.Errorf("wal: name segment %s (%s, started before the log stopped): %w", name, spareName, err)
	}
	return true, nil
}

// isNextSegment reports whether f, the file under spareName, is a
// rotation's new segment of log id whose first record is next: its header
// (which rotate writes, and createSpare never does) says so. A header
// that could not be read is an error: not known to be a spare, it may
// hold records.
func isNextSegment(f vfs.File, next uint64, id frame.LogID) (bool, error) {
	h, _, err := readHeader(f)
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return false, fmt.Errorf("wal: read header of %s: %w", spareName, err)
	}
	return err == nil && h.FirstSeq == next && h.Log.Matches(id), nil
}
