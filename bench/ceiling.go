package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/appendlog/appendlog/internal/sys"
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
	Buffered Stat `json:"buffered_mb_per_s"`
	// Direct is aligned O_DIRECT pwrite(2) of WriteSize bytes at a time,
	// one in flight, timed to the return of the last: MB/s. Zero when
	// DirectSkipped says why it was not measured.
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

// ceilingRun writes bytes to a new file in CeilingWrite writes and returns the
// time from the first write to the return of the last.
func (r *runner) ceilingRun(direct bool, n int64) (time.Duration, error) {
	r.runSeq++
	dir := filepath.Join(r.base, fmt.Sprintf("ceiling-%05d", r.runSeq))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, _fileName)
	var (
		f   *os.File
		err error
		buf []byte
	)
	if direct {
		// Huge pages where the OS has them, as the engine's ring: the
		// ceiling is the best large aligned writes this disk does.
		b, release, herr := sys.HugeBuffer(CeilingWrite)
		if herr != nil {
			return 0, herr
		}
		defer release()
		buf = b
		f, err = sys.OpenDirect(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	} else {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		buf = make([]byte, CeilingWrite)
	}
	if err != nil {
		return 0, err
	}
	for i := range buf {
		buf[i] = fill(1, i)
	}
	t0 := time.Now()
	var off int64
	for off < n {
		var w int
		w, err = f.WriteAt(buf, off)
		off += int64(w)
		if err != nil {
			break
		}
	}
	el := time.Since(t0)
	if err = errors.Join(err, f.Close()); err != nil {
		return 0, err
	}
	if err := checkCeilingFile(path, buf, n); err != nil {
		return 0, err
	}
	return el, nil
}

// checkCeilingFile checks that the file at path is n bytes long and that
// its first, middle and last write-sized blocks hold buf.
func checkCeilingFile(path string, buf []byte, n int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != n {
		return fmt.Errorf("%s: %d bytes after writing %d", path, fi.Size(), n)
	}
	got := make([]byte, len(buf))
	blocks := n / int64(len(buf))
	for _, b := range []int64{0, blocks / 2, blocks - 1} {
		off := b * int64(len(buf))
		if _, err := f.ReadAt(got, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if !bytes.Equal(got, buf) {
			return fmt.Errorf("%s: the %s at byte %d is not what was written", path, formatSize(len(buf)), off)
		}
	}
	return nil
}
