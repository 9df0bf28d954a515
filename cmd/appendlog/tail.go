package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/wal"
)

type tailFlags struct {
	from   uint64
	follow bool
	hex    bool
}

func init() { register(func(*bool) *cobra.Command { return newTailCmd() }) }

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
and looks again at least every 100ms in any case. A log directory or FILE
removed or replaced while tail -f waits ends it with exit status 1.

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
// ctx is done: a wal.Reader from OpenReader whose Wait follows the files.
func runFollow(ctx context.Context, stdout, stderr io.Writer, dir string, f *tailFlags) error {
	if isShmFile(dir) {
		return runShmDump(ctx, stdout, dir, &dumpFlags{from: f.from, hex: f.hex}, true)
	}
	if err := checkLogDir(dir); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	r, err := wal.OpenReader(dir, f.from, readOptions())
	if err != nil {
		return describeVerifyError(dir, err)
	}
	defer r.Close()
	out := bufio.NewWriterSize(stdout, 64<<10)
	var line []byte
	for {
		for r.Next() {
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
		if err := r.Err(); errors.As(err, &g) {
			fmt.Fprintf(stderr, "appendlog tail: %s: gap: %s lost to damage and cut by \"appendlog repair --force\" (recorded at byte offset %d of segment %s)\n",
				dir, g.Range(), g.Offset, g.Segment)
			continue
		} else if err != nil {
			return fmt.Errorf("%s: stopped before seq %d: %w", dir, r.NextSeq(), err)
		}
		if err := waitFollowing(ctx, r.Wait, dir, fi); err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: a normal end
			}
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
}

// _goneCheck is how often tail -f looks whether the log it follows is
// still there while it waits.
const _goneCheck = time.Second

// waitFollowing calls wait (a Reader's Wait) until it returns, checking
// every _goneCheck that path is still the directory or file fi describes:
// the readers go on waiting on a log that was removed or replaced, where
// tail -f would then print nothing forever. A reader's error is also
// reported as the removal when path is gone.
func waitFollowing(ctx context.Context, wait func(context.Context) error, path string, fi os.FileInfo) error {
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
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}
