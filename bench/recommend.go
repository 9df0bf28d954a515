package bench

import (
	"fmt"
	"sort"
	"strings"
)

// Recommendation is the advice for one record size and writer count.
type Recommendation struct {
	RecordSize int    `json:"record_size"`
	Writers    int    `json:"writers"`
	Strategy   string `json:"strategy,omitempty"`
	// Use is how a program gets Strategy: the Strategy's Use.
	Use string `json:"use,omitempty"`
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
	// Reference names a strategy measured only as a reference (no Use,
	// or one the library does not recommend: Strategy.Avoid) whose slowest
	// run beat the recommended strategy's fastest: faster beyond noise, but
	// not something the library offers or recommends.
	Reference string `json:"faster_reference,omitempty"`
	// Text is the advice in one sentence.
	Text string `json:"text"`
}

// recommend picks, for every record size and writer count, the verified
// strategy with the highest median MB/s among those a program can use and
// the library recommends (a Strategy with a Use and no Avoid), and writes the advice: the call to make, its
// speedup over one write per record, its share of the ceiling, the
// strategies tied with it within run-to-run spread, a strategy with a much
// shorter tail when shortTail finds one, and a reference strategy that was
// faster beyond noise, if any.
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
	// uses holds the call of each strategy the library recommends; avoid
	// says why it does not recommend one a program can get.
	uses, avoid := make(map[string]string), make(map[string]string)
	for _, st := range Strategies() {
		if st.Avoid == "" {
			uses[st.Name] = st.Use
		}
		avoid[st.Name] = st.Avoid
	}
	var out []Recommendation
	for _, k := range keys {
		rec := Recommendation{RecordSize: k.size, Writers: k.writers}
		where := fmt.Sprintf("%s records, %d %s", formatSize(k.size), k.writers, plural(k.writers, "writer", "writers"))
		var best, base, fastest *Result
		for i := range groups[k] {
			r := &groups[k][i]
			if r.Status != StatusOK {
				continue
			}
			if r.Strategy == "write" {
				base = r
			}
			if fastest == nil || r.MBPerSec.Median > fastest.MBPerSec.Median {
				fastest = r
			}
			if uses[r.Strategy] != "" && (best == nil || r.MBPerSec.Median > best.MBPerSec.Median) {
				best = r
			}
		}
		if best == nil {
			rec.Text = where + ": no strategy ran and verified"
			if fastest != nil {
				rec.Text = where + ": no strategy the library offers ran and verified"
			}
			out = append(out, rec)
			continue
		}
		rec.Strategy, rec.Use, rec.PctOfCeiling, rec.Ceiling = best.Strategy, uses[best.Strategy], best.PctOfCeiling, best.Ceiling
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
			if r.Status == StatusOK && uses[r.Strategy] != "" && r.Strategy != best.Strategy && r.MBPerSec.Max >= best.MBPerSec.Median {
				rec.Tied = append(rec.Tied, r.Strategy)
			}
		}
		rec.Text = fmt.Sprintf("%s: use %s, %s", where, best.Strategy, rec.Use)
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
		if t := shortTail(groups[k], best, uses); t != nil {
			rec.ShortTail = t.Strategy
			rec.Text += fmt.Sprintf("; where a Write must not stall, use %s, %s: p99.9 %s against %s, at %s of the throughput",
				t.Strategy, uses[t.Strategy], formatNs(t.P999Ns), formatNs(best.P999Ns), formatPct(t.MBPerSec.Median/best.MBPerSec.Median*100))
		}
		if fastest != best && uses[fastest.Strategy] == "" && fastest.MBPerSec.Min > best.MBPerSec.Max {
			rec.Reference = fastest.Strategy
			ratio := formatRatio(fastest.MBPerSec.Median / best.MBPerSec.Median)
			if a := avoid[fastest.Strategy]; a != "" {
				rec.Text += fmt.Sprintf("; %s reached %s that throughput, but the library does not recommend it: %s", fastest.Strategy, ratio, a)
			} else {
				rec.Text += fmt.Sprintf("; the %s reference reached %s that throughput, but it is hand-written system calls the library does not offer", fastest.Strategy, ratio)
			}
		}
		out = append(out, rec)
	}
	return out
}

// shortTail returns the verified strategy with a Use (in uses) with the
// lowest p99.9 latency among those keeping at least half of best's median
// throughput, if its p99.9 is under half of best's; else nil.
func shortTail(group []Result, best *Result, uses map[string]string) *Result {
	if best.P999Ns <= 0 {
		return nil
	}
	var t *Result
	for i := range group {
		r := &group[i]
		if r.Status != StatusOK || r == best || uses[r.Strategy] == "" || r.P999Ns <= 0 || r.MBPerSec.Median < best.MBPerSec.Median/2 {
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
