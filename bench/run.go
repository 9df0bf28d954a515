package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"
)

// Calibration and sampling bounds.
const (
	// _minRecords is the fewest records of a calibrated run.
	_minRecords = 1000
	// _warmupStart is the record count of the first warm-up run per
	// writer, before it grows.
	_warmupStart = 256
	// _minStride and _maxStride bound N in "one Write call in N is timed".
	_minStride = 16
	_maxStride = 1 << 12
)

// Run measures the strategies of cfg on every record size and writer count
// of cfg, and the ceiling, and returns the report. A case that fails (its
// output does not verify, a write fails) is reported as failed in its
// Result; a strategy that cannot run here is reported as skipped with the
// reason. Run returns an error only when it cannot run at all: a bad
// config, a directory it cannot use, or ctx done. It removes every file it
// created.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	strategies, err := selectStrategies(cfg.Strategies)
	if err != nil {
		return nil, err
	}
	return runWith(ctx, cfg, strategies)
}

// runWith is Run with the strategies given; cfg has its defaults.
func runWith(ctx context.Context, cfg Config, strategies []Strategy) (rep *Report, err error) {
	cfg = cfg.withDefaults()
	parent := cfg.Dir
	var dirNote string
	if parent == "" {
		parent, dirNote = defaultDir()
	}
	if fi, err := os.Stat(parent); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("bench: %s is not a directory", parent)
	}
	base, err := os.MkdirTemp(parent, "appendlog-bench-*")
	if err != nil {
		return nil, fmt.Errorf("bench: create work directory: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(base); rerr != nil && err == nil {
			err = fmt.Errorf("bench: remove work directory: %w", rerr)
		}
	}()

	r := &runner{cfg: cfg, base: base, start: time.Now()}
	r.machine = describeMachine(base)
	if dirNote != "" {
		r.notes = append(r.notes, dirNote)
	}
	r.clockNs = clockCost()
	r.machine.ClockReadNs = r.clockNs

	cases := r.plan(strategies)
	ceil := r.newCeiling(probeDirect(base))
	r.progress.Total = ceil.steps(cfg.Runs)
	for _, c := range cases {
		if c.skipped == "" {
			r.progress.Total += 1 + cfg.Runs
		}
	}

	if err := r.ceilingPass(ctx, ceil, true, "before the cases"); err != nil {
		return nil, err
	}
	if err := r.measureCases(ctx, cases); err != nil {
		return nil, err
	}
	if err := r.ceilingPass(ctx, ceil, false, "after the cases"); err != nil {
		return nil, err
	}
	if r.cfg.Progress != nil {
		r.progress.Case = "done"
		r.cfg.Progress(r.progress)
	}
	r.report(ceil.result())
	return r.rep, nil
}

// runner is the state of one Run.
type runner struct {
	cfg      Config
	base     string // work directory, removed at the end
	start    time.Time
	machine  Machine
	clockNs  float64 // cost of reading the clock once
	progress Progress
	runSeq   int // names run directories
	notes    []string
	cases    []*caseState
	rep      *Report
}

// caseState is one case being measured.
type caseState struct {
	st      Strategy
	size    int
	writers int
	skipped string // why the case does not run, or ""
	failure string // why it failed, or ""
	records int64  // records of each measured run
	stride  int    // every stride-th Write call is timed
	samples []runSample
	hist    histogram
	dropped uint64
	lost    uint64
	checked string // what the verifier checked
}

// runSample is one measured run.
type runSample struct {
	elapsed time.Duration
	records int64
	mallocs uint64
}

func (c *caseState) name() string {
	return fmt.Sprintf("%s %s × %d %s", c.st.Name, formatSize(c.size), c.writers, plural(c.writers, "writer", "writers"))
}

// plan returns the cases of the matrix in report order, with the skipped
// ones marked.
func (r *runner) plan(strategies []Strategy) []*caseState {
	skip := make(map[string]string)
	for _, st := range strategies {
		if st.probe != nil {
			if err := st.probe(r.base); err != nil {
				skip[st.Name] = err.Error()
			}
		}
	}
	sizes := append([]int(nil), r.cfg.Sizes...)
	sort.Ints(sizes)
	writers := append([]int(nil), r.cfg.Writers...)
	sort.Ints(writers)
	for _, size := range sizes {
		for _, w := range writers {
			for _, st := range strategies {
				r.cases = append(r.cases, &caseState{st: st, size: size, writers: w, skipped: skip[st.Name]})
			}
		}
	}
	return r.cases
}

