package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/wal"
)

func newRepairCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "repair DIR",
		Short: "Cut a torn tail, or with --force every damaged range, recording the records lost as gaps",
		Long: `repair makes the log in DIR readable to its end again.

Without --force it only cuts a torn tail: the partial last write of a crash,
which was never acknowledged as durable and which opening the log would cut
anyway. If the log is damaged anywhere else, repair changes nothing and
exits with status 1.

With --force it repairs every damaged place and keeps every intact record.
It cuts only the bytes that do not decode, from the first bad byte to the
next record that decodes, keeps them in side files next to the segments
(NAME.cut-OFFSET), and records the sequence numbers of the records lost
there as a gap in the log. Those records may have been acknowledged:
"appendlog verify" and "appendlog dump" name every gap, and the log stays
readable past it; appends continue. A missing segment becomes a small
segment holding only its gap; a damaged header or footer that loses no
record is rebuilt.

repair takes the log's lock before it looks at the log: it refuses a log
that another process has open (exit status 1, naming the holder), and a
directory that is not an appendlog log, where it creates nothing.`,
		Example: `  appendlog repair /tmp/log
  appendlog repair --force /tmp/log`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRepair(cmd.OutOrStdout(), args[0], force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "also cut damaged ranges in the middle of the log, recording the records lost as gaps (cut bytes are kept in side files)")
	return cmd
}

func runRepair(stdout io.Writer, dir string, force bool) error {
	if err := checkLogDir(dir); err != nil {
		return err
	}
	rep, err := wal.Repair(dir, force, readOptions())
	if err != nil {
		var ce *wal.CorruptionError
		if !force && errors.As(err, &ce) {
			return fmt.Errorf("%s: damaged in the middle of the log: %s\n"+
				"Nothing was changed. To cut the damaged bytes (kept in side files) and record the records\n"+
				"lost there as a gap, keeping every intact record, run: appendlog repair --force %s",
				dir, describeCorruption(ce), dir)
		}
		return describeVerifyError(dir, err)
	}
	if len(rep.Cuts)+len(rep.Gaps)+len(rep.Rebuilt)+len(rep.Created)+len(rep.RemovedSegments) == 0 {
		fmt.Fprintf(stdout, "%s: nothing to repair: the log is clean.\n", dir)
		return nil
	}
	fmt.Fprintf(stdout, "%s: repaired.\n", dir)
	if rep.Corruption != nil {
		fmt.Fprintf(stdout, "The first damage found: %v\n", unprefixed(rep.Corruption))
	}
	for _, c := range rep.Cuts {
		fmt.Fprintf(stdout, "Cut %d bytes from segment %s at byte offset %d; they are kept in %s.\n", c.Bytes, c.Segment, c.Offset, c.SideFile)
	}
	for _, g := range rep.Gaps {
		fmt.Fprintf(stdout, "Recorded a gap: %s lost, at byte offset %d of segment %s.\n", g.Range(), g.Offset, g.Segment)
	}
	if n := len(rep.Created); n > 0 {
		fmt.Fprintf(stdout, "Created %d %s holding only the gap of a missing segment: %s.\n",
			n, plural(n, "segment", "segments"), listNames(rep.Created))
	}
	if n := len(rep.Rebuilt); n > 0 {
		fmt.Fprintf(stdout, "Rebuilt %d %s (header, footer and durable mark recomputed): %s.\n",
			n, plural(n, "segment", "segments"), listNames(rep.Rebuilt))
	}
	if n := len(rep.RemovedSegments); n > 0 {
		fmt.Fprintf(stdout, "Moved %d whole %s with nothing to keep aside (renamed with a .cut suffix): %s.\n",
			n, plural(n, "segment", "segments"), listNames(rep.RemovedSegments))
	}
	if len(rep.Gaps) > 0 {
		fmt.Fprintf(stdout, "Every other record is kept. Readers, dump and verify report the %s.\n", plural(len(rep.Gaps), "gap", "gaps"))
	}
	return nil
}

// listNames lists names, eliding the middle of a long list.
func listNames(names []string) string {
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, %s, ... %s", names[0], names[1], names[len(names)-1])
}
