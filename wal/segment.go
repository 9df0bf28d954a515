package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// Segment files are named by the sequence number of their first record,
// zero-padded so that names sort in log order: 00000000000000000001.seg.
const (
	segSuffix  = ".seg"
	segDigits  = 20
	lockName   = "LOCK"
	cutSuffix  = ".cut"
	headerPage = frame.FileHeaderSize
)

func segmentName(firstSeq uint64) string {
	return fmt.Sprintf("%0*d%s", segDigits, firstSeq, segSuffix)
}

// parseSegmentName returns the first sequence number a segment name encodes.
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != segDigits+len(segSuffix) || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(name[:segDigits], 10, 64)
	return n, err == nil
}

// segInfo is a segment file found in the log directory.
type segInfo struct {
	name     string
	firstSeq uint64 // from the name
	// file is the file's name in the directory where it is not name:
	// spareName, for the new segment of a rotation whose sealer had not
	// named it when the writer stopped (see Reader.unnamedNext).
	file string
}

// ownName reports whether name is one of the log's own files other than a
// segment: the LOCK file, a spare segment, a repair side file, the cursors
// directory or an index file.
func ownName(name string) bool {
	return name == lockName || name == spareName || name == repairTmp || name == cursorDir ||
		strings.Contains(name, cutSuffix) || strings.HasSuffix(name, segSuffix+idxSuffix)
}

// listSegments returns the segments in dir in log order, and the names of
// other files found there (the lock file, repair side files and the
// cursors directory and index files excluded). own reports whether any
// file of the log's own (a segment, the LOCK file, a spare segment, a
// repair side file, the cursors directory, an index file) is there. A
// symbolic link named like one of the log's own files is an error
// (linkError): the log never follows one.
func listSegments(fsys vfs.FS, dir string) (segs []segInfo, foreign []string, own bool, err error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, false, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	for _, e := range entries {
		n := e.Name()
		seq, isSeg := parseSegmentName(n)
		if !isSeg && !ownName(n) {
			foreign = append(foreign, n)
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			return nil, nil, false, linkError(dir, n)
		}
		if isSeg {
			segs = append(segs, segInfo{name: n, firstSeq: seq})
		}
		own = true
	}
	// Names are zero-padded, so ReadDir's lexical order is log order.
	return segs, foreign, own, nil
}

// linkError reports the symbolic link named like the log's own file name
// in dir. It wraps a *vfs.NotRegularError, except for the cursors
// directory.
func linkError(dir, name string) error {
	path := filepath.Join(dir, name)
	const why = "a log never follows links among its own files; put the file itself there or move the link out of"
	if name == cursorDir {
		return fmt.Errorf("wal: %s is a symbolic link, not a directory: %s %s", path, why, dir)
	}
	return fmt.Errorf("wal: %w: %s %s", &vfs.NotRegularError{Path: path, Mode: fs.ModeSymlink}, why, dir)
}

// notSegmentFile returns, in place of err (the damage that recovery or a
// Reader found), an error naming an entry of dir that is named like a
// segment but is a directory or another file that is not a regular file,
// if there is one: the damage reported was only its consequence (a
// segment taken for sealed because the entry followed it, a header that
// cannot be read), and Repair cannot rebuild around it. Otherwise it
// returns err. It looks only once something failed.
func notSegmentFile(fsys vfs.FS, dir string, err error) error {
	entries, lerr := fsys.ReadDir(dir)
	if lerr != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := parseSegmentName(e.Name()); ok && !e.Type().IsRegular() {
			return fmt.Errorf("wal: %s: %s is named like a segment but is %s; move it out of the log directory (%v)", dir, e.Name(), vfs.Describe(e.Type()), err)
		}
	}
	return err
}

// _notLogNames bounds how many foreign names a NotLogError lists.
const _notLogNames = 3

// openDir checks that dir is a directory that holds a log (or nothing) and
// returns its segments and foreign files. op names the caller in errors.
func openDir(fsys vfs.FS, dir, op string) ([]segInfo, []string, error) {
	st, err := fsys.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: %s %s: %w", op, dir, err)
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("wal: %s %s: not a directory", op, dir)
	}
	segs, foreign, own, err := listSegments(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	if len(segs) == 0 && isStoreRoot(foreign, own) {
		return nil, nil, storeError(fsys, dir)
	}
	if len(foreign) > 0 && (!own || len(segs) == 0 && !ourLock(fsys, dir)) {
		return nil, nil, &NotLogError{Dir: dir, Count: len(foreign), Names: foreign[:min(len(foreign), _notLogNames)]}
	}
	if len(segs) == 0 {
		if err := segmentsGone(fsys, dir); err != nil {
			return nil, nil, err
		}
	}
	return segs, foreign, nil
}

