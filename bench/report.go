package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Result statuses.
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
)

// Result is one case: a strategy, a record size and a writer count. Only a
// case with Status StatusOK has numbers; a failed or skipped case has a
// Reason instead.
type Result struct {
	Strategy   string
	Kind       Kind
	RecordSize int
	Writers    int
	Status     string
	Reason     string

	// Runs is the number of measured runs, Records the records of each
	// (all writers together).
	Runs    int
	Records int64
	// NsPerOp is elapsed time / records, MBPerSec record bytes (10^6) per
	// second, RecordsPerSec records per second: median, min and max over
	// the runs.
	NsPerOp, MBPerSec, RecordsPerSec Stat
	// AllocsPerOp is the median over runs of heap allocations per record.
	AllocsPerOp float64
	// P50Ns, P99Ns and P999Ns are Write call latencies (0 when there were
	// too few samples: 100 for p99, 1000 for p99.9), from LatencySamples
	// calls, one in LatencyEvery on average.
	P50Ns, P99Ns, P999Ns int64
	LatencySamples       uint64
	LatencyEvery         int
	// Ceiling names the ceiling this case is compared with ("buffered" or
	// "direct"); PctOfCeiling is median MB/s as a percentage of it.
	Ceiling      string
	PctOfCeiling float64

	// Verified reports that every run's output was checked and exact.
	// Checked says what was checked at this record size. Lost is the most
	// records missing from one run's output, Dropped the most records a
	// strategy accepted and dropped in one run.
	Verified bool
	Checked  string
	Lost     uint64
	Dropped  uint64
}

// MarshalJSON writes the result with snake_case names; the measurements
// are present only for a case with status "ok".
func (r Result) MarshalJSON() ([]byte, error) {
	type speed struct {
		NsPerOp          float64 `json:"ns_per_op"`
		NsPerOpMin       float64 `json:"ns_per_op_min"`
		NsPerOpMax       float64 `json:"ns_per_op_max"`
		MBPerSec         float64 `json:"mb_per_s"`
		MBPerSecMin      float64 `json:"mb_per_s_min"`
		MBPerSecMax      float64 `json:"mb_per_s_max"`
		RecordsPerSec    float64 `json:"records_per_sec"`
		RecordsPerSecMin float64 `json:"records_per_sec_min"`
		RecordsPerSecMax float64 `json:"records_per_sec_max"`
		AllocsPerOp      float64 `json:"allocs_per_op"`
		P50Ns            *int64  `json:"p50_ns"`
		P99Ns            *int64  `json:"p99_ns"`
		P999Ns           *int64  `json:"p999_ns"`
		LatencySamples   uint64  `json:"latency_samples"`
		LatencyEvery     int     `json:"latency_every"`
		PctOfCeiling     float64 `json:"pct_of_ceiling"`
	}
	type result struct {
		Strategy      string `json:"strategy"`
		Regime        string `json:"regime"`
		RecordSize    int    `json:"record_size"`
		Writers       int    `json:"writers"`
		Status        string `json:"status"`
		Reason        string `json:"reason,omitempty"`
		Runs          int    `json:"runs,omitempty"`
		RecordsPerRun int64  `json:"records_per_run,omitempty"`
		*speed
		Ceiling  string `json:"ceiling"`
		Verified bool   `json:"verified"`
		Checked  string `json:"checked,omitempty"`
		Lost     uint64 `json:"lost"`
		Dropped  uint64 `json:"dropped"`
	}
	out := result{
		Strategy: r.Strategy, Regime: r.Kind.String(), RecordSize: r.RecordSize, Writers: r.Writers,
		Status: r.Status, Reason: r.Reason, Ceiling: r.Ceiling,
		Verified: r.Verified, Checked: r.Checked, Lost: r.Lost, Dropped: r.Dropped,
	}
	if r.Status == StatusOK {
		out.Runs, out.RecordsPerRun = r.Runs, r.Records
		opt := func(v int64) *int64 {
			if v == 0 {
				return nil
			}
			return &v
		}
		out.speed = &speed{
			NsPerOp: r.NsPerOp.Median, NsPerOpMin: r.NsPerOp.Min, NsPerOpMax: r.NsPerOp.Max,
			MBPerSec: r.MBPerSec.Median, MBPerSecMin: r.MBPerSec.Min, MBPerSecMax: r.MBPerSec.Max,
			RecordsPerSec: r.RecordsPerSec.Median, RecordsPerSecMin: r.RecordsPerSec.Min, RecordsPerSecMax: r.RecordsPerSec.Max,
			AllocsPerOp: r.AllocsPerOp,
			P50Ns:       opt(r.P50Ns), P99Ns: opt(r.P99Ns), P999Ns: opt(r.P999Ns),
			LatencySamples: r.LatencySamples, LatencyEvery: r.LatencyEvery,
			PctOfCeiling: r.PctOfCeiling,
		}
	}
	return json.Marshal(out)
}

