package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/wal"
)

type dumpFlags struct {
	from  uint64
	count bool
	hex   bool
}

func newDumpCmd() *cobra.Command {
	var f dumpFlags
	cmd := &cobra.Command{
		Use:   "dump DIR|FILE",
		Short: "Print the records of a log",
		Long: `dump prints one line per record of the log in DIR, from its first record
on, or from sequence number --from on:

  <seq><TAB><payload>

The payload is printed as text when it is valid UTF-8 made of printable
characters (no tabs, newlines or other control characters), else as
lowercase hex; --hex prints every payload as hex, which is unambiguous.
With --count, dump prints only the number of records from --from on, and
nothing when it cannot read the log to its end. A
--from below the first record the log holds (the records before it were
deleted by retention) is an error naming the first, exit status 1.

dump reads a log directory without locking and never changes it. A torn tail (see
"appendlog verify --help") ends the output with a note on stderr. A gap
that "appendlog repair --force" recorded (records lost to damage) is named
by a line on stderr where it falls, and dump goes on after it; --count
counts only the records present. Exit
status 1 means the log could not be read to its end (the message says where
it stopped), or that DIR is missing or not an appendlog log.

dump also reads a shared-memory log FILE (package shmlog: FILE,
FILE.00000001, ...). Its records have positions, not sequence numbers, so
each line is

  <pos><TAB><payload>

with the position i<<32|o (file i, data offset o; see the shmlog package
doc) in hex as shmlog writes it, e.g. 0x100000050. It prints the committed
records in log order. Like every shmlog reader it takes a shared lock on
FILE and pads over frames left unfinished by writers that are gone (which
writes to the file); --from is for log directories only. Damage, or a
frame a live process still has not committed after a moment, ends it with
exit status 1 and a message naming the file and byte offset.`,
		Example: `  appendlog dump /tmp/log | head
  appendlog dump --from 1000 --hex /tmp/log
  appendlog dump --count /tmp/log`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDump(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], &f)
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&f.from, "from", 0, "first sequence number to print (0: the log's first record)")
	fl.BoolVar(&f.count, "count", false, "print only the number of records from --from on")
	fl.BoolVar(&f.hex, "hex", false, "print every payload as hex")
	return cmd
}

func runDump(stdout, stderr io.Writer, dir string, f *dumpFlags) (err error) {
	if isShmFile(dir) {
		return runShmDump(context.Background(), stdout, dir, f, false, nil)
	}
	if err := checkLogDir(dir); err != nil {
		return err
	}
	r, err := wal.OpenReader(dir, f.from, readOptions())
	if err != nil {
		return describeVerifyError(dir, err)
	}
	defer r.Close()

	bw := bufio.NewWriterSize(stdout, 64<<10)
	var (
		n    uint64
		last uint64
		line []byte
	)
	for {
		if !r.Next() {
			var g *wal.GapError
			if !errors.As(r.Err(), &g) {
				break
			}
			// A recorded gap: say so, then read on after it.
			if err := bw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "appendlog dump: %s: gap: %s lost to damage and cut by \"appendlog repair --force\" (recorded at byte offset %d of segment %s)\n",
				dir, g.Range(), g.Offset, g.Segment)
			continue
		}
		n++
		last = r.Seq()
		if f.count {
			continue
		}
		line = strconv.AppendUint(line[:0], last, 10)
		line = append(line, '\t')
		line = appendPayload(line, r.Record(), f.hex)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	rerr := r.Err()
	if f.count && rerr == nil {
		// Only a count of the whole log: a read that stopped early prints
		// none, as for a shared-memory log, rather than a number that
		// looks like the log's.
		fmt.Fprintf(bw, "%d\n", n)
	}
	ferr := bw.Flush()
	if err := rerr; err != nil {
		if n == 0 {
			return fmt.Errorf("%s: %w", dir, unprefixed(err))
		}
		return fmt.Errorf("%s: stopped after seq %d (%d records): %w", dir, last, n, unprefixed(err))
	}
	if t := r.Torn(); t != nil {
		fmt.Fprintf(stderr, "appendlog dump: %s: the log ends in a torn tail (%d bytes at byte offset %d of segment %s) that opening it would cut\n",
			dir, t.Bytes, t.Offset, t.Segment)
	}
	return ferr
}

// appendPayload appends p to dst as text if it is printable UTF-8 and
// asHex is false, else as lowercase hex.
func appendPayload(dst, p []byte, asHex bool) []byte {
	if !asHex && printable(p) {
		return append(dst, p...)
	}
	return hex.AppendEncode(dst, p)
}

// printable reports whether p is valid UTF-8 made only of printable
// characters (unicode.IsPrint: letters, marks, numbers, punctuation,
// symbols and the ASCII space; no control characters).
func printable(p []byte) bool {
	for i := 0; i < len(p); {
		if c := p[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size <= 1 || !unicode.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}