// segmentsGone returns a *CorruptionError when dir holds no segment but
// the index file of one. A log writes index files for sealed segments
// only, after the segment that follows is named, and never deletes its
// active segment: a log directory left with an index file and no segment
// lost its segments to something outside the log, and is not a new log
// to start again at sequence number 1.
func segmentsGone(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return nil // listSegments read it: a later step reports the failure
	}
	for _, n := range names {
		seg, ok := strings.CutSuffix(n, idxSuffix)
		if _, isSeg := parseSegmentName(seg); !ok || !isSeg {
			continue
		}
		return &CorruptionError{Dir: dir, Segment: seg, Offset: 0, Err: fmt.Errorf(
			"the segment is missing, and so is every other segment of the log in %s: its index file %s is there, so the log's segments were moved or deleted outside it; put them back, or delete its index files (*%s%s) to start a new, empty log there",
			dir, n, segSuffix, idxSuffix)}
	}
	return nil
}

// The root of a stream store (package stream, which imports this one)
// holds its marker file, its LOCK and the streams directory; the log of
// stream NAME is streams/NAME/log. These names must match stream's layout
// (stream/meta.go); TestStoreRootIsNotALog checks them against a real
// store.
const (
	storeMarker  = "STORE"
	storeStreams = "streams"
	storeLog     = "log"
)

// isStoreRoot reports whether a directory without segments, whose other
// entries are foreign and which holds a file named like one of the log's
// own (own: the store's LOCK), is the root of a stream store: it has the
// store's marker or its streams directory (a store's creation makes the
// directory before it writes the marker).
func isStoreRoot(foreign []string, own bool) bool {
	return own && (slices.Contains(foreign, storeMarker) || slices.Contains(foreign, storeStreams))
}

// storeError describes the stream store whose root is dir.
func storeError(fsys vfs.FS, dir string) error {
	e := &StoreError{Dir: dir}
	names, _ := fsys.List(filepath.Join(dir, storeStreams)) // best effort: only for the message
	for _, n := range names {
		if strings.HasPrefix(n, ".") { // a stream being created or deleted
			continue
		}
		if e.Count++; len(e.Logs) < _notLogNames {
			e.Logs = append(e.Logs, filepath.Join(dir, storeStreams, n, storeLog))
		}
	}
	return e
}

// ourLock reports whether dir holds a repair side file or spare segment, or
// a LOCK file that a Log or Repair wrote its holder into: other programs
// (LevelDB, RocksDB) keep a file named LOCK in their directories too.
func ourLock(fsys vfs.FS, dir string) bool {
	names, err := fsys.List(dir)
	if err != nil {
		return false
	}
	for _, n := range names {
		if n == spareName || n == repairTmp || strings.Contains(n, cutSuffix) {
			return true
		}
	}
	f, err := fsys.OpenRegular(filepath.Join(dir, lockName), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(_holderPrefix))
	n, _ := f.ReadAt(b, 0) // a short or failed read is not our holder text
	return string(b[:n]) == _holderPrefix
}

// _holderPrefix starts the holder text Open and Repair write into LOCK.
const _holderPrefix = "pid "

// lockLog takes the log's lock for holder. A lock held by someone else is
// ErrInUse naming the holder; any other failure (a read-only file system,
// no permission) is returned as that cause, never as "in use".
func lockLog(fsys vfs.FS, dir, op, holder string) (io.Closer, error) {
	path := filepath.Join(dir, lockName)
	lock, err := fsys.Lock(path, holder)
	if err == nil {
		return lock, nil
	}
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: lock file %s is held by %s", ErrInUse, path, lockHolder(fsys, path))
	}
	return nil, fmt.Errorf("wal: %s %s: take lock: %w", op, dir, err)
}

// lockHolder returns the holder text written in the lock file at path, or
// "an unknown holder".
func lockHolder(fsys vfs.FS, path string) string {
	f, err := fsys.OpenRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return "an unknown holder"
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0) // best effort: the text is only for the message
	if h := strings.TrimSpace(string(b[:n])); h != "" {
		return strconv.Quote(h)
	}
	return "an unknown holder"
}

