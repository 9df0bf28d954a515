package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/shmlog"
	"github.com/appendlog/appendlog/wal"
)

type tailFlags struct {
	from   uint64
	lines  uint64
	follow bool
	hex    bool
}

func init() { register(func(*bool) *cobra.Command { return newTailCmd() }) }

func newTailCmd() *cobra.Command {
	var f tailFlags
	cmd := &cobra.Command{
		Use:   "tail DIR|FILE",
		Short: "Print the last records of a log and follow new ones",
		Long: `tail prints the last -n (--lines) records of the log in DIR, 10 by
default, one line per record as "appendlog dump" prints them:

  <seq><TAB><payload>

--from SEQ prints every record from sequence number SEQ on instead (tail
--from 0 prints the whole log, from the first record it holds; a SEQ below
that, deleted by retention, is an error naming the first); -n and --from
exclude each other (exit status 2). -n 0 prints nothing (with -f: only the records appended from
then on). The last records are those present: a gap that "appendlog
repair --force" recorded is not counted, and is named on stderr where it
falls among them. tail finds them without reading the whole log: it reads
the segments from the last one back only as far as the records reach. A
torn tail (see "appendlog verify --help") ends the output with a note on
stderr.

With -f (--follow) it then keeps printing new records as another process
appends them, across segment rotations, until interrupted (exit status 0
on SIGINT). The records it follows come from the same reader that printed
the last ones, so a record appended while tail starts is printed once,
neither skipped nor repeated. It follows the files with inotify where the
system has it, and looks again at least every 100ms in any case. A log
directory or FILE removed or replaced while tail -f waits ends it with
exit status 1, and so do the log's segment files removed or replaced
while its directory stays (retention deletes a segment only behind a
later one). Records that retention deletes before tail printed them
(tail held up by a slow terminal, or far behind the writer) are named on
stderr, and tail goes on from the first record left, as tail -F goes on
after logrotate; so does tail without -f when the last records it chose
are deleted before it reads them.

tail reads a log directory without locking and never changes it.
Exit status 1 means DIR is missing, not an appendlog log, or damaged (the
message says where).

tail also reads a shared-memory log FILE (package shmlog), printing
<pos><TAB><payload> lines as "appendlog dump FILE" does (see its help for
the position). Its records have positions, not sequence numbers, and no
index: tail reads FILE from its first record to the end to find the last
-n, keeping only those -n records in memory. With -f it then waits for
writers to commit new records (on the log's wake word, a futex on Linux)
until interrupted, exit status 0 on SIGINT. Like every shmlog reader it
takes a shared lock on FILE and pads over frames left unfinished by
writers that are gone. --from is for log directories only.`,
		Example: `  appendlog tail /tmp/log
  appendlog tail -n 100 /tmp/log
  appendlog tail -f /tmp/log
  appendlog tail -f -n 0 /tmp/log
  appendlog tail --from 1000 /tmp/log`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			fromSet := cmd.Flags().Changed("from")
			if fromSet && cmd.Flags().Changed("lines") {
				return usagef("--from and -n (--lines) exclude each other: --from SEQ prints the records from sequence number SEQ on, -n N the last N records")
			}
			ctx := context.Background()
			if f.follow {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt)
				defer stop()
			}
			stdout, stderr, path := cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0]
			switch {
			case fromSet && !f.follow:
				return runDump(stdout, stderr, path, &dumpFlags{from: f.from, hex: f.hex})
			case isShmFile(path) && fromSet:
				return runShmDump(ctx, stdout, path, &dumpFlags{from: f.from, hex: f.hex}, true, nil)
			case isShmFile(path):
				return runShmTail(ctx, stdout, path, &f)
			}
			if err := checkLogDir(path); err != nil {
				return err
			}
			if fromSet {
				return runFollow(ctx, stdout, stderr, path, f.from, 0, true, &f)
			}
			from, end, err := lastRecords(path, f.lines)
			if err != nil {
				return err
			}
			if !f.follow && from == end {
				return nil // nothing to print
			}
			return runFollow(ctx, stdout, stderr, path, from, end, false, &f)
		},
	}
	fl := cmd.Flags()
	fl.Uint64VarP(&f.lines, "lines", "n", 10, "print the last N records")
	fl.Uint64Var(&f.from, "from", 0, "first sequence number to print, instead of the last -n records (0: the log's first record)")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new records until interrupted")
	fl.BoolVar(&f.hex, "hex", false, "print every payload as hex")
	return cmd
}

