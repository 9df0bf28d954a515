package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/wal"
)

// The bad-input fixture: a log of _fixRecords records of _fixSize bytes in
// 64 KiB segments, about 530 records each.
const (
	_fixRecords = 6000
	_fixSize    = 100
	_fixFrame   = frame.HeaderSize + _fixSize
)

// step runs appendlog with args ("{D}" and the case's other variables are
// substituted) and expects the exit status code and every string of want
// in the output.
type step struct {
	args []string
	code int
	want []string
}

func stp(code int, args string, want ...string) step {
	return step{args: strings.Fields(args), code: code, want: want}
}

func TestBadInputs(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	loadJSON(t, "--dir", base, "--records", strconv.Itoa(_fixRecords), "--size", strconv.Itoa(_fixSize),
		"--segment-size", "65536", "--writers", "4", "--sync", "never")
	baseSegs := segments(t, base)
	if len(baseSegs) < 6 {
		t.Fatalf("fixture has %d segments, want at least 6", len(baseSegs))
	}

	tests := []struct {
		name string
		// setup prepares the directory at d and returns variables for the
		// steps; it may replace d by anything (or nothing).
		setup func(t *testing.T, d string) map[string]string
		steps []step
		// reopen: after the steps, wal.Open must recover the log, accept
		// appends, and verify must pass.
		reopen bool
	}{
		{
			name:  "missing dir",
			setup: func(t *testing.T, d string) map[string]string { return nil },
			steps: []step{
				stp(1, "verify {D}", "{D}: no such directory"),
				stp(1, "verify --payloads {D}", "no such directory"),
				stp(1, "dump {D}", "no such directory"),
				stp(1, "dump --count {D}", "no such directory"),
				stp(1, "repair {D}", "no such directory"),
				stp(1, "repair --force {D}", "no such directory"),
			},
		},
		{
			name: "plain file",
			setup: func(t *testing.T, d string) map[string]string {
				writeFile(t, d, []byte("not a log\n"))
				return nil
			},
			steps: []step{
				stp(1, "verify {D}", "{D}: not a directory"),
				stp(1, "dump {D}", "not a directory"),
				stp(1, "repair --force {D}", "not a directory"),
				stp(1, "load --dir {D} --records 10", "{D}"),
			},
		},
		{
			name:  "empty dir",
			setup: func(t *testing.T, d string) map[string]string { mkdir(t, d); return nil },
			steps: []step{
				stp(0, "verify {D}", "no segments", "0 records"),
				stp(0, "verify --payloads {D}", "no segments"),
				stp(0, "dump --count {D}", "0\n"),
				stp(0, "dump {D}"),
				stp(0, "repair {D}", "nothing to repair"),
			},
			reopen: true,
		},
		{
			name: "random bytes as the only segment",
			setup: func(t *testing.T, d string) map[string]string {
				mkdir(t, d)
				writeFile(t, filepath.Join(d, "00000000000000000001.seg"), randomBytes(10000))
				return nil
			},
			steps: []step{
				stp(1, "verify {D}", "damaged", "segment 00000000000000000001.seg, byte offset 0", "not an appendlog file"),
				stp(1, "dump {D}", "00000000000000000001.seg", "not an appendlog file"),
				stp(1, "repair {D}", "damaged in the middle of the log", "repair --force {D}", "Nothing was changed"),
				stp(1, "verify {D}", "not an appendlog file"),
				stp(0, "repair --force {D}", "repaired", "00000000000000000001.seg"),
				stp(0, "verify {D}", "no segments"),
			},
			reopen: true,
		},
		{
			name: "random bytes as a segment after the log",
			setup: func(t *testing.T, d string) map[string]string {
				copyDir(t, base, d)
				writeFile(t, filepath.Join(d, "00000000000000999999.seg"), randomBytes(5000))
				return map[string]string{"TAIL": baseSegs[len(baseSegs)-1]}
			},
			steps: []step{
				stp(1, "verify {D}", "damaged", "segment {TAIL}, byte offset", "00000000000000999999.seg"),
				stp(1, "repair {D}", "--force"),
				stp(0, "repair --force {D}", "00000000000000999999.seg"),
				stp(0, "verify --payloads {D}", "clean", fmt.Sprintf("%d records", _fixRecords)),
			},
			reopen: true,
		},
		{
			name: "foreign file",
			setup: func(t *testing.T, d string) map[string]string {
				copyDir(t, base, d)
				writeFile(t, filepath.Join(d, "notes.txt"), []byte("hello\n"))
				mkdir(t, filepath.Join(d, "subdir"))
				return nil
			},
			steps: []step{
				stp(0, "verify {D}", "warning", "notes.txt", "clean", fmt.Sprintf("%d records", _fixRecords)),
				stp(0, "verify --payloads {D}", "notes.txt", "payloads check out"),
				stp(0, "dump --count {D}", fmt.Sprintf("%d\n", _fixRecords)),
				stp(0, "repair {D}", "nothing to repair"),
			},
			reopen: true,
		},
		{
			name: "middle segment removed",
			setup: func(t *testing.T, d string) map[string]string {
				copyDir(t, base, d)
				rm(t, filepath.Join(d, baseSegs[3]))
				f, end := firstSeq(t, baseSegs[3]), firstSeq(t, baseSegs[4])
				return map[string]string{
					"NEXT": baseSegs[4], "MISSING": baseSegs[3],
					"BEFORE": strconv.FormatUint(f-1, 10),
					"GAP":    fmt.Sprintf("records %d..%d (%d records)", f, end-1, end-f),
					"KEPT":   strconv.FormatUint(_fixRecords-(end-f), 10),
				}
			},
			steps: []step{
				stp(1, "verify {D}", "damaged", "segment {NEXT}, byte offset 0", "segment is missing"),
				stp(1, "dump --count {D}", "stopped after seq {BEFORE}", "segment is missing"),
				stp(1, "stat --json {D}", "segment is missing"),
				stp(1, "repair {D}", "--force", "segment is missing"),
				stp(0, "repair --force {D}", "repaired", "{NEXT}", "Recorded a gap: {GAP} lost", "Created 1 segment holding only the gap of a missing segment: {MISSING}"),
				stp(0, "verify --payloads {D}", "consistent", "{KEPT} records (seqs 1..6000)", "1 recorded gap", "{GAP} at byte offset 4096 of segment {MISSING}", "payloads check out"),
				stp(0, "dump --count {D}", "{KEPT}\n", "gap: {GAP} lost"),
				stp(0, "repair --force {D}", "nothing to repair"),
			},
			reopen: true,
		},
		{
			name: "flipped byte mid-log",
			setup: func(t *testing.T, d string) map[string]string {
				copyDir(t, base, d)
				// Flip a payload byte of the 6th frame of the 3rd segment.
				frameOff := int64(frame.FileHeaderSize + 5*_fixFrame)
				flipByte(t, filepath.Join(d, baseSegs[2]), frameOff+frame.HeaderSize+30)
				return map[string]string{
					"SEG":    baseSegs[2],
					"OFF":    strconv.FormatInt(frameOff, 10),
					"BEFORE": strconv.FormatUint(firstSeq(t, baseSegs[2])+4, 10),
					"LOST":   strconv.FormatUint(firstSeq(t, baseSegs[2])+5, 10),
					"FRAME":  strconv.Itoa(_fixFrame),
				}
			},
			steps: []step{
				stp(1, "verify {D}", "damaged", "segment {SEG}, byte offset {OFF}", "checksum mismatch"),
				stp(1, "dump --count {D}", "stopped after seq {BEFORE}", "{SEG}", "checksum mismatch"),
				stp(1, "stat --json {D}", "{SEG}", "checksum mismatch"),
				stp(1, "repair {D}", "damaged in the middle of the log", "segment {SEG}, byte offset {OFF}", "repair --force {D}"),
				stp(1, "verify {D}", "{SEG}"), // repair without --force changed nothing
				stp(0, "repair --force {D}", "repaired", "Cut {FRAME} bytes from segment {SEG} at byte offset {OFF}; they are kept in {SEG}.cut-{OFF}",
					"Recorded a gap: record {LOST} (1 record) lost"),
				stp(0, "verify --payloads {D}", "consistent", "5999 records", "record {LOST} (1 record) at byte offset {OFF} of segment {SEG}", "payloads check out"),
				stp(0, "dump --count {D}", "5999\n", "gap: record {LOST} (1 record)"),
			},
			reopen: true,
		},
		{
			name: "torn tail",
			setup: func(t *testing.T, d string) map[string]string {
				copyDir(t, base, d)
				seg, end := dataEnd(t, d)
				// A crash in the middle of writing a frame past the
				// durable mark: its first 56 bytes reached the file.
				fr := make([]byte, _fixFrame)
				frame.Encode(fr, _fixRecords+1, bytes.Repeat([]byte{'x'}, _fixSize))
				writeAt(t, filepath.Join(d, seg), fr[:56], end)
				return map[string]string{"SEG": seg, "OFF": strconv.FormatInt(end, 10)}
			},
			steps: []step{
				stp(0, "verify {D}", "torn tail: 56 bytes at byte offset {OFF} of segment {SEG}", fmt.Sprintf("%d records", _fixRecords)),
				stp(0, "verify --payloads {D}", "torn tail", "payloads check out"),
				stp(0, "dump --count {D}", fmt.Sprintf("%d\n", _fixRecords), "torn tail (56 bytes at byte offset {OFF} of segment {SEG})"),
				stp(0, "repair {D}", "repaired", "Cut 56 bytes from segment {SEG} at byte offset {OFF}"),
				stp(0, "verify {D}", "clean", fmt.Sprintf("%d records", _fixRecords)),
				stp(0, "repair {D}", "nothing to repair"),
			},
			reopen: true,
		},
		{
			name: "truncated below the durable mark",
			setup: func(t *testing.T, d string) map[string]string {
				copyDir(t, base, d)
				seg, end := dataEnd(t, d)
				truncate(t, filepath.Join(d, seg), end-50)
				return map[string]string{"SEG": seg, "OFF": strconv.FormatInt(end-_fixFrame, 10), "KEPT": strconv.Itoa(_fixRecords - 1)}
			},
			steps: []step{
				stp(1, "verify {D}", "damaged", "segment {SEG}, byte offset {OFF}", "durable"),
				stp(1, "dump --count {D}", "stopped after seq {KEPT}"),
				stp(1, "repair {D}", "--force"),
				stp(0, "repair --force {D}", "repaired", "{SEG}", "Recorded a gap: record 6000 (1 record) lost"),
				stp(0, "verify --payloads {D}", "consistent", "{KEPT} records", "record 6000 (1 record)"),
			},
			reopen: true,
		},
		{
			name:  "unknown flags",
			setup: func(t *testing.T, d string) map[string]string { copyDir(t, base, d); return nil },
			steps: []step{
				stp(2, "verify --bogus {D}", "unknown flag: --bogus"),
				stp(2, "dump --bogus {D}", "unknown flag: --bogus"),
				stp(2, "repair --bogus {D}", "unknown flag: --bogus"),
				stp(2, "load --bogus --dir {D}", "unknown flag: --bogus"),
				stp(2, "repair --force=sure {D}", "--force"),
				stp(0, "verify {D}", "clean"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "log")
			vars := tt.setup(t, d)
			subst := func(s string) string {
				s = strings.ReplaceAll(s, "{D}", d)
				for k, v := range vars {
					s = strings.ReplaceAll(s, "{"+k+"}", v)
				}
				return s
			}
			for _, st := range tt.steps {
				args := make([]string, len(st.args))
				for i, a := range st.args {
					args[i] = subst(a)
				}
				want := make([]string, len(st.want))
				for i, w := range st.want {
					want[i] = subst(w)
				}
				r := cli(t, args...)
				expect(t, r, st.code, want...)
				checkOutputKind(t, r)
			}
			if tt.reopen {
				checkReopen(t, d)
			}
		})
	}
}

