package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBench runs a tiny bench through the binary and checks the table, the
// JSON report, the chart and that the work directory was removed.
func TestBench(t *testing.T) {
	dir := t.TempDir()
	out := t.TempDir()
	jsonPath := filepath.Join(out, "bench.json")
	chartPath := filepath.Join(out, "bench.svg")
	r := cli(t, "bench", "--dir", dir, "--sizes", "128", "--writers", "1,2",
		"--strategies", "write,bufio-64k,ring,wal-batch", "--records", "2000",
		"--max-bytes", "4MiB", "--json", jsonPath, "--chart", chartPath)
	expect(t, r, exitOK,
		"machine:", "regime:", "ceiling:", "MB = 10^6 bytes",
		"128 B records (verified:",
		"writers  strategy", "ns/op", "[min – max]", "MB/s", "records/s", "allocs/op", "p50", "p99", "p99.9", "verified",
		"→ 128 B records, 1 writer: use ", "→ 128 B records, 2 writers: use ",
		"wrote the JSON report to "+jsonPath, "drew the chart to "+chartPath)
	for _, s := range []string{"write", "bufio-64k", "ring", "wal-batch"} {
		if !strings.Contains(r.stdout, "  "+s+" ") {
			t.Errorf("table lacks strategy %s\n%s", s, r)
		}
	}
	if strings.Contains(r.stdout, "FAILED") || !strings.Contains(r.stdout, "8 ok, 0 failed, 0 skipped") {
		t.Errorf("a case failed or was skipped:\n%s", r)
	}
	if strings.Contains(r.stdout, "wrote the JSON") {
		t.Errorf("messages went to stdout:\n%s", r)
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Ceiling map[string]any   `json:"ceiling"`
		Machine map[string]any   `json:"machine"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("JSON report does not parse: %v\n%s", err, b)
	}
	if _, ok := doc.Ceiling["buffered_mb_per_s"]; !ok {
		t.Errorf("JSON ceiling lacks buffered_mb_per_s: %v", doc.Ceiling)
	}
	for _, f := range []string{"cpu", "cores", "kernel", "fs", "go_version", "gomaxprocs"} {
		if _, ok := doc.Machine[f]; !ok {
			t.Errorf("JSON machine lacks %q: %v", f, doc.Machine)
		}
	}
	if len(doc.Results) != 8 {
		t.Fatalf("JSON has %d results, want 8", len(doc.Results))
	}
	for _, res := range doc.Results {
		for _, f := range []string{"strategy", "record_size", "writers", "ns_per_op", "mb_per_s", "records_per_sec", "p99_ns", "verified", "lost", "dropped"} {
			if _, ok := res[f]; !ok {
				t.Errorf("JSON result %v lacks %q", res["strategy"], f)
			}
		}
		if res["verified"] != true || res["record_size"] != 128.0 {
			t.Errorf("JSON result %v", res)
		}
	}

	svg, err := os.ReadFile(chartPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(svg), []byte("<?xml")) || !bytes.Contains(svg, []byte("<svg")) || !bytes.HasSuffix(bytes.TrimSpace(svg), []byte("</svg>")) {
		t.Errorf("chart is not an SVG document: %.200s", svg)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("bench left %d entries in --dir", len(ents))
	}
}

// TestBenchPNG runs bench in-process with a PNG chart.
func TestBenchPNG(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "c.png")
	r := runInProcess("bench", "--dir", t.TempDir(), "--sizes", "1", "--writers", "3",
		"--strategies", "writev,direct", "--records", "3000", "--max-bytes", "4MiB", "--chart", chart)
	checkNoCrash(t, r)
	expect(t, r, exitOK, "1 B records (verified: file length, one tag per record")
	b, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("chart is not a PNG")
	}
}

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--quick", "--full"}, "--quick and --full exclude each other"},
		{[]string{"bench", "extra"}, "extra"},
		{[]string{"bench", "--sizes", "12x"}, `--sizes: bad size "12x"`},
		{[]string{"bench", "--sizes", ","}, "lists nothing"},
		{[]string{"bench", "--sizes", "0"}, "record size 0 out of range"},
		{[]string{"bench", "--sizes", "4MiB"}, "out of range"},
		{[]string{"bench", "--writers", "0"}, "writer count 0 out of range"},
		{[]string{"bench", "--writers", "many"}, `--writers: "many" is not a number`},
		{[]string{"bench", "--sizes", "1", "--writers", "300"}, "at most 255 writers"},
		{[]string{"bench", "--strategies", "fast"}, `unknown strategy "fast" (known: write, writev`},
		{[]string{"bench", "--runs", "2"}, "at least 3 times"},
		{[]string{"bench", "--run-time", "-1s"}, "--run-time must be positive"},
		{[]string{"bench", "--max-bytes", "lots"}, "--max-bytes"},
		{[]string{"bench", "--records", "-5"}, "--records must be positive"},
		{[]string{"bench", "--chart", "out.gif"}, "must end in .svg or .png"},
		{[]string{"bench", "--dir", filepath.Join(dir, "missing")}, "no such directory"},
		// --dir is where bench makes its own directory, not a log.
		{[]string{"bench", "--dir", file}, file + ": not a directory"},
		// Reports whose directory is missing are refused before the run,
		// not after minutes of measuring.
		{[]string{"bench", "--json", filepath.Join(dir, "missing", "b.json")}, "--json " + filepath.Join(dir, "missing", "b.json") + ": " + filepath.Join(dir, "missing") + ": no such directory"},
		{[]string{"bench", "--chart", filepath.Join(dir, "missing", "b.svg")}, "--chart " + filepath.Join(dir, "missing", "b.svg") + ": " + filepath.Join(dir, "missing") + ": no such directory"},
		{[]string{"bench", "--json", filepath.Join(file, "b.json")}, "not a directory"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runInProcess(tt.args...)
			checkNoCrash(t, r)
			expect(t, r, exitUsage, tt.want, "--help")
			if strings.Contains(r.stderr, "log directory") {
				t.Errorf("bench's --dir is not a log directory:\n%s", r)
			}
			if r.stdout != "" {
				t.Fatalf("usage error printed to stdout:\n%s", r)
			}
		})
	}
}

// TestBenchReportPaths: a --json or --chart that names a directory or
// nothing, or one file named by both, is refused before the run (exit status 2), not
// found after minutes of measuring, when the report cannot be written or
// the chart overwrites it. Each command line would otherwise be a tiny run.
func TestBenchReportPaths(t *testing.T) {
	dir := t.TempDir()
	same := filepath.Join(dir, "b.svg")
	tiny := []string{"bench", "--dir", t.TempDir(), "--sizes", "128", "--writers", "1", "--strategies", "write", "--records", "100", "--max-bytes", "4MiB"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--json", dir}, "--json " + dir + ": a directory; want the name of a file to write"},
		{[]string{"--chart", filepath.Join(dir, "d.svg")}, "--chart " + filepath.Join(dir, "d.svg") + ": a directory"},
		{[]string{"--json", same, "--chart", same}, "--json and --chart both name " + same},
		// An empty name (an unset variable in a script) ran without the
		// report or the chart.
		{[]string{"--json", ""}, "--json: empty name"},
		{[]string{"--chart", ""}, "--chart: empty name"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if err := os.MkdirAll(filepath.Join(dir, "d.svg"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := runInProcess(append(slices.Clone(tiny), tt.args...)...)
			checkNoCrash(t, r)
			expect(t, r, exitUsage, tt.want, "--help")
			if r.stdout != "" {
				t.Fatalf("bench ran, or printed to stdout:\n%s", r)
			}
		})
	}
	if _, err := os.Stat(same); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("bench wrote %s (%v)", same, err)
	}
}

func TestBenchHelp(t *testing.T) {
	r := runInProcess("bench", "--help")
	expect(t, r, exitOK, "Usage:", "appendlog bench", "--quick", "--full", "--json", "--chart",
		"ring-direct", "wal-batch", "io_uring", "MB = 10^6 bytes", "Exit status")
	if strings.Contains(r.stdout, "--records") {
		t.Errorf("help shows the hidden --records flag")
	}
}