func (r *runner) step(what string) {
	if r.cfg.Progress != nil {
		r.progress.Case = what
		r.cfg.Progress(r.progress)
	}
	r.progress.Done++
}

// measureCases runs the cases one (size, writers) group at a time: every
// strategy's warm-up, then measured run 1 of every strategy, run 2 of
// every strategy, and so on, so that drift on a shared machine spreads over
// all strategies instead of favouring the ones measured first.
func (r *runner) measureCases(ctx context.Context, cases []*caseState) error {
	for i := 0; i < len(cases); {
		j := i
		for j < len(cases) && cases[j].size == cases[i].size && cases[j].writers == cases[i].writers {
			j++
		}
		group := cases[i:j]
		i = j
		for _, c := range group {
			if c.skipped != "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			r.step(c.name() + ", warm-up")
			r.warmUp(ctx, c)
		}
		for run := 1; run <= r.cfg.Runs; run++ {
			for _, c := range group {
				if c.skipped != "" {
					continue
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				r.step(fmt.Sprintf("%s, run %d/%d", c.name(), run, r.cfg.Runs))
				if c.failure != "" {
					continue
				}
				s, h, err := r.runOnce(ctx, c, c.records, c.stride)
				if err != nil {
					c.failure = err.Error()
					continue
				}
				c.samples = append(c.samples, s)
				c.hist.merge(h)
			}
		}
	}
	return ctx.Err()
}

// maxRecords returns the most records a run of c may write.
func (r *runner) maxRecords(c *caseState) int64 {
	n := r.cfg.MaxBytes / int64(c.size)
	n = min(n, int64(c.writers)*int64(_maxCounter))
	return max(n, int64(c.writers))
}

// warmUp runs c unmeasured until a run lasts long enough to calibrate the
// record count of the measured runs and the latency sampling stride. The
// cost per record used is the lowest of the warm-up runs that lasted long
// enough to trust (at least RunTime/50 and 1 ms), so that one stall of the
// device during the warm-up does not shrink every measured run to a size
// where the next stall dominates. Warm-up outputs are verified like any
// other.
func (r *runner) warmUp(ctx context.Context, c *caseState) {
	limit := r.maxRecords(c)
	n := min(limit, max(int64(c.writers)*_warmupStart/4, _warmupStart))
	if r.cfg.Records > 0 {
		n = r.cfg.Records
	}
	trust := max(time.Millisecond, r.cfg.RunTime/50)
	best, last := math.Inf(1), 0.0
	for {
		s, _, err := r.runOnce(ctx, c, n, _maxStride)
		if err != nil {
			c.failure = err.Error()
			return
		}
		perOp := max(float64(s.elapsed)/float64(n), 1)
		last = perOp
		if s.elapsed >= trust {
			best = min(best, perOp)
		}
		if r.cfg.Records == 0 && s.elapsed < r.cfg.RunTime/10 && n < limit && ctx.Err() == nil {
			// Too short to trust: aim at a fifth of the run time.
			next := int64(float64(r.cfg.RunTime/5) / perOp)
			n = min(limit, max(2*n, min(next, 100*n)))
			continue
		}
		break
	}
	if math.IsInf(best, 1) {
		best = last // no run lasted long enough to trust: the last one is all there is
	}
	if r.cfg.Records > 0 {
		c.records = r.cfg.Records
	} else {
		want := int64(float64(r.cfg.RunTime) / best)
		c.records = min(limit, max(want, min(_minRecords, limit), int64(c.writers)))
	}
	c.stride = samplingStride(r.clockNs, best)
}

// samplingStride returns N for "time every Nth call": the smallest power of
// two that keeps the two clock reads of a timed call under 1% of the cost of
// a record, within [_minStride, _maxStride].
func samplingStride(clockNs, perOpNs float64) int {
	s := _minStride
	for s < _maxStride && 2*clockNs*100 > perOpNs*float64(s) {
		s *= 2
	}
	return s
}

// clockCost measures what one time.Now call costs, in ns.
func clockCost() float64 {
	const n = 1 << 14
	best := time.Duration(1 << 62)
	for range 5 {
		t0 := time.Now()
		for range n {
			_ = time.Now()
		}
		best = min(best, time.Since(t0))
	}
	return float64(best) / n
}

// runOnce runs c once with n records and verifies its output. It returns
// the sample and the latency histogram, or an error saying why the run
// failed (open, write, flush, close or verification).
func (r *runner) runOnce(ctx context.Context, c *caseState, n int64, stride int) (runSample, *histogram, error) {
	r.runSeq++
	dir := filepath.Join(r.base, fmt.Sprintf("run-%05d", r.runSeq))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return runSample{}, nil, fmt.Errorf("create run directory: %w", err)
	}
	defer os.RemoveAll(dir)

	cd, err := newCodec(c.size, c.writers)
	if err != nil {
		return runSample{}, nil, err
	}
	counts := split(n, c.writers)
	s, err := c.st.open(ctx, dir, runCase{size: c.size, writers: c.writers})
	if err != nil {
		return runSample{}, nil, fmt.Errorf("open: %w", err)
	}
	prods := make([]producer, c.writers)
	recs := make([][]byte, c.writers)
	hists := make([]histogram, c.writers)
	errs := make([]error, c.writers)
	for w := range prods {
		if prods[w], err = s.producer(w); err != nil {
			return runSample{}, nil, errors.Join(fmt.Errorf("writer %d: %w", w, err), s.close())
		}
		recs[w] = cd.template(w)
	}
	seed := uint64(r.runSeq)

	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[w] = produce(prods[w], cd, recs[w], w, counts[w], stride, seed, &hists[w])
		}()
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	close(start)
	wg.Wait()
	ferr := s.finish(ctx)
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&m1)
	cerr := s.close()

	c.dropped = max(c.dropped, s.dropped())
	if ferr != nil {
		errs = append(errs, fmt.Errorf("finish: %w", ferr))
	}
	if cerr != nil {
		errs = append(errs, fmt.Errorf("close: %w", cerr))
	}
	if err := firstError(errs); err != nil {
		return runSample{}, nil, err
	}
	out := s.output()
	var v *Verification
	if out.wal {
		v, err = VerifyWAL(ctx, out.path, c.size, counts)
	} else {
		v, err = VerifyFile(out.path, c.size, counts)
	}
	if err != nil {
		return runSample{}, nil, err
	}
	c.checked = v.Checked
	c.lost = max(c.lost, v.Lost)
	if err := v.Err(); err != nil {
		return runSample{}, nil, fmt.Errorf("verification failed: %w", err)
	}
	var h histogram
	for i := range hists {
		h.merge(&hists[i])
	}
	return runSample{elapsed: elapsed, records: n, mallocs: m1.Mallocs - m0.Mallocs}, &h, nil
}

