package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// VerifyReport summarises a full check of a log directory.
type VerifyReport struct {
	Segments          int
	Records           uint64
	Bytes             int64 // payload bytes
	FirstSeq, NextSeq uint64
	// Torn is the torn tail Open would cut, or nil.
	Torn *TornTail
	// Gaps lists the gaps a forced Repair recorded: records lost to damage
	// and cut. A log with gaps and no other damage is consistent; Records
	// counts the records present, and [FirstSeq, NextSeq) includes the
	// gaps' sequence numbers.
	Gaps []GapError
	// Warnings lists things that are not damage: foreign files in the
	// directory, an unfinished segment Open would remove.
	Warnings []string
	// LogID is the log's ID, from its segments' headers: zero for a log
	// created before log IDs, or with no segment.
	LogID frame.LogID

	// unnamed is the rotation's new segment read under spareName, nil if
	// none (see Reader.unnamedNext): Repair names it before it repairs.
	unnamed *unnamedSeg
}

// Verify checks every record of every segment in dir: checksums, sequence
// numbers, footers, and that no segment is missing. It returns a report and
// nil when the log is clean or its only damage is a torn tail Open would
// cut; otherwise a *CorruptionError naming segment and byte offset, or an
// error wrapping ErrForeign for segments of two logs mixed in dir (the
// report then covers what was read before it).
func Verify(dir string, opts *Options) (*VerifyReport, error) {
	r, err := OpenReader(dir, 0, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rep := &VerifyReport{}
	for _, n := range r.foreign {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("foreign file %s ignored", n))
	}
	if len(r.segs) > 0 {
		rep.FirstSeq = r.segs[0].firstSeq
	}
	r.readThroughGaps()
	rep.Records, rep.Bytes, rep.NextSeq = r.records, r.bytes, r.expect
	rep.Segments = len(r.segs) // a missed segment may have been relisted
	rep.Gaps = r.gaps
	rep.Torn = r.Torn()
	rep.LogID = r.ids.id
	if u := r.unnamed; u != nil {
		rep.unnamed = u
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s holds segment %s (records from seq %d), which its writer had not named yet; Open names it", spareName, u.next.name, u.next.firstSeq))
	}
	if rep.Torn != nil && rep.Torn.Bytes == 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: %v; Open removes it", rep.Torn.Segment, rep.Torn.Damage))
		rep.Torn = nil
	}
	err = r.Err()
	if IsCorrupt(err) {
		err = notSegmentFile(r.fsys, dir, err)
	}
	return rep, err
}

// RepairReport says what Repair did.
type RepairReport struct {
	// Cuts lists the byte ranges removed from segments, in log order; each
	// is kept in a side file.
	Cuts []Cut
	// Gaps lists the sequence ranges a forced repair recorded as lost.
	Gaps []GapError
	// Rebuilt names the segments rewritten: damaged ranges cut, gaps
	// recorded, or a damaged header, footer or mark recomputed.
	Rebuilt []string
	// Created names the segments created to record the gap of a missing
	// segment.
	Created []string
	// RemovedSegments were moved aside whole (renamed with a .cut suffix):
	// trailing segments with nothing to keep.
	RemovedSegments []string
	// Corruption is the first damage Verify found, for a forced repair;
	// nil when only a torn tail was cut.
	Corruption error
}

// Cut is a byte range removed from a segment by Repair.
type Cut struct {
	Segment string
	Offset  int64
	Bytes   int64
	// SideFile is the file, in the log directory, holding the bytes.
	SideFile string
}

// CutBytes returns the total number of bytes cut.
func (r *RepairReport) CutBytes() int64 {
	var n int64
	for _, c := range r.Cuts {
		n += c.Bytes
	}
	return n
}