// readHeader reads and checks a segment's file header and durable mark.
func readHeader(f vfs.File) (frame.FileHeader, frame.Mark, error) {
	var b [frame.MarkOffset + frame.MarkSize]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return frame.FileHeader{}, frame.Mark{}, err
	}
	h, err := frame.DecodeFileHeader(b[:n])
	if err != nil {
		return h, frame.Mark{}, err
	}
	if h.Kind != frame.FileWAL {
		return h, frame.Mark{}, fmt.Errorf("file kind %v is not a WAL segment", h.Kind)
	}
	var m frame.Mark
	if n == len(b) {
		m, _ = frame.DecodeMark(b[frame.MarkOffset:])
	}
	return h, m, nil
}

// segmentsLogID reads the headers of segs in dir and returns the log's ID:
// the first one that is not zero, in log order, or the zero LogID for a
// log whose segments have none. A segment whose header names another ID
// is ErrForeign; headers that cannot be read are not this function's to
// report (recovery and Repair judge them).
func segmentsLogID(fsys vfs.FS, dir string, segs []segInfo) (frame.LogID, error) {
	var ids logIDs
	for _, s := range segs {
		path := filepath.Join(dir, s.name)
		f, err := fsys.OpenRegular(path, os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		h, _, err := readHeader(f)
		f.Close()
		if err != nil {
			continue
		}
		if err := ids.see(path, h.Log); err != nil {
			return ids.id, err
		}
	}
	return ids.id, nil
}

// readFooter returns the footer of a sealed segment of the given size.
func readFooter(f vfs.File, size int64) (frame.Footer, error) {
	if size < headerPage+frame.FooterSize {
		return frame.Footer{}, frame.ErrFooter
	}
	var b [frame.FooterSize]byte
	if _, err := f.ReadAt(b[:], size-frame.FooterSize); err != nil {
		return frame.Footer{}, err
	}
	ft, err := frame.DecodeFooter(b[:])
	if err != nil {
		return ft, err
	}
	if ft.DataEnd != size-frame.FooterSize {
		return ft, fmt.Errorf("%w: footer says data ends at %d, file size %d", frame.ErrFooter, ft.DataEnd, size)
	}
	return ft, nil
}

// isZero reports whether f holds only zero bytes from off to its end; it
// returns the offset just past the last non-zero byte otherwise.
func lastNonZero(f vfs.File, off, size int64) (int64, error) {
	buf := make([]byte, 1<<20)
	last := off
	for p := off; p < size; {
		n := int(min(int64(len(buf)), size-p))
		m, err := f.ReadAt(buf[:n], p)
		if m < n && err == nil {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && !(errors.Is(err, io.EOF) && m == n) {
			return 0, err
		}
		if i := lastNonZeroIn(buf[:n]); i >= 0 {
			last = p + int64(i) + 1
		}
		p += int64(n)
	}
	return last, nil
}

var zeroChunk [4096]byte

func lastNonZeroIn(b []byte) int {
	for end := len(b); end > 0; {
		start := max(end-len(zeroChunk), 0)
		if !bytes.Equal(b[start:end], zeroChunk[:end-start]) {
			for i := end - 1; i >= start; i-- {
				if b[i] != 0 {
					return i
				}
			}
		}
		end = start
	}
	return -1
}

// createSegment creates, preallocates and durably names a new segment of
// the log whose ID is id.
func createSegment(fsys vfs.FS, dir string, firstSeq uint64, size int64, id frame.LogID) (vfs.File, string, error) {
	name := segmentName(firstSeq)
	path := filepath.Join(dir, name)
	f, err := fsys.OpenRegular(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("wal: create segment %s: %w", name, err)
	}
	fail := func(err error) (vfs.File, string, error) {
		f.Close()
		return nil, "", fmt.Errorf("wal: create segment %s: %w", name, err)
	}
	if err := f.Preallocate(0, size); err != nil {
		return fail(err)
	}
	if _, err := f.WriteAt(headerPageFor(firstSeq, id), 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fail(err)
	}
	return f, name, nil
}

// headerPageFor returns the header page of a segment of log id whose first
// record has sequence number firstSeq.
func headerPageFor(firstSeq uint64, id frame.LogID) []byte {
	hdr := make([]byte, headerPage)
	frame.PutFileHeader(hdr, frame.FileHeader{Kind: frame.FileWAL, FirstSeq: firstSeq, Log: id})
	return hdr
}

// startSegment creates the segment that appends continue in, starting at
// sequence number next, and points w at it.
func (w *segWriter) startSegment(next uint64) error {
	f, name, err := createSegment(w.fsys, w.dir, next, w.segSize, w.id)
	if err != nil {
		return err
	}
	w.f, w.name, w.firstSeq, w.nextSeq, w.count = f, name, next, next, 0
	w.startOff, w.startPos = headerPage, 0
	return nil
}
