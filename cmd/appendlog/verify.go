package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

func newVerifyCmd() *cobra.Command {
	var payloads bool
	cmd := &cobra.Command{
		Use:   "verify DIR|FILE",
		Short: "Check every segment and record of a log",
		Long: `verify reads every segment of the log in DIR and checks file headers,
frame checksums, sequence numbers and segment continuity, without changing
anything.

Exit status 0 means the log is clean, or its only damage is a torn tail:
the partial last write of a crash, which opening the log (or
"appendlog repair") cuts. A log with recorded gaps (records lost to damage
that "appendlog repair --force" cut, recording their sequence numbers) is
consistent: verify names every gap and exits 0. Exit status 1 means damage anywhere else (the
message names the segment, the byte offset and the kind of damage), or
that DIR is missing, unreadable, or not an appendlog log (a directory with
no segments and no LOCK file but other files; an empty directory is an
empty log), or the directory of a stream store (whose streams' logs the
message names); exit status 2 is a usage error.

With --payloads, verify also checks that every payload is one written by
"appendlog load": its checksum and filler are intact, and each writer's
counters follow each other with no gaps (a counter falling back to 0 is
taken as another load run on the same log).

FILE, a shared-memory log (package shmlog: FILE, FILE.00000001, ...), is
checked as "appendlog shm verify FILE" checks it: header pages and every
frame's checksum, in order, padding over frames of writers that are gone;
the summary names the records, files and frames padded. Exit status 0
means every frame checked out; 1 means damage (the message names the file
and byte offset) or a frame still in progress by a live process.
--payloads is for log directories only.`,
		Example: `  appendlog verify /tmp/log
  appendlog verify --payloads /tmp/log`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], payloads)
		},
	}
	cmd.Flags().BoolVar(&payloads, "payloads", false, `also check every payload written by "appendlog load" and each writer's counter order`)
	return cmd
}

func runVerify(stdout, stderr io.Writer, dir string, payloads bool) error {
	if isShmFile(dir) {
		if payloads {
			return usagef("--payloads is for log directories, not shared-memory logs")
		}
		return runShmVerify(stdout, dir)
	}
	if err := checkLogDir(dir); err != nil {
		return err
	}
	rep, err := wal.Verify(dir, readOptions())
	if err != nil {
		return describeVerifyError(dir, err)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "appendlog verify: warning: %s\n", w)
	}
	if rep.Segments == 0 {
		fmt.Fprintf(stdout, "%s: no segments: an empty log with 0 records.\n", dir)
		return nil
	}

	var check string
	if payloads {
		s, err := checkPayloads(dir, rep)
		if err != nil {
			return err
		}
		check = " " + s
	}

	var recs string
	switch rep.Records {
	case 0:
		recs = fmt.Sprintf("no records (next seq %d)", rep.NextSeq)
	case 1:
		recs = fmt.Sprintf("1 record (seq %d)", rep.FirstSeq)
	default:
		recs = fmt.Sprintf("%d records (seqs %d..%d)", rep.Records, rep.FirstSeq, rep.NextSeq-1)
	}
	status := "clean"
	if len(rep.Gaps) > 0 {
		status = "consistent"
	}
	torn := ""
	if t := rep.Torn; t != nil {
		status = "intact up to a torn tail"
		torn = fmt.Sprintf(" It ends in a torn tail: %d bytes at byte offset %d of segment %s,"+
			" the partial last write of a crash and never acknowledged as durable;"+
			" opening the log or running \"appendlog repair\" cuts it.", t.Bytes, t.Offset, t.Segment)
	}
	fmt.Fprintf(stdout, "%s: %s: %d %s, %s, %d bytes.%s%s%s\n",
		dir, status, rep.Segments, plural(rep.Segments, "segment", "segments"), recs, rep.Bytes, describeGaps(dir, rep.Gaps), torn, check)
	return nil
}

// describeGaps is a sentence naming every recorded gap of the log in dir,
// and the side files that keep the bytes cut there, or "".
func describeGaps(dir string, gaps []wal.GapError) string {
	if len(gaps) == 0 {
		return ""
	}
	s := fmt.Sprintf(" It has %d recorded %s, records lost to damage and cut by \"appendlog repair --force\":",
		len(gaps), plural(len(gaps), "gap", "gaps"))
	for i, g := range gaps {
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %s at byte offset %d of segment %s", g.Range(), g.Offset, g.Segment)
		// The side files repair names NAME.cut-OFFSET, or NAME.cut-OFFSET-N
		// when that name was taken. A gap of a missing segment has none.
		cut := fmt.Sprintf("%s.cut-%d", g.Segment, g.Offset)
		side, _ := filepath.Glob(filepath.Join(dir, cut))
		more, _ := filepath.Glob(filepath.Join(dir, cut+"-*"))
		if side = append(side, more...); len(side) == 0 {
			s += " (no side file)"
			continue
		}
		for j := range side {
			side[j] = filepath.Base(side[j])
		}
		s += fmt.Sprintf(" (%s: %s)", plural(len(side), "side file", "side files"), strings.Join(side, ", "))
	}
	return s + "."
}