// Repair makes a damaged log readable to its end again.
//
// Without force it only cuts a torn tail (damage past the tail's durable
// mark: writes no completed sync covered, which Open would cut anyway),
// keeping the cut bytes in a side file next to the segment
// (NAME.cut-OFFSET). Any other damage is returned as a *CorruptionError and
// nothing changes.
//
// With force it repairs every damaged place and keeps every intact record.
// It cuts only the damaged byte ranges: from the first byte that does not
// decode (or decodes out of sequence) up to the next frame that decodes
// with the right checksum and a plausible sequence number; where the
// damage is inside one record, whose header still names it and is
// followed by an intact frame, up to that frame (never to a frame carried
// in the damaged record's payload). It records the
// sequence numbers lost there as a gap in the log (see GapError), so that
// readers, Verify and Open see the loss instead of a hole. A missing
// segment becomes a small segment holding only a gap; a damaged header or
// footer that loses no record is rebuilt with no gap; trailing segments
// with nothing to keep are moved aside whole. Each rewritten segment is
// written to a temporary file, synced and renamed over the old one, after
// its cut bytes were synced to their side files. A forced repair reads the
// whole log, holding one segment at a time in memory.
//
// Repair takes the log's lock before it looks: a log another Log or Repair
// holds is refused with ErrInUse naming the holder, and a directory that is
// not a log with a *NotLogError, before any file is created in it.
func Repair(dir string, force bool, opts *Options) (*RepairReport, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	// Refuse what is not a log before the lock file is created in it.
	if _, _, err := openDir(o.fsys, dir, "repair"); err != nil {
		return nil, err
	}
	lock, err := lockLog(o.fsys, dir, "repair", fmt.Sprintf("%s%d (repair)", _holderPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := o.fsys.Remove(filepath.Join(dir, repairTmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("wal: repair: remove %s: %w", repairTmp, err)
	}
	rep, verr := Verify(dir, &o)
	if rep == nil {
		return nil, verr
	}
	if rep.unnamed != nil {
		// Name the rotation's new segment first, as Open would: what
		// follows repairs files by their names.
		if err := nameUnnamed(&o, dir, rep.unnamed, rep.LogID); err != nil {
			return nil, err
		}
		if rep, verr = Verify(dir, &o); rep == nil {
			return nil, verr
		}
	}
	out := &RepairReport{}
	var ce *CorruptionError
	switch {
	case verr == nil && rep.Torn == nil:
		return out, nil
	case verr == nil:
		// Only a torn tail: cut it, as Open would.
		if err := cutSegment(&o, dir, rep.Torn.Segment, rep.Torn.Offset, rep.NextSeq, out); err != nil {
			return out, err
		}
		return out, nil
	case errors.As(verr, &ce):
		if !force {
			return nil, fmt.Errorf("%w (repair without force only cuts a torn tail; force cuts the damaged ranges and records the records lost there as gaps)", verr)
		}
		out.Corruption = verr
		return out, salvage(&o, dir, out)
	default:
		return nil, verr
	}
}

// nameUnnamed finishes the seal of u.prev (its footer ends it, durably)
// and gives the rotation's new segment under spareName its name, as Open
// does (see recoverTail).
func nameUnnamed(o *Options, dir string, u *unnamedSeg, id frame.LogID) error {
	f, err := o.fsys.OpenRegular(filepath.Join(dir, u.prev.name), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	err = f.Truncate(u.footerAt + frame.FooterSize)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: repair: finish seal of %s: %w", u.prev.name, err)
	}
	_, err = adoptSpare(o.fsys, dir, u.next.firstSeq, &logIDs{id: id})
	return err // names both files, with the package's prefix
}

// cutSegment copies [at, end) of the tail segment into a side file,
// truncates the segment at at and rewrites its durable mark to match.
func cutSegment(o *Options, dir, name string, at int64, nextSeq uint64, out *RepairReport) error {
	f, err := o.fsys.OpenRegular(filepath.Join(dir, name), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	end, err := lastNonZero(f, at, size)
	if err != nil {
		return fmt.Errorf("wal: repair: read %s: %w", name, err)
	}
	if end > at {
		b := make([]byte, end-at)
		if _, err := f.ReadAt(b, at); err != nil {
			return fmt.Errorf("wal: repair: read %s: %w", name, err)
		}
		side, err := saveCut(o, dir, name, at, b)
		if err != nil {
			return err
		}
		out.Cuts = append(out.Cuts, Cut{Segment: name, Offset: at, Bytes: end - at, SideFile: side})
	}
	if err := f.Truncate(at); err != nil {
		return fmt.Errorf("wal: repair: truncate %s: %w", name, err)
	}
	var mb [frame.MarkSize]byte
	frame.PutMark(mb[:], frame.Mark{DurableEnd: at, NextSeq: nextSeq})
	if _, err := f.WriteAt(mb[:], frame.MarkOffset); err != nil {
		return fmt.Errorf("wal: repair: rewrite mark of %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	return nil
}

// saveCut writes b, cut from segment name at offset at, to a new durable
// side file (NAME.cut-AT, or NAME.cut-AT-K if that exists) and returns its
// name.
func saveCut(o *Options, dir, name string, at int64, b []byte) (string, error) {
	side := fmt.Sprintf("%s%s-%d", name, cutSuffix, at)
	var sf vfs.File
	for k := 2; ; k++ {
		var err error
		sf, err = o.fsys.OpenRegular(filepath.Join(dir, side), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || k > 1000 {
			return "", fmt.Errorf("wal: repair: create side file: %w", err)
		}
		side = fmt.Sprintf("%s%s-%d-%d", name, cutSuffix, at, k)
	}
	defer sf.Close()
	if _, err := sf.WriteAt(b, 0); err != nil {
		return "", fmt.Errorf("wal: repair: save cut bytes to %s: %w", side, err)
	}
	if err := sf.Sync(); err != nil {
		return "", fmt.Errorf("wal: repair: save cut bytes to %s: %w", side, err)
	}
	// The side file's name is durable before the bytes leave the segment.
	if err := o.fsys.SyncDir(dir); err != nil {
		return "", fmt.Errorf("wal: repair: save cut bytes to %s: %w", side, err)
	}
	return side, nil
}
