package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/appendlog/appendlog/internal/payload"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tinyConfig is a run that takes a second or two: one size, two writer
// counts, small fixed record counts.
func tinyConfig(t *testing.T, strategies ...string) Config {
	return Config{
		Dir:        t.TempDir(),
		Sizes:      []int{128},
		Writers:    []int{1, 4},
		Strategies: strategies,
		Runs:       MinRuns,
		MaxBytes:   4 << 20,
		Records:    2000,
	}
}

// TestRunEveryStrategy runs every strategy on a tiny config and checks that
// each one either verified or was skipped with a reason, never failed.
func TestRunEveryStrategy(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Sizes = []int{1, 128, 4096}
	cfg.MaxBytes = 8 << 20 // 2000 records of 4 KiB
	cfg.Writers = []int{3}
	var progress []Progress
	cfg.Progress = func(p Progress) { progress = append(progress, p) }
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * len(Strategies()); len(rep.Results) != want {
		t.Fatalf("%d results, want %d", len(rep.Results), want)
	}
	for _, r := range rep.Results {
		switch r.Status {
		case StatusOK:
			if !r.Verified || r.Lost != 0 || r.Dropped != 0 || r.Runs != MinRuns || r.Records != 2000 {
				t.Errorf("%s %d B: %+v", r.Strategy, r.RecordSize, r)
			}
			if r.NsPerOp.Min > r.NsPerOp.Median || r.NsPerOp.Median > r.NsPerOp.Max || r.MBPerSec.Median <= 0 || r.RecordsPerSec.Median <= 0 {
				t.Errorf("%s %d B: inconsistent stats %+v", r.Strategy, r.RecordSize, r)
			}
			if r.P50Ns <= 0 || r.LatencySamples == 0 {
				t.Errorf("%s %d B: no latency samples", r.Strategy, r.RecordSize)
			}
		case StatusSkipped:
			if r.Reason == "" {
				t.Errorf("%s skipped without a reason", r.Strategy)
			}
			t.Logf("%s skipped: %s", r.Strategy, r.Reason)
		default:
			t.Errorf("%s %d B × %d: %s: %s", r.Strategy, r.RecordSize, r.Writers, r.Status, r.Reason)
		}
	}
	if len(progress) == 0 || progress[len(progress)-1].Done != progress[len(progress)-1].Total {
		t.Errorf("progress did not end at its total: %+v", progress[len(progress)-1:])
	}
	if rep.Ceiling.Buffered.Median <= 0 {
		t.Errorf("no buffered ceiling: %+v", rep.Ceiling)
	}
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("Run left %d entries in %s, first %s", len(ents), cfg.Dir, ents[0].Name())
	}
}

