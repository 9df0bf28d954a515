package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/wal"
)

// _tailPoll bounds how long tail -f waits for an inotify event before it
// looks at the log again anyway (and how long an interrupt may wait).
const _tailPoll = 100 * time.Millisecond

type tailFlags struct {
	from   uint64
	follow bool
	hex    bool
}

func newTailCmd() *cobra.Command {
	var f tailFlags
	cmd := &cobra.Command{
		Use:   "tail DIR|FILE",
		Short: "Print the records of a log and follow new ones",
		Long: `tail prints one line per record of the log in DIR from sequence number
--from on, as "appendlog dump" does:

  <seq><TAB><payload>

With -f (--follow) it then keeps printing new records as another process
appends them, across segment rotations, until interrupted (exit status 0
on SIGINT). It follows the files with inotify where the system has it,
and looks again at least every 100ms in any case.

tail reads a log directory without locking and never changes it. A gap that
"appendlog repair --force" recorded is named on stderr where it falls.
Exit status 1 means DIR is missing, not an appendlog log, or damaged (the
message says where).

tail also reads a shared-memory log FILE (package shmlog), printing
<pos><TAB><payload> lines as "appendlog dump FILE" does (see its help for
the position); with -f it waits for writers to commit new records (on the
log's wake word, a futex on Linux) until interrupted, exit status 0 on
SIGINT. Like every shmlog reader it takes a shared lock on FILE and pads
over frames left unfinished by writers that are gone. --from is for log
directories only.`,
		Example: `  appendlog tail --from 1000 /tmp/log
  appendlog tail -f /tmp/log`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !f.follow {
				return runDump(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], &dumpFlags{from: f.from, hex: f.hex})
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			return runFollow(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], &f)
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&f.from, "from", 1, "first sequence number to print")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new records until interrupted")
	fl.BoolVar(&f.hex, "hex", false, "print every payload as hex")
	return cmd
}

