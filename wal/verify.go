package wal

import (
	"errors"
	"fmt"
	"io"
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
	// Warnings lists things that are not damage: foreign files in the
	// directory, an unfinished segment Open would remove.
	Warnings []string
}

// Verify checks every record of every segment in dir: checksums, sequence
// numbers, footers, and that no segment is missing. It returns a report and
// nil when the log is clean or its only damage is a torn tail Open would
// cut; otherwise a *CorruptionError naming segment and byte offset (the
// report then covers what was read before it).
func Verify(dir string, opts *Options) (*VerifyReport, error) {
	r, err := OpenReader(dir, 0, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rep := &VerifyReport{Segments: len(r.segs)}
	for _, n := range r.foreign {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("foreign file %s ignored", n))
	}
	if len(r.segs) > 0 {
		rep.FirstSeq = r.segs[0].firstSeq
	}
	for r.Next() {
	}
	rep.Records, rep.Bytes, rep.NextSeq = r.records, r.bytes, r.expect
	rep.Torn = r.Torn()
	if rep.Torn != nil && rep.Torn.Bytes == 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: %v; Open removes it", rep.Torn.Segment, rep.Torn.Damage))
		rep.Torn = nil
	}
	return rep, r.Err()
}

// RepairReport says what Repair did.
type RepairReport struct {
	// Segment and Offset locate the cut; CutBytes counts the bytes removed
	// from that segment, kept in SideFile.
	Segment  string
	Offset   int64
	CutBytes int64
	SideFile string
	// RemovedSegments were moved aside whole (renamed with a .cut suffix).
	RemovedSegments []string
	// Corruption is the damage a forced repair cut at, or nil.
	Corruption error
}

// Repair cuts a torn tail, keeping the cut bytes in a side file next to the
// segment (name.cut-OFFSET). With force it also cuts a log at mid-log
// corruption: everything from the first bad byte on is moved into side
// files, so Open then succeeds with every record before the damage. Without
// force, corruption is returned as a *CorruptionError and nothing changes.
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
	lock, err := lockLog(o.fsys, dir, "repair", fmt.Sprintf("pid %d (repair)", os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	rep, verr := Verify(dir, &o)
	if rep == nil {
		return nil, verr
	}
	out := &RepairReport{}
	var cutSeg string
	var cutAt int64
	var nextSeq uint64
	var ce *CorruptionError
	switch {
	case verr == nil && rep.Torn == nil:
		return out, nil
	case verr == nil:
		cutSeg, cutAt, nextSeq = rep.Torn.Segment, rep.Torn.Offset, rep.NextSeq
	case errors.As(verr, &ce):
		if !force {
			return nil, fmt.Errorf("%w (repair without force only cuts a torn tail; force cuts everything from here on)", verr)
		}
		cutSeg, cutAt, nextSeq = ce.Segment, ce.Offset, rep.NextSeq
		out.Corruption = verr
	default:
		return nil, verr
	}
	out.Segment, out.Offset = cutSeg, cutAt

	segs, _, _, err := listSegments(o.fsys, dir)
	if err != nil {
		return nil, err
	}
	after := false
	for _, s := range segs {
		if s.name == cutSeg {
			after = true
			if cutAt <= headerPage {
				if err := moveAside(&o, dir, s.name); err != nil {
					return out, err
				}
				out.RemovedSegments = append(out.RemovedSegments, s.name)
				continue
			}
			if err := cutSegment(&o, dir, s.name, cutAt, nextSeq, out); err != nil {
				return out, err
			}
			continue
		}
		if after {
			if err := moveAside(&o, dir, s.name); err != nil {
				return out, err
			}
			out.RemovedSegments = append(out.RemovedSegments, s.name)
		}
	}
	if err := o.fsys.SyncDir(dir); err != nil {
		return out, fmt.Errorf("wal: repair: %w", err)
	}
	return out, nil
}

func moveAside(o *Options, dir, name string) error {
	if err := o.fsys.Rename(filepath.Join(dir, name), filepath.Join(dir, name+cutSuffix)); err != nil {
		return fmt.Errorf("wal: repair: move %s aside: %w", name, err)
	}
	return nil
}

// cutSegment copies [at, end) of a segment into a side file, truncates the
// segment at at and rewrites its durable mark to match.
func cutSegment(o *Options, dir, name string, at int64, nextSeq uint64, out *RepairReport) error {
	f, err := o.fsys.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
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
		side, err := saveCut(o, dir, f, name, at, end)
		if err != nil {
			return err
		}
		out.CutBytes, out.SideFile = end-at, side
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

// saveCut copies bytes [at, end) of segment f into a durable side file and
// returns its name.
func saveCut(o *Options, dir string, f vfs.File, name string, at, end int64) (string, error) {
	side := fmt.Sprintf("%s%s-%d", name, cutSuffix, at)
	sf, err := o.fsys.OpenFile(filepath.Join(dir, side), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", fmt.Errorf("wal: repair: %w", err)
	}
	defer sf.Close()
	if _, err := io.Copy(io.NewOffsetWriter(sf, 0), io.NewSectionReader(f, at, end-at)); err != nil {
		return "", fmt.Errorf("wal: repair: save cut bytes to %s: %w", side, err)
	}
	if err := sf.Sync(); err != nil {
		return "", fmt.Errorf("wal: repair: %w", err)
	}
	return side, nil
}