// Report is what Run measured.
type Report struct {
	Started time.Time
	Elapsed time.Duration
	Machine Machine
	// Sizes, Writers and Strategies are the matrix; Runs, RunTime,
	// MaxBytes and Records the config it ran with.
	Sizes      []int
	Writers    []int
	Strategies []string
	Runs       int
	RunTime    time.Duration
	MaxBytes   int64
	Records    int64
	// Regime says what the numbers measure: page cache or sustained.
	Regime          string
	Ceiling         Ceiling
	Results         []Result
	Recommendations []Recommendation
	// Notes are remarks about the run (directory choice, skips).
	Notes []string
}

// Failed returns the results that failed.
func (r *Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Status == StatusFailed {
			out = append(out, res)
		}
	}
	return out
}

// report builds r.rep from the measured cases.
func (r *runner) report(ceil Ceiling) {
	rep := &Report{
		Started:  r.start,
		Machine:  r.machine,
		Sizes:    sortedCopy(r.cfg.Sizes),
		Writers:  sortedCopy(r.cfg.Writers),
		Runs:     r.cfg.Runs,
		RunTime:  r.cfg.RunTime,
		MaxBytes: r.cfg.MaxBytes,
		Records:  r.cfg.Records,
		Ceiling:  ceil,
		Notes:    r.notes,
	}
	seen := make(map[string]bool)
	for _, c := range r.cases {
		if !seen[c.st.Name] {
			seen[c.st.Name] = true
			rep.Strategies = append(rep.Strategies, c.st.Name)
			if c.skipped != "" {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s skipped: %s", c.st.Name, c.skipped))
			}
		}
		rep.Results = append(rep.Results, r.result(c, &ceil))
	}
	rep.Regime = regime(rep)
	rep.Recommendations = recommend(rep.Results)
	rep.Elapsed = time.Since(r.start)
	r.rep = rep
}

func sortedCopy(s []int) []int {
	out := append([]int(nil), s...)
	sort.Ints(out)
	return out
}

func (r *runner) result(c *caseState, ceil *Ceiling) Result {
	res := Result{
		Strategy: c.st.Name, Kind: c.st.Kind, RecordSize: c.size, Writers: c.writers,
		Checked: c.checked, Lost: c.lost, Dropped: c.dropped,
	}
	_, res.Ceiling = ceil.of(c.st.Kind)
	switch {
	case c.skipped != "":
		res.Status, res.Reason = StatusSkipped, c.skipped
		return res
	case c.failure != "":
		res.Status, res.Reason = StatusFailed, c.failure
		return res
	case len(c.samples) < r.cfg.Runs:
		res.Status, res.Reason = StatusFailed, fmt.Sprintf("%d of %d runs completed", len(c.samples), r.cfg.Runs)
		return res
	}
	res.Status, res.Verified = StatusOK, true
	res.Runs, res.Records = len(c.samples), c.records
	var ns, mb, rps, allocs []float64
	for _, s := range c.samples {
		sec := s.elapsed.Seconds()
		ns = append(ns, float64(s.elapsed)/float64(s.records))
		mb = append(mb, float64(s.records)*float64(c.size)/1e6/sec)
		rps = append(rps, float64(s.records)/sec)
		allocs = append(allocs, float64(s.mallocs)/float64(s.records))
	}
	res.NsPerOp, res.MBPerSec, res.RecordsPerSec = statOf(ns), statOf(mb), statOf(rps)
	res.AllocsPerOp = statOf(allocs).Median
	res.LatencySamples, res.LatencyEvery = c.hist.n, c.stride
	if c.hist.n > 0 {
		res.P50Ns = c.hist.quantile(0.5)
	}
	if c.hist.n >= 100 {
		res.P99Ns = c.hist.quantile(0.99)
	}
	if c.hist.n >= 1000 {
		res.P999Ns = c.hist.quantile(0.999)
	}
	if v, _ := ceil.of(c.st.Kind); v > 0 {
		res.PctOfCeiling = 100 * res.MBPerSec.Median / v
	}
	return res
}