// TestReportShape checks the table, the JSON and the chart of a tiny run.
func TestReportShape(t *testing.T) {
	cfg := tinyConfig(t, "write", "bufio-64k", "ring", "wal-nosync")
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	t.Logf("table:\n%s", out)
	for _, want := range []string{
		"machine:", "regime:", "ceiling:", "units:", "MB = 10^6 bytes",
		"128 B records (verified: every byte of every record",
		"writers  strategy", "ns/op", "MB/s", "records/s", "allocs/op", "p50", "p99", "p99.9", "ceiling", "verified",
		"→ 128 B records, 1 writer: use ", "→ 128 B records, 4 writers: use ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	for _, s := range cfg.Strategies {
		if !strings.Contains(out, " "+s+" ") {
			t.Errorf("table lacks strategy %s", s)
		}
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Ceiling struct {
			Buffered struct{ Median float64 } `json:"buffered_mb_per_s"`
			Bytes    int64                    `json:"bytes"`
		} `json:"ceiling"`
		Machine struct {
			CPU string `json:"cpu"`
			FS  string `json:"fs"`
		} `json:"machine"`
		Results         []map[string]any `json:"results"`
		Recommendations []map[string]any `json:"recommendations"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, js.String())
	}
	if doc.Ceiling.Buffered.Median <= 0 || doc.Ceiling.Bytes <= 0 || doc.Machine.CPU == "" || doc.Machine.FS == "" {
		t.Errorf("JSON ceiling or machine missing:\n%s", js.String())
	}
	if len(doc.Results) != 8 || len(doc.Recommendations) != 2 {
		t.Fatalf("JSON has %d results and %d recommendations, want 8 and 2", len(doc.Results), len(doc.Recommendations))
	}
	for _, r := range doc.Results {
		for _, f := range []string{"strategy", "record_size", "writers", "ns_per_op", "mb_per_s", "records_per_sec", "p99_ns", "verified", "lost", "dropped", "allocs_per_op", "pct_of_ceiling"} {
			if _, ok := r[f]; !ok {
				t.Errorf("result %v lacks %q", r["strategy"], f)
			}
		}
		if r["verified"] != true || r["lost"] != 0.0 || r["dropped"] != 0.0 {
			t.Errorf("result %v: verified %v lost %v dropped %v", r["strategy"], r["verified"], r["lost"], r["dropped"])
		}
	}

	for _, ext := range []string{".svg", ".png"} {
		path := filepath.Join(t.TempDir(), "chart"+ext)
		if err := rep.WriteChart(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch ext {
		case ".svg":
			if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("</svg>")) || !bytes.Contains(b, []byte("ring")) {
				t.Errorf("chart.svg is not an SVG with the strategies: %.200s", b)
			}
		case ".png":
			if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("chart.png is not a PNG")
			}
		}
	}
	if err := rep.WriteChart(filepath.Join(t.TempDir(), "chart.gif")); err == nil {
		t.Error("WriteChart accepted a .gif")
	}
}

// TestFailedCaseIsNotASpeed checks that a strategy whose output does not
// verify is reported as failed, with no numbers.
func TestFailedCaseIsNotASpeed(t *testing.T) {
	cfg := tinyConfig(t, "write")
	cfg.Writers = []int{2}
	lossy := Strategy{Name: "lossy", Kind: PageCache, Doc: "drops one record of writer 0", open: openLossy}
	rep, err := runWith(context.Background(), cfg, []Strategy{lossy})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("%d results", len(rep.Results))
	}
	r := rep.Results[0]
	if r.Status != StatusFailed || r.Verified || r.Lost != 1 || !strings.Contains(r.Reason, "missing record") {
		t.Fatalf("lossy strategy: %+v", r)
	}
	if r.MBPerSec.Median != 0 || r.NsPerOp.Median != 0 {
		t.Fatalf("failed case has numbers: %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "mb_per_s") || !strings.Contains(string(b), `"verified":false`) {
		t.Fatalf("failed case JSON: %s", b)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "FAILED: verification failed") {
		t.Fatalf("table does not say the case failed:\n%s", table.String())
	}
	if len(rep.Failed()) != 1 {
		t.Fatalf("Failed() = %v", rep.Failed())
	}
}

// lossySink is the write strategy, except that it silently drops writer 0's
// record 5.
type lossySink struct {
	*writeSink
}

func openLossy(ctx context.Context, dir string, rc runCase) (sink, error) {
	s, err := openWrite(ctx, dir, rc)
	if err != nil {
		return nil, err
	}
	return &lossySink{s.(*writeSink)}, nil
}

func (s *lossySink) producer(int) (producer, error) { return s, nil }

func (s *lossySink) write(rec []byte) error {
	if w, c, err := payload.Decode(rec); err == nil && w == 0 && c == 5 {
		return nil
	}
	return s.writeSink.write(rec)
}

func TestConfigValidate(t *testing.T) {
	bad := []struct {
		cfg  Config
		want string
	}{
		{Config{Sizes: []int{0}}, "record size 0"},
		{Config{Sizes: []int{128, 128}}, "given twice"},
		{Config{Writers: []int{0}}, "writer count 0"},
		{Config{Sizes: []int{1}, Writers: []int{300}}, "at most 255 writers"},
		{Config{Strategies: []string{"nope"}}, `unknown strategy "nope"`},
		{Config{Runs: 2}, "at least 3 times"},
		{Config{MaxBytes: 10}, "max bytes 10"},
		{Config{Records: 3, Writers: []int{8}}, "fewer than the 8 writers"},
		// 3000 records of 4 KiB are 12 MB: a run would write three times
		// what MaxBytes allows (and what the report says a run writes).
		{Config{Records: 3000, Sizes: []int{128, 4096}, MaxBytes: 4 << 20}, "records 3000 of 4096 bytes: more than max bytes 4194304"},
	}
	for _, tt := range bad {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	for _, c := range []Config{{}, QuickConfig(), DefaultConfig(), FullConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
	}
}

func TestRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := tinyConfig(t, "write")
	if _, err := Run(ctx, cfg); err == nil {
		t.Fatal("Run with a canceled context succeeded")
	}
	ents, _ := os.ReadDir(cfg.Dir)
	if len(ents) != 0 {
		t.Fatalf("canceled Run left %d entries", len(ents))
	}
}

func TestSamplingStride(t *testing.T) {
	for _, tt := range []struct {
		clock, op float64
		want      int
	}{
		{20, 100000, _minStride},
		{20, 20, 256},
		{20, 1, _maxStride},
	} {
		if got := samplingStride(tt.clock, tt.op); got != tt.want {
			t.Errorf("samplingStride(%v, %v) = %d, want %d", tt.clock, tt.op, got, tt.want)
		}
	}
}

// TestSkippedStrategy checks that a strategy whose probe fails is reported
// as skipped with the probe's reason, in the result, the table and the
// notes, and that skipping is not a failure.
func TestSkippedStrategy(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Writers = []int{1}
	absent := Strategy{Name: "absent", Kind: PageCache, open: openWrite,
		probe: func(string) error { return errors.New("not on this kernel") }}
	rep, err := runWith(context.Background(), cfg, []Strategy{absent})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Status != StatusSkipped || r.Reason != "not on this kernel" || r.Verified || len(rep.Failed()) != 0 {
		t.Fatalf("skipped strategy: %+v", r)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1  absent    skipped: not on this kernel", "note:     absent skipped: not on this kernel", "no strategy ran and verified"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestFailedReasonIsOneLine runs a strategy whose every Write fails, as on
// a full disk, with 8 writers: each writer, the final flush and the close
// fail. The reason names the first error and counts the others, on one
// line, so that the table keeps one row per case.
func TestFailedReasonIsOneLine(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Writers = []int{8}
	full := Strategy{Name: "full", Kind: PageCache, Doc: "every write fails", open: openFull}
	rep, err := runWith(context.Background(), cfg, []Strategy{full})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Status != StatusFailed || !strings.Contains(r.Reason, "no space left on device") || !strings.Contains(r.Reason, "and 9 more errors") {
		t.Fatalf("full strategy: %+v", r)
	}
	if strings.Contains(r.Reason, "\n") {
		t.Fatalf("reason spans lines:\n%s", r.Reason)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(table.String(), "no space left on device"); n != 1 {
		t.Fatalf("table names the error on %d lines, want 1, the case's row:\n%s", n, table.String())
	}
}

// fullSink fails every write, the final flush and the close with ENOSPC.
type fullSink struct {
	*writeSink
}

func openFull(ctx context.Context, dir string, rc runCase) (sink, error) {
	s, err := openWrite(ctx, dir, rc)
	if err != nil {
		return nil, err
	}
	return &fullSink{s.(*writeSink)}, nil
}

func (s *fullSink) producer(int) (producer, error) { return s, nil }
func (s *fullSink) write([]byte) error             { return syscall.ENOSPC }
func (s *fullSink) finish(context.Context) error   { return syscall.ENOSPC }
func (s *fullSink) close() error                   { return errors.Join(s.writeSink.close(), syscall.ENOSPC) }

// TestDefaultDirNote checks that the note on the chosen directory gives
// the real reason the temporary directory was passed over: here it does
// not exist, which is no reason to call it RAM.
func TestDefaultDirNote(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	t.Setenv("TMPDIR", missing)
	dir, note := defaultDir()
	if dir == missing {
		t.Fatalf("chose %s, which does not exist", dir)
	}
	if !strings.Contains(note, missing+" is not a directory") || strings.Contains(note, missing+" is in RAM") {
		t.Fatalf("note %q does not say why %s was passed over", note, missing)
	}
}
