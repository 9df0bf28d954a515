package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/appendlog/appendlog/internal/ceiling"
)

// Ceiling is the throughput of large sequential writes on the benchmark's
// directory, measured in the same run: the most a strategy can hope for.
type Ceiling struct {
	// WriteSize is the size of each write, Bytes the bytes of each run.
	WriteSize int   `json:"write_size"`
	Bytes     int64 `json:"bytes"`
	// Runs counts the measured runs of each ceiling: half before the
	// cases, half after.
	Runs int `json:"runs"`
	// Buffered is pwrite(2) of WriteSize bytes at a time into the page
	// cache, timed to the return of the last write: MB/s (10^6 bytes).
	// Every write carries new bytes, refilled while the previous write
	// runs (internal/ceiling.Fresh): the best a writer of new data does.
	Buffered Stat `json:"buffered_mb_per_s"`
	// Direct is aligned O_DIRECT pwrite(2) of WriteSize bytes at a time
	// from huge pages, one in flight, new bytes each, timed to the return
	// of the last: MB/s. Zero when DirectSkipped says why it was not
	// measured.
	Direct        Stat   `json:"direct_mb_per_s"`
	DirectSkipped string `json:"direct_skipped,omitempty"`
	// Failure says why a ceiling run failed, if one did.
	Failure string `json:"failure,omitempty"`
}

// Stat is the median, min and max of a measurement over runs.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// of returns the ceiling MB/s a kind of strategy is compared with, and the
// ceiling's name.
func (c *Ceiling) of(k Kind) (float64, string) {
	if k == Device {
		return c.Direct.Median, "direct"
	}
	return c.Buffered.Median, "buffered"
}

// ceilingState collects the ceiling runs of one Run: one pass before the
// cases and one after, so that drift on a shared machine during the run
// shows in the ceiling's spread instead of skewing every percentage.
type ceilingState struct {
	c        Ceiling
	direct   bool      // measure the O_DIRECT ceiling too
	buffered []float64 // MB/s of each buffered run
	odirect  []float64 // MB/s of each O_DIRECT run
}

func (r *runner) newCeiling(directErr error) *ceilingState {
	bytes := max(CeilingWrite, r.cfg.MaxBytes/CeilingWrite*CeilingWrite)
	cs := &ceilingState{c: Ceiling{WriteSize: CeilingWrite, Bytes: bytes}, direct: directErr == nil}
	if directErr != nil {
		cs.c.DirectSkipped = directErr.Error()
	}
	return cs
}

// steps returns the progress steps of both passes.
func (cs *ceilingState) steps(runs int) int {
	n := 1 + 2*runs // a warm-up, then runs before and runs after
	if cs.direct {
		n *= 2
	}
	return n
}

// pass measures the buffered and (if possible) the O_DIRECT ceiling runs
// times each, after a warm-up run if warm. Each run's file is checked for
// its size and for the pattern in its first, middle and last block, so that
// a write path that writes nothing cannot pass for a fast one.
func (r *runner) ceilingPass(ctx context.Context, cs *ceilingState, warm bool, when string) error {
	kinds := []bool{false}
	if cs.direct {
		kinds = append(kinds, true)
	}
	for _, direct := range kinds {
		name := "buffered"
		if direct {
			name = "O_DIRECT"
		}
		first := 1
		if warm {
			first = 0
		}
		for run := first; run <= r.cfg.Runs; run++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			what := fmt.Sprintf("ceiling %s: %s %s writes, run %d/%d", when, name, formatSize(CeilingWrite), run, r.cfg.Runs)
			if run == 0 {
				what = fmt.Sprintf("ceiling: %s %s writes, warm-up", name, formatSize(CeilingWrite))
			}
			r.step(what)
			if cs.c.Failure != "" {
				continue
			}
			el, err := r.ceilingRun(direct, cs.c.Bytes)
			if err != nil {
				cs.c.Failure = fmt.Sprintf("%s ceiling: %v", name, err)
				continue
			}
			if run == 0 {
				continue
			}
			v := float64(cs.c.Bytes) / 1e6 / el.Seconds()
			if direct {
				cs.odirect = append(cs.odirect, v)
			} else {
				cs.buffered = append(cs.buffered, v)
			}
		}
	}
	return nil
}

// result returns the ceiling over every run measured.
func (cs *ceilingState) result() Ceiling {
	c := cs.c
	c.Runs = len(cs.buffered)
	c.Buffered, c.Direct = statOf(cs.buffered), statOf(cs.odirect)
	return c
}

// ceilingRun writes n bytes of new data (ceiling.Fresh) to a new file in
// CeilingWrite writes, checks the file, and returns the time from the first
// write to the return of the last.
func (r *runner) ceilingRun(direct bool, n int64) (time.Duration, error) {
	r.runSeq++
	dir := filepath.Join(r.base, fmt.Sprintf("ceiling-%05d", r.runSeq))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, _fileName)
	f, err := ceiling.Create(path, direct)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	err = ceiling.Write(f, n, CeilingWrite, ceiling.Fresh)
	el := time.Since(t0)
	if err = errors.Join(err, f.Close()); err != nil {
		return 0, err
	}
	if err := ceiling.Check(path, n, CeilingWrite, ceiling.Fresh); err != nil {
		return 0, err
	}
	return el, nil
}