// produce is one writer goroutine's loop: n records through p, one call in
// every stride on average timed into h. The gaps between timed calls are
// random (uniform in [1, 2*stride-1]) so that sampling cannot lock onto a
// periodic event, such as a buffer flush every 512 records or a new page
// every 32, and report it as the typical call.
// A timed call's latency includes the cost of one clock read: a call
// faster than that cannot be told apart from a free one.
func produce(p producer, cd *codec, rec []byte, w int, n uint64, stride int, seed uint64, h *histogram) error {
	rng := seed*0x9e3779b97f4a7c15 + uint64(w)*0xbf58476d1ce4e5b9 | 1
	span := uint64(2*stride - 1)
	next := 1 + rng%span
	for i := uint64(0); i < n; i++ {
		cd.encode(rec, w, i)
		var err error
		if next--; next == 0 {
			t := time.Now()
			err = p.write(rec)
			h.record(time.Since(t))
			rng ^= rng << 13 // xorshift64
			rng ^= rng >> 7
			rng ^= rng << 17
			next = 1 + rng%span
		} else {
			err = p.write(rec)
		}
		if err != nil {
			return fmt.Errorf("writer %d, record %d: %w", w, i, err)
		}
	}
	if err := p.done(); err != nil {
		return fmt.Errorf("writer %d, final batch: %w", w, err)
	}
	return nil
}

// firstError returns the first non-nil error of errs, saying how many more
// there were, or nil. A failing run's writers often fail alike (a full
// disk): one line with the first error reads better than one per writer.
func firstError(errs []error) error {
	var first error
	more := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		default:
			more++
		}
	}
	if more > 0 {
		return fmt.Errorf("%w (and %d more %s)", first, more, plural(more, "error", "errors"))
	}
	return first
}

// split divides n records among w writers as evenly as possible.
func split(n int64, w int) []uint64 {
	out := make([]uint64, w)
	for i := range out {
		out[i] = uint64(n / int64(w))
		if int64(i) < n%int64(w) {
			out[i]++
		}
	}
	return out
}