// statOf returns the median, min and max of v (zero for no values).
func statOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[len(s)-1]}
}

// regime describes what the numbers of rep measure.
func regime(rep *Report) string {
	mb := float64(rep.MaxBytes) / 1e6
	var b strings.Builder
	thr := rep.Machine.DirtyBackgroundBytes
	switch {
	case thr > 0 && rep.MaxBytes < thr:
		fmt.Fprintf(&b, "page cache. Each run writes at most %.0f MB of records, under the %.1f GB of dirty pages at which the kernel starts writing back (RAM %.1f GiB), "+
			"so buffered strategies are measured into the page cache, not at the disk's sustained rate.",
			mb, float64(thr)/1e9, float64(rep.Machine.MemoryBytes)/(1<<30))
	case thr > 0:
		fmt.Fprintf(&b, "sustained. Runs write up to %.0f MB, more than the %.1f GB of dirty pages at which the kernel starts writing back: buffered strategies may be throttled to the disk's rate.", mb, float64(thr)/1e9)
	default:
		fmt.Fprintf(&b, "page cache (probably). Each run writes at most %.0f MB of records; the kernel's writeback threshold is unknown here.", mb)
	}
	b.WriteString(" O_DIRECT strategies (direct, ring-direct) and the O_DIRECT ceiling reach the device; wal-batch is durable (fdatasync; its clock stops after the final Sync).")
	return b.String()
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	type config struct {
		Sizes      []int    `json:"sizes"`
		Writers    []int    `json:"writers"`
		Strategies []string `json:"strategies"`
		Runs       int      `json:"runs"`
		RunTimeMs  float64  `json:"run_time_ms"`
		MaxBytes   int64    `json:"max_bytes_per_run"`
		Records    int64    `json:"records_per_run,omitempty"`
	}
	out := struct {
		Tool            string           `json:"tool"`
		Started         time.Time        `json:"started"`
		ElapsedSeconds  float64          `json:"elapsed_seconds"`
		Units           string           `json:"units"`
		Timing          string           `json:"timing"`
		Machine         Machine          `json:"machine"`
		Config          config           `json:"config"`
		Regime          string           `json:"regime"`
		Ceiling         Ceiling          `json:"ceiling"`
		Results         []Result         `json:"results"`
		Recommendations []Recommendation `json:"recommendations"`
		Notes           []string         `json:"notes,omitempty"`
	}{
		Tool:           "appendlog bench",
		Started:        r.Started,
		ElapsedSeconds: math.Round(r.Elapsed.Seconds()*1000) / 1000,
		Units:          unitsText,
		Timing:         timingText,
		Machine:        r.Machine,
		Config: config{
			Sizes: r.Sizes, Writers: r.Writers, Strategies: r.Strategies, Runs: r.Runs,
			RunTimeMs: float64(r.RunTime) / 1e6, MaxBytes: r.MaxBytes, Records: r.Records,
		},
		Regime:          r.Regime,
		Ceiling:         r.Ceiling,
		Results:         r.Results,
		Recommendations: r.Recommendations,
		Notes:           r.Notes,
	}
	if out.Results == nil {
		out.Results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// Texts shared by the table and the JSON.
const (
	unitsText = "MB = 10^6 bytes of records (wal frame headers and O_DIRECT padding not counted); " +
		"ns/op = elapsed time / records of all writers together (aggregate cost, not a call's latency); " +
		"allocs/op = heap allocations in the timed region / records; " +
		"p50/p99/p99.9 = latency of one Write call, one call in N timed at random gaps, including one clock read (see machine), upper edge of a histogram bucket (at most 12.5% high), - = too few samples; " +
		"min and max are over the measured runs, the main figure is their median"
	timingText = "timed from releasing the writer goroutines to every record handed on: the last Write and the final Flush " +
		"(wal-batch: Sync) returned; Close runs after the clock stops; every run's output is verified before it counts"
)