// checkPayloads reads every record of a verified log and checks it with a
// payload.Checker. It returns a sentence for the summary.
func checkPayloads(dir string, rep *wal.VerifyReport) (string, error) {
	r, err := wal.OpenReader(dir, rep.FirstSeq, readOptions())
	if err != nil {
		return "", fmt.Errorf("read payloads: %w", err)
	}
	defer r.Close()
	// A counter falling back to 0 is another load run on the same log.
	k, err := payload.NewChecker(payload.Options{Restarts: true})
	if err != nil {
		return "", err
	}
	var n uint64
	want := rep.FirstSeq
	// After a recorded gap, each writer's counter may jump forward over the
	// records lost in it, and a writer first seen after one may start
	// anywhere (its first records may be in the gap).
	gapSeen := false
	for want < rep.NextSeq {
		if !r.Next() {
			var g *wal.GapError
			if !errors.As(r.Err(), &g) || g.First != want {
				break
			}
			want, gapSeen = g.End, true
			k.Gap()
			continue
		}
		if r.Seq() != want {
			return "", fmt.Errorf("%s: record seq %d where seq %d was expected", dir, r.Seq(), want)
		}
		if pr := k.Check(r.Record(), -1, want); pr != nil {
			return "", fmt.Errorf("%s: seq %d: payload %s: %s", dir, want, pr.Kind, pr.Detail)
		}
		n++
		want++
	}
	if want < rep.NextSeq {
		if err := r.Err(); err != nil {
			return "", fmt.Errorf("%s: read payloads after seq %d: %w", dir, want-1, unprefixed(err))
		}
		return "", fmt.Errorf("%s: reader stopped at seq %d, verify counted records up to seq %d", dir, want, rep.NextSeq-1)
	}
	inOrder := "counters in order with no gaps"
	if gapSeen {
		inOrder = "counters in order, jumping only over the recorded gaps"
	}
	res := k.Finish()
	s := fmt.Sprintf("All %d payloads check out: %d %s, %s", n, res.Writers, plural(res.Writers, "writer", "writers"), inOrder)
	if res.Restarts > 0 {
		s += fmt.Sprintf(" (%d counter restarts: load ran more than once)", res.Restarts)
	}
	return s + ".", nil
}

// describeStore describes the stream store in dir; isStore is false if
// dir holds no store's marker file (STORE), or cannot be looked into: the
// wal package then says why.
func describeStore(dir string) (infos []stream.StreamInfo, isStore bool, err error) {
	if _, err := os.Lstat(filepath.Join(dir, "STORE")); err != nil {
		return nil, false, nil
	}
	infos, err = stream.Describe(dir)
	if errors.Is(err, stream.ErrNotStore) {
		return nil, false, nil
	}
	return infos, true, err
}

// checkNotStore refuses the directory of a stream store: it holds a LOCK
// file and no segments of its own, which the wal package takes for an
// empty log. The error names the logs of its streams instead.
func checkNotStore(dir string) error {
	infos, isStore, err := describeStore(dir)
	switch {
	case !isStore:
		return nil
	case err != nil:
		return fmt.Errorf("%s: a stream store, not a log, and its metadata cannot be read: %s", dir, strings.TrimPrefix(err.Error(), "stream: "))
	}
	s := fmt.Sprintf("%s: a stream store (%d %s), not a log", dir, len(infos), plural(len(infos), "stream", "streams"))
	if len(infos) > 0 {
		dirs := make([]string, len(infos))
		for i, in := range infos {
			dirs[i] = in.LogDir
		}
		s += "; the logs of its streams are " + listNames(dirs)
	}
	return fmt.Errorf("%s; \"appendlog stat %s\" describes them all", s, dir)
}

// describeVerifyError turns an error from the wal package into a message
// that starts with dir and names the cause: the segment, byte offset and
// kind of damage, a directory that is not a log, or a log in use.
func describeVerifyError(dir string, err error) error {
	var ce *wal.CorruptionError
	var nl *wal.NotLogError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("%s: damaged: %s", dir, describeCorruption(ce))
	case errors.As(err, &nl):
		return fmt.Errorf("%s: not an appendlog log: no segments and no appendlog LOCK file, but %s", dir, nl.Files())
	}
	// A log in use (wal.ErrInUse), or one that cannot be read: the wal
	// package's message without its prefix, in front or around an error it
	// quotes, nor the directory twice.
	msg := stripWalPrefix(err.Error())
	if strings.HasPrefix(msg, dir+": ") {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", dir, msg)
}

// unprefixedError is an error from the wal package without its "wal: "
// prefix, which the message's own prefix (the directory) replaces.
type unprefixedError struct{ err error }

func (e *unprefixedError) Error() string { return stripWalPrefix(e.err.Error()) }

// stripWalPrefix returns msg, a wal package error's message, without the
// package's prefix, in front or before an error it quotes in parentheses.
func stripWalPrefix(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, "wal: "), "(wal: ", "(")
}
func (e *unprefixedError) Unwrap() error { return e.err }

// unprefixed returns err without the wal package's prefix in its message.
func unprefixed(err error) error {
	if err == nil {
		return nil
	}
	return &unprefixedError{err}
}

func describeCorruption(ce *wal.CorruptionError) string {
	if ce.Err == nil {
		return fmt.Sprintf("segment %s, byte offset %d", ce.Segment, ce.Offset)
	}
	return fmt.Sprintf("segment %s, byte offset %d: %v", ce.Segment, ce.Offset, ce.Err)
}

func plural[N ~int | ~int64 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