// runFollow prints the records of the log in dir from seq from on: with
// f.follow it then follows the log until ctx is done, a wal.Reader from
// OpenReader whose Wait follows the files; without, it stops before seq
// until, or at the end of the files when until is 0. dir was checked
// (checkLogDir).
//
// Records that retention deletes before they are printed (tail held up
// by its output, or behind a writer with a small retention) are named on
// stderr, and tail goes on from the first record left, as tail -F goes on
// after logrotate. Only a start the user gave (--from, explicit) below
// the first record is an error.
func runFollow(ctx context.Context, stdout, stderr io.Writer, dir string, from, until uint64, explicit bool, f *tailFlags) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	r, err := openFrom(stderr, dir, from, explicit)
	if err != nil {
		return err
	}
	defer func() { r.Close() }()
	out := bufio.NewWriterSize(stdout, 64<<10)
	var line []byte
	for {
		for r.Next() {
			if !f.follow && until != 0 && r.Seq() >= until {
				return out.Flush()
			}
			line = strconv.AppendUint(line[:0], r.Seq(), 10)
			line = append(line, '\t')
			line = appendPayload(line, r.Record(), f.hex)
			line = append(line, '\n')
			if _, err := out.Write(line); err != nil {
				return err
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		var g *wal.GapError
		var tr *wal.TruncatedError
		switch err := r.Err(); {
		case errors.As(err, &g):
			fmt.Fprintf(stderr, "appendlog tail: %s: gap: %s lost to damage and cut by \"appendlog repair --force\" (recorded at byte offset %d of segment %s)\n",
				dir, g.Range(), g.Offset, g.Segment)
			continue
		case errors.As(err, &tr) && tr.First > tr.Seq:
			// Opened again where it stopped, the Reader names what was
			// deleted and goes on from the first record left.
			r.Close()
			if r, err = openFrom(stderr, dir, tr.Seq, false); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("%s: stopped before seq %d: %w", dir, r.NextSeq(), unprefixed(err))
		}
		if !f.follow {
			if t := r.Torn(); t != nil {
				fmt.Fprintf(stderr, "appendlog tail: %s: the log ends in a torn tail (%d bytes at byte offset %d of segment %s) that opening it would cut\n",
					dir, t.Bytes, t.Offset, t.Segment)
			}
			return nil
		}
		// The Reader's Wait itself stops when the log's files are removed
		// or replaced while the directory stays.
		if err := waitFollowing(ctx, r.Wait, dir, fi, nil); err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: a normal end
			}
			return fmt.Errorf("%s: %w", dir, unprefixed(err))
		}
	}
}

// openFrom opens a Reader of the log in dir at seq from. Unless the start
// is explicit (--from), a from that retention has deleted since it was
// chosen is named on stderr and the Reader starts at the first record
// left.
func openFrom(stderr io.Writer, dir string, from uint64, explicit bool) (*wal.Reader, error) {
	for {
		r, err := wal.OpenReader(dir, from, readOptions())
		var tr *wal.TruncatedError
		if !explicit && errors.As(err, &tr) && tr.First > from {
			fmt.Fprintf(stderr, "appendlog tail: %s: %s deleted by retention before tail printed them; going on from record %d\n",
				dir, seqRange(from, tr.First), tr.First)
			from = tr.First
			continue
		}
		if err != nil {
			return nil, describeVerifyError(dir, err)
		}
		return r, nil
	}
}

// seqRange names the records first..end-1 as GapError.Range does.
func seqRange(first, end uint64) string {
	if end-first == 1 {
		return fmt.Sprintf("record %d (1 record)", first)
	}
	return fmt.Sprintf("records %d..%d (%d records)", first, end-1, end-first)
}

// lastRecords returns the sequence number from which a Reader reads the
// last n records of the log in dir, and the one after its last record (its
// end as lastRecords found it). It reads the segments from the last one
// back, one at a time, only until they hold n records: their names give
// their first sequence numbers (see the wal package doc), so a segment is
// read from its start up to the next one's. The records present are kept
// as runs of consecutive sequence numbers, a gap between two runs.
func lastRecords(dir string, n uint64) (from, end uint64, err error) {
	segs, err := segmentFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	if len(segs) == 0 {
		// No segments: OpenReader says whether dir is an empty log or
		// not a log at all.
		r, err := wal.OpenReader(dir, 1, readOptions())
		if err != nil {
			return 0, 0, describeVerifyError(dir, err)
		}
		r.Close()
		return 1, 1, nil
	}
	var (
		runs  []seqRun // the records present in the segments read, in order
		count uint64   // records in runs
		start = segs[0].first
	)
	for j := len(segs) - 1; j >= 0; j-- {
		var limit uint64 // 0: read to the end of the log
		if j < len(segs)-1 {
			limit = segs[j+1].first
		}
		rs, next, err := segmentRuns(dir, segs[j].first, limit)
		if limit != 0 && errors.Is(err, wal.ErrTruncated) {
			// Retention deleted the segment since it was listed: the
			// log starts after it now.
			start = limit
			break
		}
		if err != nil {
			return 0, 0, err
		}
		if limit == 0 {
			end = next
		}
		for _, r := range rs {
			count += r.end - r.first
		}
		runs = append(rs, runs...)
		if count >= n {
			break
		}
	}
	if n == 0 {
		return end, end, nil
	}
	if count < n {
		return start, end, nil
	}
	left := n
	for i := len(runs) - 1; ; i-- {
		if k := runs[i].end - runs[i].first; k < left {
			left -= k
			continue
		}
		return runs[i].end - left, end, nil
	}
}

