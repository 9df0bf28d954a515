package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/bench"
)

type benchFlags struct {
	dir        string
	quick      bool
	full       bool
	sizes      string
	writers    string
	strategies string
	runs       int
	runTime    time.Duration
	maxBytes   int64
	records    int64
	jsonPath   string
	chartPath  string
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Measure every write strategy on this machine, verifying every byte written",
		Long: `bench writes generated records through each write strategy, checks what
reached the file, and prints throughput, latency and allocations next to a
ceiling (4 MiB sequential writes, buffered and O_DIRECT) measured on the same
directory in the same run, with a recommendation per record size and writer
count.

Strategies:
` + strategyList() + `
Every case (strategy, record size, writer count) runs once to warm up and
calibrate, then --runs times (at least 3); the table shows the median and
the min–max range. The clock runs from releasing the writer goroutines to
the moment every record was handed on (the final Flush; wal-batch: Sync);
Close is not timed. After every run the output is read back and checked:
record count, checksums, no torn or foreign bytes, each writer's records in
order. Records of 27 bytes and more carry writer, counter, filler and a
check, and every byte is checked; smaller records are one tag byte per
record (writer and counter modulo 255/writers), so at those sizes order is
checked modulo that number and there is no checksum. A case that fails verification is reported as
FAILED, never as a speed, and bench exits with status 1.

` + _sizeHelp + `

Units: MB = 10^6 bytes of records. ns/op = elapsed / records of all writers
together. Latency percentiles time one Write call in every N (N chosen so
timing costs at most ~1%) into a histogram accurate to 12.5%.

Presets (--sizes, --writers, --runs, --run-time and --max-bytes override
them):
  --quick    128 B and 4 KiB records × 1, 8, 64 writers, 3 runs of ~50 ms
             (at most 64 MiB each): under a minute on 2 cores
  default    1 B, 128 B, 1 KiB, 4 KiB, 8 KiB records × 1, 8, 64 writers,
             3 runs of ~100 ms (at most 128 MiB): about 2.5 minutes on 2 cores
  --full     the same matrix, 5 runs of ~400 ms (at most 512 MiB): about
             10 minutes on 2 cores

Without --dir, bench writes in a new directory under the system's temporary
directory (or /var/tmp when that is in RAM); with --dir, in a new directory
inside DIR. Either way it removes what it wrote.

Output: the table on stdout; a progress bar on stderr when it is a terminal;
with --json FILE a JSON report (machine, ceiling, results, recommendations);
with --chart FILE a chart of throughput per strategy and record size with
the ceilings as lines (.svg or .png).

Exit status: 0 when every case that ran verified, 1 when one failed (or the
run could not be completed), 2 on usage errors.`,
		Example: `  appendlog bench --quick
  appendlog bench --sizes 128,4KiB --writers 1,8 --strategies write,ring,wal-batch --json bench.json --chart bench.svg
  appendlog bench --full --dir /mnt/nvme --json full.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "directory to write in (a new directory is created in it and removed afterwards; default: a temporary directory on disk)")
	fl.BoolVar(&f.quick, "quick", false, "run the quick matrix (under a minute)")
	fl.BoolVar(&f.full, "full", false, "run the full matrix with 5 longer runs per case")
	fl.StringVar(&f.sizes, "sizes", "", "comma-separated record sizes, e.g. 1,128,1KiB,4KiB,8KiB (default: the preset's)")
	fl.StringVar(&f.writers, "writers", "", "comma-separated writer goroutine counts, e.g. 1,8,64 (default: the preset's)")
	fl.StringVar(&f.strategies, "strategies", "", "comma-separated strategy names, or all (default: all)")
	fl.IntVar(&f.runs, "runs", 0, fmt.Sprintf("measured runs per case, at least %d (default: the preset's)", bench.MinRuns))
	fl.DurationVar(&f.runTime, "run-time", 0, "target duration of one measured run (default: the preset's)")
	sizeVar(fl, &f.maxBytes, "max-bytes", 0, "most record bytes one run writes, e.g. 256MiB (default: the preset's)")
	fl.StringVar(&f.jsonPath, "json", "", "write the report as JSON to `FILE`")
	fl.StringVar(&f.chartPath, "chart", "", "draw the throughput chart to `FILE` (.svg or .png)")
	fl.Int64Var(&f.records, "records", 0, "records per run, all writers together, skipping calibration (for tests)")
	_ = fl.MarkHidden("records")
	return cmd
}

// strategyList returns one line per strategy for the help text.
func strategyList() string {
	var b strings.Builder
	for _, s := range bench.Strategies() {
		fmt.Fprintf(&b, "  %-13s %s\n", s.Name, s.Doc)
	}
	return b.String()
}

// benchConfig validates the flags and returns the config they ask for.
func benchConfig(f *benchFlags) (bench.Config, error) {
	var cfg bench.Config
	switch {
	case f.quick && f.full:
		return cfg, usagef("--quick and --full exclude each other")
	case f.quick:
		cfg = bench.QuickConfig()
	case f.full:
		cfg = bench.FullConfig()
	default:
		cfg = bench.DefaultConfig()
	}
	cfg.Dir = f.dir
	if f.sizes != "" {
		var err error
		if cfg.Sizes, err = parseList("--sizes", f.sizes, parseSizeInt); err != nil {
			return cfg, err
		}
	}
	if f.writers != "" {
		var err error
		if cfg.Writers, err = parseList("--writers", f.writers, strconv.Atoi); err != nil {
			return cfg, err
		}
	}
	if s := strings.TrimSpace(f.strategies); s != "" && s != "all" {
		cfg.Strategies = nil
		for _, name := range strings.Split(s, ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.Strategies = append(cfg.Strategies, name)
			}
		}
		if len(cfg.Strategies) == 0 {
			return cfg, usagef("--strategies %q names no strategy", f.strategies)
		}
	}
	if f.runs != 0 {
		cfg.Runs = f.runs
	}
	if f.runTime != 0 {
		if f.runTime < 0 {
			return cfg, usagef("--run-time must be positive, got %v", f.runTime)
		}
		cfg.RunTime = f.runTime
	}
	if f.maxBytes != 0 {
		cfg.MaxBytes = f.maxBytes
	}
	if f.records < 0 {
		return cfg, usagef("--records must be positive, got %d", f.records)
	}
	cfg.Records = f.records
	if f.chartPath != "" {
		if ext := strings.ToLower(filepath.Ext(f.chartPath)); ext != ".svg" && ext != ".png" {
			return cfg, usagef("--chart %s: the file name must end in .svg or .png", f.chartPath)
		}
	}
	if f.dir != "" {
		if fi, err := os.Stat(f.dir); errors.Is(err, os.ErrNotExist) {
			return cfg, usagef("--dir: %s: no such directory", f.dir)
		} else if err != nil {
			return cfg, usagef("--dir: %v", err)
		} else if !fi.IsDir() {
			return cfg, usagef("--dir: %s: not a directory", f.dir)
		}
	}
	// A report that cannot be written is refused now, not after the run.
	for _, out := range []struct{ flag, path string }{{"--json", f.jsonPath}, {"--chart", f.chartPath}} {
		if out.path == "" {
			continue
		}
		parent := filepath.Dir(out.path)
		if fi, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
			return cfg, usagef("%s %s: %s: no such directory", out.flag, out.path, parent)
		} else if err != nil {
			return cfg, usagef("%s %s: %v", out.flag, out.path, err)
		} else if !fi.IsDir() {
			return cfg, usagef("%s %s: %s is not a directory", out.flag, out.path, parent)
		}
		if fi, err := os.Stat(out.path); err == nil && fi.IsDir() {
			return cfg, usagef("%s %s: a directory; want the name of a file to write", out.flag, out.path)
		}
	}
	if f.jsonPath != "" && f.chartPath != "" && filepath.Clean(f.jsonPath) == filepath.Clean(f.chartPath) {
		return cfg, usagef("--json and --chart both name %s: the chart would overwrite the report", f.jsonPath)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, &usageError{errors.Unwrap(err)}
	}
	return cfg, nil
}

// parseList parses a comma-separated list of values.
func parseList(flag, s string, parse func(string) (int, error)) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := parse(part)
		var ne *strconv.NumError
		switch {
		case errors.As(err, &ne):
			return nil, usagef("%s: %q is not a number: %v", flag, part, ne.Err)
		case err != nil:
			return nil, usagef("%s: %v", flag, err)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, usagef("%s %q lists nothing", flag, s)
	}
	return out, nil
}

func runBench(cmd *cobra.Command, f *benchFlags) error {
	for _, name := range []string{"dir", "json", "chart"} {
		// An unset variable in a script: the run would go on without the
		// report or chart asked for, or in the default directory.
		if cmd.Flags().Changed(name) && cmd.Flags().Lookup(name).Value.String() == "" {
			return usagef("--%s: empty name", name)
		}
	}
	cfg, err := benchConfig(f)
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		cfg.Progress = func(p bench.Progress) {
			if bar == nil {
				bar = progressbar.NewOptions(p.Total,
					progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("bench"),
					progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(30),
					progressbar.OptionSetElapsedTime(true),
					progressbar.OptionSetPredictTime(true),
					progressbar.OptionThrottle(_progressTick),
					progressbar.OptionClearOnFinish(),
				)
			}
			bar.Describe(p.Case)
			_ = bar.Set(p.Done)
		}
	}
	rep, err := bench.Run(ctx, cfg)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; removed the files written so far")
		}
		return err
	}

	var errs []error
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		return err
	}
	if _, err := io.Copy(stdout, &table); err != nil {
		return err
	}
	if f.jsonPath != "" {
		if err := writeFileWith(f.jsonPath, rep.WriteJSON); err != nil {
			errs = append(errs, fmt.Errorf("write JSON report: %w", err))
		} else {
			fmt.Fprintf(stderr, "appendlog bench: wrote the JSON report to %s\n", f.jsonPath)
		}
	}
	if f.chartPath != "" {
		if err := rep.WriteChart(f.chartPath); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(stderr, "appendlog bench: drew the chart to %s\n", f.chartPath)
		}
	}
	if failed := rep.Failed(); len(failed) > 0 {
		var names []string
		for _, r := range failed {
			names = append(names, fmt.Sprintf("%s (%d B, %d writers)", r.Strategy, r.RecordSize, r.Writers))
		}
		errs = append(errs, fmt.Errorf("%d %s failed: %s", len(failed), plural(len(failed), "case", "cases"), strings.Join(names, ", ")))
	}
	if rep.Ceiling.Failure != "" {
		errs = append(errs, errors.New(rep.Ceiling.Failure))
	}
	return errors.Join(errs...)
}

// writeFileWith creates the file at path and writes it with write.
func writeFileWith(path string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
