package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

func newStatCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat DIR",
		Short: "Describe a log: segments, sequence numbers, torn tail, gaps, cursors",
		Long: `stat describes the log in DIR: every segment (name, first and last
sequence number, bytes, sealed or not), the first, last and durable
sequence numbers, the total bytes, whether the log ends in a torn tail,
the gaps "appendlog repair --force" recorded, and every consumer cursor
with its committed position and its lag behind the end of the log (records
and bytes of frames).

The durable sequence number is the one the tail segment's header records:
the writer updates it behind its syncs (at most about 10 ms behind), so
more may be durable.

stat reads without locking and never changes the log, so it works while
another process writes it (a record being written may then show as a torn
tail). With --json it prints one JSON object, also when stat fails: then
{"dir": DIR, "error": MESSAGE}, the message also on stderr, exit status 1
(a damaged cursor file is named in the report's cursor instead).

DIR may also be a stream store (package stream, as "appendlog broker"
leaves it): stat then describes each stream, its configuration and its
log, whose cursors are the positions of the stream's consumer groups. Exit status 1 means DIR is
missing or not an appendlog log, the log is damaged (the message names the
segment and byte offset), or a cursor file is damaged (the message names
the file and the problem).`,
		Example: `  appendlog stat /tmp/log
  appendlog stat --json /tmp/log | jq .cursors`,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStat(cmd.OutOrStdout(), args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// statReport is what stat prints; its JSON form is --json's output.
type statReport struct {
	Dir string `json:"dir"`
	// LogID is the log's ID in hexadecimal, "none" for a log created
	// before log IDs.
	LogID    string        `json:"log_id"`
	Segments []statSegment `json:"segments"`
	// FirstSeq and LastSeq bound the records (LastSeq = FirstSeq-1 when
	// there are none); NextSeq is the next to be appended.
	FirstSeq   uint64       `json:"first_seq"`
	LastSeq    uint64       `json:"last_seq"`
	NextSeq    uint64       `json:"next_seq"`
	DurableSeq uint64       `json:"durable_seq"`
	Records    uint64       `json:"records"`
	Bytes      int64        `json:"bytes"`
	Torn       *statTorn    `json:"torn_tail"`
	Gaps       []statGap    `json:"gaps"`
	Cursors    []statCursor `json:"cursors"`
	Warnings   []string     `json:"warnings,omitempty"`
}

type statSegment struct {
	Name     string `json:"name"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Bytes    int64  `json:"bytes"`
	Sealed   bool   `json:"sealed"`
}

type statTorn struct {
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"`
	Bytes   int64  `json:"bytes"`
}

type statGap struct {
	First   uint64 `json:"first"`
	Last    uint64 `json:"last"`
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"`
}

type statCursor struct {
	Name      string `json:"name"`
	Committed uint64 `json:"committed"`
	Lag       uint64 `json:"lag_records"`
	LagBytes  int64  `json:"lag_bytes"`
	Error     string `json:"error,omitempty"`
}

// statError is what stat --json prints when it cannot describe DIR: its
// output is one JSON object on every path.
type statError struct {
	Dir   string `json:"dir"`
	Error string `json:"error"`
}

// runStat describes dir. With asJSON, stdout gets one JSON object whatever
// happens: the report, or a statError when there is none (the error also
// goes to stderr, as without --json).
func runStat(stdout io.Writer, dir string, asJSON bool) error {
	printed, err := stat(stdout, dir, asJSON)
	if err != nil && asJSON && !printed {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if werr := enc.Encode(statError{Dir: dir, Error: err.Error()}); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// stat is runStat but for a failure's JSON object; printed reports whether
// it printed its report (or tried to).
func stat(stdout io.Writer, dir string, asJSON bool) (printed bool, err error) {
	if err := checkDir(dir); err != nil {
		return false, err
	}
	switch infos, isStore, err := describeStore(dir); {
	case isStore && err == nil:
		return runStoreStat(stdout, dir, infos, asJSON)
	case isStore:
		return false, fmt.Errorf("%s: a stream store whose metadata cannot be read: %s", dir, strings.TrimPrefix(err.Error(), "stream: "))
	}
	s, bad, err := statLog(dir)
	if err != nil {
		return false, err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(&s); err != nil {
			return true, err
		}
	} else {
		printStat(stdout, &s)
	}
	if len(bad) > 0 {
		return true, fmt.Errorf("%s: %s", dir, strings.Join(bad, "; "))
	}
	return true, nil
}

// statLog describes the log in dir; bad lists its damaged cursor files.
func statLog(dir string) (statReport, []string, error) {
	rep, err := wal.Verify(dir, readOptions())
	if err != nil {
		return statReport{}, nil, describeVerifyError(dir, err)
	}
	s := statReport{Dir: dir, LogID: rep.LogID.String(), FirstSeq: rep.FirstSeq, NextSeq: rep.NextSeq, Records: rep.Records,
		Warnings: rep.Warnings, Segments: []statSegment{}, Gaps: []statGap{}, Cursors: []statCursor{}}
	if rep.Segments == 0 {
		s.FirstSeq, s.NextSeq = 1, 1
	}
	s.LastSeq = s.NextSeq - 1
	s.DurableSeq = s.FirstSeq - 1
	all, err := segmentFiles(dir)
	if err != nil {
		return s, nil, err
	}
	// A writer may have gone on since Verify read the log: describe the
	// segments Verify read, not ones created after it.
	segs := all[:0]
	for _, sg := range all {
		if sg.first > s.NextSeq {
			break
		}
		segs = append(segs, sg)
	}
	for i, sg := range segs {
		name, first, path := sg.name, sg.first, filepath.Join(dir, sg.name)
		seg := statSegment{Name: name, FirstSeq: first, LastSeq: s.NextSeq - 1, Sealed: i < len(segs)-1}
		if st, err := os.Stat(path); err == nil {
			seg.Bytes = st.Size()
		}
		if n := len(s.Segments); n > 0 {
			s.Segments[n-1].LastSeq = first - 1
		}
		s.Segments = append(s.Segments, seg)
		s.Bytes += seg.Bytes
		if i < len(segs)-1 {
			continue
		}
		// The tail: everything before it was sealed and synced; its header
		// records how far its own records are durable.
		s.DurableSeq = first - 1
		if m, ok := readMark(path); ok && m.NextSeq > first {
			s.DurableSeq = m.NextSeq - 1
		}
	}
	if t := rep.Torn; t != nil {
		s.Torn = &statTorn{Segment: t.Segment, Offset: t.Offset, Bytes: t.Bytes}
	}
	for _, g := range rep.Gaps {
		s.Gaps = append(s.Gaps, statGap{First: g.First, Last: g.End - 1, Segment: g.Segment, Offset: g.Offset})
	}
	infos, err := wal.ReadCursors(dir, readOptions())
	if err != nil {
		return s, nil, describeVerifyError(dir, err)
	}
	var bad []string
	for _, ci := range infos {
		sc := statCursor{Name: ci.Name, Committed: ci.Committed, Lag: ci.Lag, LagBytes: ci.LagBytes}
		if ci.Err != nil {
			sc.Error = describeCursorError(ci.Err)
			bad = append(bad, sc.Error)
		}
		s.Cursors = append(s.Cursors, sc)
	}
	return s, bad, nil
}

// storeStat is stat's report on a stream store.
type storeStat struct {
	Dir     string       `json:"dir"`
	Streams []streamStat `json:"streams"`
}

type streamStat struct {
	Name        string     `json:"name"`
	SegmentSize int64      `json:"segment_size,omitempty"`
	Sync        string     `json:"sync"`
	MaxBytes    int64      `json:"retention_max_bytes,omitempty"`
	MaxAge      string     `json:"retention_max_age,omitempty"`
	UntilAcked  bool       `json:"retention_until_acked,omitempty"`
	Log         statReport `json:"log"`
}

// runStoreStat describes every stream infos lists of the store in dir: its
// configuration and its log, whose cursors are its groups' positions.
func runStoreStat(stdout io.Writer, dir string, infos []stream.StreamInfo, asJSON bool) (printed bool, err error) {
	out := storeStat{Dir: dir, Streams: []streamStat{}}
	var bad []string
	for _, in := range infos {
		ls, b, err := statLog(in.LogDir)
		if err != nil {
			return false, fmt.Errorf("stream %s: %w", in.Name, err)
		}
		for _, e := range b {
			bad = append(bad, fmt.Sprintf("stream %s: %s", in.Name, e))
		}
		c := in.Config
		ss := streamStat{Name: in.Name, SegmentSize: c.SegmentSize, Sync: c.Sync.String(), MaxBytes: c.Retention.MaxBytes, UntilAcked: c.Retention.UntilAcked, Log: ls}
		if c.Sync == 0 {
			ss.Sync = wal.SyncBatch.String()
		}
		if c.Retention.MaxAge > 0 {
			ss.MaxAge = c.Retention.MaxAge.String()
		}
		out.Streams = append(out.Streams, ss)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(&out); err != nil {
			return true, err
		}
	} else {
		fmt.Fprintf(stdout, "store %s: %d %s\n", dir, len(out.Streams), plural(uint64(len(out.Streams)), "stream", "streams"))
		for _, ss := range out.Streams {
			ret := "keep all"
			if ss.MaxBytes > 0 || ss.MaxAge != "" {
				ret = fmt.Sprintf("max bytes %d, max age %s", ss.MaxBytes, cmp.Or(ss.MaxAge, "none"))
			}
			if ss.UntilAcked {
				ret += ", until every group acked"
			}
			fmt.Fprintf(stdout, "\nstream %s: sync %s, retention %s; groups are the cursors below\n", ss.Name, ss.Sync, ret)
			printStat(stdout, &ss.Log)
		}
	}
	if len(bad) > 0 {
		return true, fmt.Errorf("%s: %s", dir, strings.Join(bad, "; "))
	}
	return true, nil
}

// readMark reads the durable mark in a segment's header.
func readMark(path string) (frame.Mark, bool) {
	f, err := os.Open(path)
	if err != nil {
		return frame.Mark{}, false
	}
	defer f.Close()
	b := make([]byte, frame.MarkOffset+frame.MarkSize)
	if _, err := io.ReadFull(f, b); err != nil {
		return frame.Mark{}, false
	}
	if _, err := frame.DecodeFileHeader(b); err != nil {
		return frame.Mark{}, false
	}
	return frame.DecodeMark(b[frame.MarkOffset:])
}

// describeCursorError names a cursor file and what is wrong with it,
// without the wal package's prefix.
func describeCursorError(err error) string {
	var cfe *wal.CursorFileError
	if errors.As(err, &cfe) {
		return fmt.Sprintf("bad cursor file %s: %s", cfe.Path, cfe.Problem)
	}
	return strings.TrimPrefix(err.Error(), "wal: ")
}

func printStat(w io.Writer, s *statReport) {
	fmt.Fprintf(w, "log %s\n", s.Dir)
	fmt.Fprintf(w, "log id: %s\n", s.LogID)
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "segments: %d, %d bytes\n", len(s.Segments), s.Bytes)
	for _, g := range s.Segments {
		state := "active"
		if g.Sealed {
			state = "sealed"
		}
		fmt.Fprintf(w, "  %s  seqs %d..%d  %d bytes  %s\n", g.Name, g.FirstSeq, g.LastSeq, g.Bytes, state)
	}
	if s.Records == 0 {
		fmt.Fprintf(w, "records: none (next seq %d)\n", s.NextSeq)
	} else {
		fmt.Fprintf(w, "records: %d, first seq %d, last seq %d, durable seq %d\n", s.Records, s.FirstSeq, s.LastSeq, s.DurableSeq)
	}
	if t := s.Torn; t != nil {
		fmt.Fprintf(w, "torn tail: %d bytes at byte offset %d of segment %s (a crash's partial last write, or a record being written)\n", t.Bytes, t.Offset, t.Segment)
	} else {
		fmt.Fprintln(w, "torn tail: none")
	}
	if len(s.Gaps) == 0 {
		fmt.Fprintln(w, "gaps: none")
	}
	for _, g := range s.Gaps {
		fmt.Fprintf(w, "gap: records %d..%d lost to damage and cut by repair (recorded at byte offset %d of segment %s)\n", g.First, g.Last, g.Offset, g.Segment)
	}
	if len(s.Cursors) == 0 {
		fmt.Fprintln(w, "cursors: none")
	}
	for _, c := range s.Cursors {
		if c.Error != "" {
			fmt.Fprintf(w, "cursor %s: %s\n", c.Name, c.Error)
			continue
		}
		fmt.Fprintf(w, "cursor %s: committed %d, lag %d %s (%d bytes)\n", c.Name, c.Committed, c.Lag, plural(c.Lag, "record", "records"), c.LagBytes)
	}
}
