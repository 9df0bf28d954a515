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

// Recommendation is the advice for one record size and writer count.
type Recommendation struct {
	RecordSize int    `json:"record_size"`
	Writers    int    `json:"writers"`
	Strategy   string `json:"strategy,omitempty"`
	// Speedup is the strategy's median MB/s over that of "write" (one
	// write per record), or 0 if write did not run.
	Speedup float64 `json:"speedup_vs_write,omitempty"`
	// PctOfCeiling and Ceiling as in Result.
	PctOfCeiling float64 `json:"pct_of_ceiling,omitempty"`
	Ceiling      string  `json:"ceiling,omitempty"`
	// Tied lists strategies whose fastest run reached the recommended
	// strategy's median: within run-to-run spread of it.
	Tied []string `json:"tied,omitempty"`
	// ShortTail names a strategy whose p99.9 Write latency is under half
	// the recommended one's while it keeps at least half its throughput:
	// the better choice where the caller must not stall (logging).
	ShortTail string `json:"short_tail,omitempty"`
	// Text is the advice in one sentence.
	Text string `json:"text"`
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

// recommend picks, for every record size and writer count, the verified
// strategy with the highest median MB/s.
// shortTail returns the verified strategy with the lowest p99.9 latency
// among those keeping at least half of best's median throughput, if its
// p99.9 is under half of best's; else nil.
func shortTail(group []Result, best *Result) *Result {
	if best.P999Ns <= 0 {
		return nil
	}
	var t *Result
	for i := range group {
		r := &group[i]
		if r.Status != StatusOK || r == best || r.P999Ns <= 0 || r.MBPerSec.Median < best.MBPerSec.Median/2 {
			continue
		}
		if t == nil || r.P999Ns < t.P999Ns {
			t = r
		}
	}
	if t == nil || 2*t.P999Ns >= best.P999Ns {
		return nil
	}
	return t
}

func recommend(results []Result) []Recommendation {
	type key struct{ size, writers int }
	groups := make(map[key][]Result)
	var keys []key
	for _, r := range results {
		k := key{r.RecordSize, r.Writers}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].size != keys[j].size {
			return keys[i].size < keys[j].size
		}
		return keys[i].writers < keys[j].writers
	})
	var out []Recommendation
	for _, k := range keys {
		rec := Recommendation{RecordSize: k.size, Writers: k.writers}
		where := fmt.Sprintf("%s records, %d %s", formatSize(k.size), k.writers, plural(k.writers, "writer", "writers"))
		var best, base *Result
		for i := range groups[k] {
			r := &groups[k][i]
			if r.Status != StatusOK {
				continue
			}
			if best == nil || r.MBPerSec.Median > best.MBPerSec.Median {
				best = r
			}
			if r.Strategy == "write" {
				base = r
			}
		}
		if best == nil {
			rec.Text = where + ": no strategy ran and verified"
			out = append(out, rec)
			continue
		}
		rec.Strategy, rec.PctOfCeiling, rec.Ceiling = best.Strategy, best.PctOfCeiling, best.Ceiling
		var parts []string
		if base != nil && base != best && base.MBPerSec.Median > 0 {
			rec.Speedup = best.MBPerSec.Median / base.MBPerSec.Median
			parts = append(parts, fmt.Sprintf("%s faster than one write per record", formatRatio(rec.Speedup)))
		} else if base == best {
			parts = append(parts, "nothing measured beats one write per record here")
		}
		if best.PctOfCeiling > 0 {
			parts = append(parts, fmt.Sprintf("%s of the %s ceiling", formatPct(best.PctOfCeiling), ceilingName(best.Ceiling)))
		}
		for _, r := range groups[k] {
			if r.Status == StatusOK && r.Strategy != best.Strategy && r.MBPerSec.Max >= best.MBPerSec.Median {
				rec.Tied = append(rec.Tied, r.Strategy)
			}
		}
		rec.Text = fmt.Sprintf("%s: use %s", where, best.Strategy)
		if len(parts) > 0 {
			rec.Text += ": " + strings.Join(parts, ", ")
		}
		var notes []string
		if len(rec.Tied) > 0 {
			notes = append(notes, fmt.Sprintf("%s within noise: best run reached its median", strings.Join(rec.Tied, ", ")))
		}
		if best.MBPerSec.Min > 0 && best.MBPerSec.Max > 1.5*best.MBPerSec.Min {
			notes = append(notes, fmt.Sprintf("its runs ranged %s–%s MB/s", num(best.MBPerSec.Min), num(best.MBPerSec.Max)))
		}
		if len(notes) > 0 {
			rec.Text += " (" + strings.Join(notes, "; ") + ")"
		}
		if t := shortTail(groups[k], best); t != nil {
			rec.ShortTail = t.Strategy
			rec.Text += fmt.Sprintf("; where a Write must not stall, use %s: p99.9 %s against %s, at %s of the throughput",
				t.Strategy, formatNs(t.P999Ns), formatNs(best.P999Ns), formatPct(t.MBPerSec.Median/best.MBPerSec.Median*100))
		}
		out = append(out, rec)
	}
	return out
}

// formatPct writes a percentage with two significant digits below 10%.
func formatPct(p float64) string {
	switch {
	case p >= 10:
		return fmt.Sprintf("%.0f%%", p)
	case p >= 1:
		return fmt.Sprintf("%.1f%%", p)
	default:
		return fmt.Sprintf("%.2f%%", p)
	}
}

func ceilingName(c string) string {
	if c == "direct" {
		return "O_DIRECT"
	}
	return "page-cache"
}

// formatRatio writes a speedup as "14×" or "1.3×".
func formatRatio(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.1f×", x)
}

// formatSize writes a byte count as "1 B", "128 B", "4 KiB", "1 MiB".
func formatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