// runFollow prints the records from f.from on and follows the log until
// ctx is done.
func runFollow(ctx context.Context, stdout, stderr io.Writer, dir string, f *tailFlags) error {
	if isShmFile(dir) {
		return runShmDump(ctx, stdout, dir, &dumpFlags{from: f.from, hex: f.hex}, true)
	}
	if err := checkDir(dir); err != nil {
		return err
	}
	w, err := sys.WatchDir(dir)
	if err != nil {
		return fmt.Errorf("%s: watch: %w", dir, err)
	}
	defer w.Close()
	fo := &follower{dir: dir, next: f.from, hex: f.hex, out: bufio.NewWriterSize(stdout, 64<<10), stderr: stderr}
	for {
		if err := fo.catchUp(); err != nil {
			fo.out.Flush()
			return err
		}
		if err := fo.out.Flush(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil // interrupted: a normal end
		}
		if _, err := w.Wait(_tailPoll); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// follower reads the records a writer appends to a log, from where it
// stopped: segment seg at byte offset off, where record next starts. With
// seg empty it does not know where that is and reads the log through
// wal.OpenReader (which also handles gaps and damage).
type follower struct {
	dir    string
	seg    string
	off    int64
	next   uint64
	hex    bool
	out    *bufio.Writer
	stderr io.Writer
	line   []byte
	buf    []byte
	// gapEnd is the end of the last gap named on stderr.
	gapEnd uint64
	// awaiting is set when seg is the successor of a sealed segment, which
	// may not be renamed into place yet.
	awaiting bool
}

func (fo *follower) print(seq uint64, p []byte) error {
	fo.line = strconv.AppendUint(fo.line[:0], seq, 10)
	fo.line = append(fo.line, '\t')
	fo.line = appendPayload(fo.line, p, fo.hex)
	fo.line = append(fo.line, '\n')
	_, err := fo.out.Write(fo.line)
	return err
}

// catchUp prints every complete record past the last one printed.
func (fo *follower) catchUp() error {
	if fo.seg == "" {
		return fo.readThrough()
	}
	for {
		more, err := fo.scanSegment()
		if err != nil || !more {
			return err
		}
	}
}

// readThrough reads the log from fo.next to its current end with a
// wal.Reader and remembers where the last record ended.
func (fo *follower) readThrough() error {
	// Read from the record before the next one too (without printing it):
	// its end is where the next record starts, so the follower knows where
	// to go on from even when there is no new record yet.
	want, from := fo.next, fo.next
	if from > 1 {
		from--
	}
	r, err := wal.OpenReader(fo.dir, from, nil)
	if err != nil {
		return describeVerifyError(fo.dir, err)
	}
	defer r.Close()
	for {
		if !r.Next() {
			var g *wal.GapError
			if !errors.As(r.Err(), &g) {
				break
			}
			if g.End <= want || g.End <= fo.gapEnd {
				continue // before the records asked for, or named already
			}
			if err := fo.out.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(fo.stderr, "appendlog tail: %s: gap: %s lost to damage and cut by \"appendlog repair --force\" (recorded at byte offset %d of segment %s)\n",
				fo.dir, g.Range(), g.Offset, g.Segment)
			fo.next, fo.seg, fo.gapEnd = g.End, "", g.End // the position after a gap is the Reader's
			continue
		}
		if r.Seq() < want {
			if r.Seq() == want-1 {
				seg, off := r.Position()
				fo.seg, fo.off = seg, off+int64(frame.Size(len(r.Record())))
			}
			continue
		}
		if err := fo.print(r.Seq(), r.Record()); err != nil {
			return err
		}
		seg, off := r.Position()
		fo.seg, fo.off, fo.next = seg, off+int64(frame.Size(len(r.Record()))), r.Seq()+1
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%s: stopped before seq %d: %w", fo.dir, fo.next, err)
	}
	return nil
}

// scanSegment prints the complete records in fo.seg from fo.off on. It
// returns more true when the segment was sealed and the follower moved to
// the next one. Anything but the next record or a footer (a gap, a frame
// out of place) sends it back to readThrough; a frame not complete yet ends
// the scan until the next change.
func (fo *follower) scanSegment() (more bool, err error) {
	f, err := os.Open(filepath.Join(fo.dir, fo.seg))
	if errors.Is(err, fs.ErrNotExist) && fo.awaiting {
		return false, nil // the writer has not named it yet
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Deleted by retention, or renamed by a repair: start over.
		fo.seg = ""
		return false, fo.readThrough()
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", fo.dir, err)
	}
	defer f.Close()
	fo.awaiting = false
	if fo.buf == nil {
		fo.buf = make([]byte, 1<<20)
	}
	for {
		n, rerr := f.ReadAt(fo.buf, fo.off)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return false, fmt.Errorf("%s: read %s: %w", fo.dir, fo.seg, rerr)
		}
		b := fo.buf[:n]
		p := 0
		for p < len(b) {
			fr, size, derr := frame.Decode(b[p:])
			if errors.Is(derr, frame.ErrTruncated) && n == len(fo.buf) {
				if p == 0 {
					// One frame larger than the buffer: grow it.
					fo.buf = make([]byte, 2*len(fo.buf))
				}
				break
			}
			if derr != nil {
				// Zeros past the end, or a frame not completely written.
				fo.off += int64(p)
				return false, nil
			}
			switch {
			case fr.Kind == frame.KindRecord && fr.Seq == fo.next:
				if err := fo.print(fr.Seq, fr.Payload); err != nil {
					return false, err
				}
				fo.next++
				p += size
			case fr.Kind == frame.KindFooter && fr.Seq == fo.next:
				// Sealed: the next segment starts at record next.
				fo.seg, fo.off, fo.awaiting = fmt.Sprintf("%020d.seg", fo.next), frame.FileHeaderSize, true
				return true, nil
			default:
				fo.off += int64(p)
				fo.seg = ""
				return false, fo.readThrough()
			}
		}
		fo.off += int64(p)
		if n < len(fo.buf) && p == len(b) {
			return false, nil
		}
	}
}
