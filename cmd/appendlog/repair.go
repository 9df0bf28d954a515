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
		Short: "Cut a torn tail, or with --force everything from a corruption on",
		Long: `repair makes the log in DIR readable to its end again.

Without --force it only cuts a torn tail: the partial last write of a crash,
which was never acknowledged as durable and which opening the log would cut
anyway. If the log is damaged anywhere else, repair changes nothing and
exits with status 1.

With --force it also cuts everything from a corruption in the middle of the
log on, including later segments. That drops records which may have been
acknowledged: the cut bytes are kept in side files next to the segments so
they can be inspected or salvaged.

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
	cmd.Flags().BoolVar(&force, "force", false, "also cut everything from a mid-log corruption on (cut bytes are kept in side files)")
	return cmd
}

func runRepair(stdout io.Writer, dir string, force bool) error {
	if err := checkDir(dir); err != nil {
		return err
	}
	rep, err := wal.Repair(dir, force, nil)
	if err != nil {
		var ce *wal.CorruptionError
		if !force && errors.As(err, &ce) {
			return fmt.Errorf("%s: damaged in the middle of the log: %s\n"+
				"Nothing was changed. Cutting the log there drops every record from that point on;\n"+
				"to do it (the cut bytes are kept in side files), run: appendlog repair --force %s",
				dir, describeCorruption(ce), dir)
		}
		return describeVerifyError(dir, err)
	}
	if rep.CutBytes == 0 && len(rep.RemovedSegments) == 0 {
		fmt.Fprintf(stdout, "%s: nothing to repair: the log is clean.\n", dir)
		return nil
	}
	fmt.Fprintf(stdout, "%s: repaired.\n", dir)
	if rep.CutBytes > 0 {
		fmt.Fprintf(stdout, "Cut %d bytes from segment %s at byte offset %d.\n", rep.CutBytes, rep.Segment, rep.Offset)
	}
	if n := len(rep.RemovedSegments); n > 0 {
		fmt.Fprintf(stdout, "Moved %d whole %s aside (renamed with a .cut suffix): %s.\n",
			n, plural(n, "segment", "segments"), listNames(rep.RemovedSegments))
	}
	if rep.Corruption != nil {
		fmt.Fprintf(stdout, "The cut was at damage in the middle of the log: %v\n", rep.Corruption)
	}
	if rep.SideFile != "" {
		fmt.Fprintf(stdout, "The cut bytes are kept in %s.\n", rep.SideFile)
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