// seqRun is the records first..end-1, all present.
type seqRun struct{ first, end uint64 }

// segmentRuns reads the records of the log in dir from seq first on,
// stopping before seq limit (0: at the end of the log), and returns them
// as runs, with the sequence number after the last record read.
func segmentRuns(dir string, first, limit uint64) ([]seqRun, uint64, error) {
	r, err := wal.OpenReader(dir, first, readOptions())
	if err != nil {
		return nil, 0, describeVerifyError(dir, err)
	}
	defer r.Close()
	var runs []seqRun
	for {
		if !r.Next() {
			if wal.IsGap(r.Err()) {
				continue
			}
			if err := r.Err(); err != nil {
				return nil, 0, fmt.Errorf("%s: stopped before seq %d: %w", dir, r.NextSeq(), unprefixed(err))
			}
			return runs, r.NextSeq(), nil
		}
		s := r.Seq()
		if limit != 0 && s >= limit {
			return runs, s, nil
		}
		if k := len(runs) - 1; k >= 0 && runs[k].end == s {
			runs[k].end++
		} else {
			runs = append(runs, seqRun{s, s + 1})
		}
	}
}

// segFile is a segment file of a log directory.
type segFile struct {
	name  string
	first uint64 // its first sequence number, from its name
}

// segmentFiles returns the segment files of the log in dir, in log order,
// from their names (00000000000000000001.seg, see the wal package doc);
// other names are skipped, as the wal skips them.
func segmentFiles(dir string) ([]segFile, error) {
	ents, err := os.ReadDir(dir) // sorted by name: zero-padded names sort in log order
	if err != nil {
		return nil, err
	}
	var segs []segFile
	for _, e := range ents {
		if s, ok := segmentFirst(e.Name()); ok {
			segs = append(segs, segFile{name: e.Name(), first: s})
		}
	}
	return segs, nil
}

// runShmTail prints the last f.lines committed records of the
// shared-memory log at path and, with f.follow, the records committed
// after them until ctx is done. A shmlog reader starts at the log's
// first record, so it reads them all, keeping the last f.lines in a ring.
func runShmTail(ctx context.Context, stdout io.Writer, path string, f *tailFlags) error {
	return runShmDump(ctx, stdout, path, &dumpFlags{hex: f.hex}, f.follow, &shmRing{n: f.lines})
}

// shmRing keeps copies of the last n records added. It grows to n as
// records come, rather than allocating n up front.
type shmRing struct {
	n    uint64
	recs []shmlog.Record
	next int // index of the oldest record once len(recs) == n
}

func (g *shmRing) add(rec shmlog.Record) {
	if g.n == 0 {
		return
	}
	if uint64(len(g.recs)) < g.n {
		g.recs = append(g.recs, shmlog.Record{Pos: rec.Pos, Payload: bytes.Clone(rec.Payload)})
		return
	}
	old := &g.recs[g.next]
	old.Pos, old.Payload = rec.Pos, append(old.Payload[:0], rec.Payload...)
	g.next = (g.next + 1) % len(g.recs)
}

// print prints the records kept, oldest first, and empties the ring.
func (g *shmRing) print(p *shmPrinter) error {
	for i := range g.recs {
		if err := p.print(g.recs[(g.next+i)%len(g.recs)]); err != nil {
			return err
		}
	}
	g.recs, g.next = nil, 0
	return nil
}

// _goneCheck is how often tail -f looks whether the log it follows is
// still there while it waits.
const _goneCheck = time.Second

// waitFollowing calls wait (a Reader's Wait) until it returns, checking
// every _goneCheck that path is still the directory or file fi describes,
// and that check, if not nil, finds nothing wrong: the readers go on
// waiting on a log that was removed or replaced, where tail -f would then
// print nothing forever. A reader's error is also reported as the removal
// when path is gone.
func waitFollowing(ctx context.Context, wait func(context.Context) error, path string, fi os.FileInfo, check func() error) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, _goneCheck)
		err := wait(wctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if now, serr := os.Stat(path); serr != nil || !os.SameFile(now, fi) {
			return errors.New("the log was removed or replaced while tail -f followed it")
		}
		if check != nil {
			if cerr := check(); cerr != nil {
				return cerr
			}
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

// segmentFirst returns the first sequence number of the segment named
// name, from its name.
func segmentFirst(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".seg")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	s, err := strconv.ParseUint(digits, 10, 64)
	return s, err == nil
}
