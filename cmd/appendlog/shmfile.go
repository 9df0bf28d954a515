package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/shmlog"
)

// isShmFile reports whether path is a regular file whose appendlog file
// header says it is a shared-memory log file (frame.FileShm), as
// shmlog.OpenReader checks it. verify, dump and tail read such a file with
// package shmlog instead of package wal.
func isShmFile(path string) bool {
	f, ok := openRegular(path)
	if !ok {
		return false
	}
	if f == nil {
		// A file that cannot be read (permissions): shmlog's open names
		// the file and the reason, where "not a directory" would mislead.
		return true
	}
	defer f.Close()
	b, ok := readFileHeader(f)
	if !ok {
		return false
	}
	h, err := frame.DecodeFileHeader(b)
	if err != nil {
		// An appendlog file whose header is damaged: shmlog's decoder
		// reports the damage with the file and the byte offset, which says
		// more than "not a directory" would.
		return !errors.Is(err, frame.ErrBadMagic)
	}
	return h.Kind == frame.FileShm
}

// hasShmHeader reports whether path is a regular file with the intact
// header of a shared-memory log file.
func hasShmHeader(path string) bool { return hasFileHeader(path, frame.FileShm) }

// isWALSegment reports whether path is a regular file with the intact
// header of a segment of a log directory (package wal).
func isWALSegment(path string) bool { return hasFileHeader(path, frame.FileWAL) }

// hasFileHeader reports whether path is a regular file with an intact file
// header of kind k.
func hasFileHeader(path string, k frame.FileKind) bool {
	f, _ := openRegular(path)
	if f == nil {
		return false
	}
	defer f.Close()
	b, ok := readFileHeader(f)
	if !ok {
		return false
	}
	h, err := frame.DecodeFileHeader(b)
	return err == nil && h.Kind == k
}

// openRegular opens path if it is a regular file. ok reports whether it
// is one; f is nil if it is not, or cannot be opened.
func openRegular(path string) (f *os.File, ok bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	f, err = os.Open(path)
	if err != nil {
		return nil, true
	}
	return f, true
}

// readFileHeader reads the bytes of an appendlog file header at the
// start of f; ok is false if f is shorter or cannot be read.
func readFileHeader(f *os.File) (b []byte, ok bool) {
	b = make([]byte, frame.FileHeaderSize)
	_, err := io.ReadFull(f, b)
	return b, err == nil
}

// runShmVerify checks every file and record of the shared-memory log at
// path; "appendlog shm verify FILE" and "appendlog verify FILE" run it.
func runShmVerify(stdout io.Writer, path string) error {
	if err := checkShmFile(path); err != nil {
		return err
	}
	if isWALSegment(path) {
		dir := filepath.Dir(path)
		return fmt.Errorf("%s: a segment of the log directory %s, not a shared-memory log file: \"appendlog verify %s\" checks it", path, dir, dir)
	}
	st, err := shmlog.Verify(path, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d records in %d files, whole and in order; %d unfinished frames padded\n",
		path, st.Records, st.Files, st.Padded)
	return nil
}

// shmPrinter prints records of a shared-memory log as dump does:
// <pos><TAB><payload>, the position in hex as shmlog writes it (%#x).
type shmPrinter struct {
	out  *bufio.Writer
	hex  bool
	line []byte
}

func (p *shmPrinter) print(rec shmlog.Record) error {
	p.line = append(p.line[:0], "0x"...)
	p.line = strconv.AppendUint(p.line, rec.Pos, 16)
	p.line = append(p.line, '\t')
	p.line = appendPayload(p.line, rec.Payload, p.hex)
	p.line = append(p.line, '\n')
	_, err := p.out.Write(p.line)
	return err
}

// checkShmFrom refuses --from on a shared-memory log: its records have
// positions, not sequence numbers.
func checkShmFrom(from uint64) error {
	if from != 0 {
		return usagef("--from %d: a shared-memory log has positions, not sequence numbers; --from is for log directories", from)
	}
	return nil
}

// runShmDump prints the committed records of the shared-memory log at path
// (or only their number, with f.count); with follow it then prints new
// ones until ctx is done. A non-nil last keeps the records read up to the
// end of what the log holds, and only the last of those it has room for
// are printed (tail -n): a shmlog reader can only start at the first.
func runShmDump(ctx context.Context, stdout io.Writer, path string, f *dumpFlags, follow bool, last *shmRing) error {
	if err := checkShmFrom(f.from); err != nil {
		return err
	}
	p := &shmPrinter{out: bufio.NewWriterSize(stdout, 64<<10), hex: f.hex}
	var n uint64
	// out takes each record read: counted, held in last until the end of
	// what the log holds now, or printed.
	out := func(rec shmlog.Record) error {
		n++
		switch {
		case f.count:
			return nil
		case last != nil:
			last.add(rec)
			return nil
		}
		return p.print(rec)
	}
	// caughtUp prints what last holds, once: from then on records are
	// printed as they come.
	caughtUp := func() error {
		if last == nil {
			return nil
		}
		err := last.print(p)
		last = nil
		return err
	}
	if !follow {
		// Verify reads to the end, padding over the frames of writers that
		// are gone at once, where a Reader's Next would stop at the first
		// such frame as at the end of the log.
		var werr error // writing the output failed
		_, err := shmlog.Verify(path, func(rec shmlog.Record) error {
			werr = out(rec)
			return werr
		})
		if werr != nil {
			return werr
		}
		if err != nil {
			p.out.Flush()
			var ce *shmlog.CorruptError
			if n == 0 && !errors.As(err, &ce) {
				return err // the file could not be opened: nothing was read
			}
			return fmt.Errorf("%s: stopped after %d records: %w", path, n, err)
		}
		if f.count {
			fmt.Fprintf(p.out, "%d\n", n)
		}
		if err := caughtUp(); err != nil {
			return err
		}
		return p.out.Flush()
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	r, err := shmlog.OpenReader(path, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		rec, ok, err := r.Next()
		if err != nil {
			p.out.Flush()
			return fmt.Errorf("%s: stopped after %d records: %w", path, n, err)
		}
		if ok {
			if err := out(rec); err != nil {
				return err
			}
			continue
		}
		if err := caughtUp(); err != nil {
			return err
		}
		if err := p.out.Flush(); err != nil {
			return err
		}
		if err := waitFollowing(ctx, r.Wait, path, fi, nil); err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: a normal end
			}
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}