// checkOutputKind checks what r printed on stdout against what its
// command promises whatever happens: stat --json prints one JSON object
// (on failure {"dir", "error"}), and dump --count prints a count only of a
// log it read to the end.
func checkOutputKind(t *testing.T, r result) {
	t.Helper()
	has := func(flag string) bool { return slices.Contains(r.args, flag) }
	switch {
	case len(r.args) > 0 && r.args[0] == "stat" && has("--json") && r.code != exitUsage:
		var v map[string]any
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("stat --json printed no JSON object (%v)\n%s", err, r)
		}
		if dec.More() {
			t.Fatalf("stat --json printed more than one JSON object\n%s", r)
		}
		if msg, _ := v["error"].(string); r.code != 0 && msg == "" && v["cursors"] == nil && v["streams"] == nil {
			t.Fatalf("stat --json failed without saying why in its JSON\n%s", r)
		}
	case len(r.args) > 0 && r.args[0] == "dump" && has("--count") && r.code != 0 && r.stdout != "":
		t.Fatalf("dump --count that could not read the log printed a count %q\n%s", r.stdout, r)
	}
}

// checkReopen opens the log in dir, appends load payloads from a new writer,
// closes it, and expects verify --payloads to pass with those 10 records
// more (and the same recorded gaps).
func checkReopen(t *testing.T, dir string) {
	t.Helper()
	before, err := wal.Verify(dir, nil)
	if err != nil {
		t.Fatalf("wal.Verify after repair: %v", err)
	}
	l, err := wal.Open(dir, nil)
	if err != nil {
		t.Fatalf("wal.Open after repair: %v", err)
	}
	next := l.NextSeq()
	p := make([]byte, 64)
	for c := range uint64(10) {
		if err := payload.Encode(p, 1000, c); err != nil {
			t.Fatal(err)
		}
		seq, err := l.Append(p)
		if err != nil {
			l.Close()
			t.Fatal(err)
		}
		if seq != next+c {
			l.Close()
			t.Fatalf("Append returned seq %d, want %d", seq, next+c)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("%d records", before.Records+10)}
	if n := len(before.Gaps); n > 0 {
		want = append(want, fmt.Sprintf("%d recorded gap", n))
	}
	expect(t, cli(t, "verify", "--payloads", dir), exitOK, want...)
}

// dataEnd returns the last segment of the log in dir and the file offset
// where its last record ends.
func dataEnd(t *testing.T, dir string) (string, int64) {
	t.Helper()
	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var (
		seg string
		end int64
	)
	for r.Next() {
		var off int64
		seg, off = r.Position()
		end = off + frame.HeaderSize + int64(len(r.Record()))
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return filepath.Base(seg), end
}

// firstSeq parses the first sequence number from a segment's name.
func firstSeq(t *testing.T, seg string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimSuffix(seg, ".seg"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(b)
	return b
}

func mkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(b, off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
