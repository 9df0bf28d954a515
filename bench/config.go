package bench

import (
	"errors"
	"fmt"
	"time"
)

// Defaults and limits of Config fields.
const (
	// MinRuns is the fewest measured runs per case: a median of fewer
	// says nothing about spread.
	MinRuns = 3
	// DefaultRuns is the number of measured runs per case.
	DefaultRuns = 3
	// DefaultRunTime is how long one measured run aims to last.
	DefaultRunTime = 150 * time.Millisecond
	// DefaultMaxBytes bounds the record bytes of one run (and the ceiling's
	// bytes): 256 MiB stays in the page-cache regime on a machine with a few
	// GiB of RAM.
	DefaultMaxBytes = 256 << 20
	// CeilingWrite is the size of one write of the ceiling measurements,
	// the writer Ring's O_DIRECT write at its default size: larger writes
	// carry more on a virtio disk (the O_DIRECT ceiling by write size,
	// writer's BenchmarkFileLarge w=ceiling-direct, is in BENCHMARKS.md).
	CeilingWrite = 4 << 20
)

// AllSizes returns every record size of the full matrix: 1 B, 128 B,
// 1 KiB, 4 KiB and 8 KiB.
func AllSizes() []int { return []int{1, 128, 1 << 10, 4 << 10, 8 << 10} }

// AllWriters returns every writer count of the full matrix: 1, 8 and 64.
func AllWriters() []int { return []int{1, 8, 64} }

// Config says what Run measures. Use QuickConfig, DefaultConfig or
// FullConfig and change what you need; zero fields mean the defaults.
type Config struct {
	// Dir is where runs write: Run creates a directory in it and removes
	// it at the end. Default: the first of os.TempDir(), /var/tmp and the
	// user cache directory that is not a RAM file system.
	Dir string
	// Sizes are the record sizes in bytes. Default AllSizes.
	Sizes []int
	// Writers are the numbers of writer goroutines. Default AllWriters.
	Writers []int
	// Strategies are the names of the strategies to run (see Strategies).
	// Default: all.
	Strategies []string
	// Runs is the number of measured runs per case, at least MinRuns.
	// Default DefaultRuns.
	Runs int
	// RunTime is how long a measured run aims to last: the warm-up run
	// calibrates the record count from it. Default DefaultRunTime.
	RunTime time.Duration
	// MaxBytes bounds the record bytes of one run, and is the volume of
	// each ceiling run. Default DefaultMaxBytes.
	MaxBytes int64
	// Records, if positive, fixes the records of every run (all writers
	// together) and skips calibration: for tests and exact comparisons.
	// Records of the largest size must fit in MaxBytes.
	Records int64
	// Progress, if set, is called from Run's goroutine before each run
	// and once at the end.
	Progress func(Progress)
}

// Progress is what Run reports before each run.
type Progress struct {
	// Done and Total count runs: warm-ups, measured runs and ceiling runs.
	Done, Total int
	// Case says what runs next ("ring 128 B × 8 writers, run 2/3").
	Case string
}

// QuickConfig returns the --quick matrix: 128 B and 4 KiB records, 1, 8
// and 64 writers, every strategy, runs of about 50 ms (at most 64 MiB).
// It finishes in well under a minute on a 2-core machine.
func QuickConfig() Config {
	return Config{
		Sizes:    []int{128, 4 << 10},
		Writers:  AllWriters(),
		Runs:     DefaultRuns,
		RunTime:  50 * time.Millisecond,
		MaxBytes: 64 << 20,
	}
}

// DefaultConfig returns the default matrix: every record size and writer
// count, every strategy, 3 runs of about 100 ms (at most 128 MiB) each.
// It finishes in about 2.5 minutes on a 2-core machine.
func DefaultConfig() Config {
	return Config{
		Sizes:    AllSizes(),
		Writers:  AllWriters(),
		Runs:     DefaultRuns,
		RunTime:  100 * time.Millisecond,
		MaxBytes: 128 << 20,
	}
}

// FullConfig returns the full matrix with more and longer runs: every
// record size and writer count, 5 runs of about 400 ms (at most 512 MiB).
func FullConfig() Config {
	return Config{
		Sizes:    AllSizes(),
		Writers:  AllWriters(),
		Runs:     5,
		RunTime:  400 * time.Millisecond,
		MaxBytes: 512 << 20,
	}
}

// withDefaults returns c with zero fields filled in.
func (c Config) withDefaults() Config {
	if len(c.Sizes) == 0 {
		c.Sizes = AllSizes()
	}
	if len(c.Writers) == 0 {
		c.Writers = AllWriters()
	}
	if c.Runs == 0 {
		c.Runs = DefaultRuns
	}
	if c.RunTime == 0 {
		c.RunTime = DefaultRunTime
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	return c
}

// Validate reports whether the config, with defaults filled in, is usable.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	seen := make(map[int]bool)
	for _, s := range c.Sizes {
		if s < 1 || s > MaxRecordSize {
			errs = append(errs, fmt.Errorf("record size %d out of range [1, %d]", s, MaxRecordSize))
		}
		if seen[s] {
			errs = append(errs, fmt.Errorf("record size %d given twice", s))
		}
		seen[s] = true
	}
	clear(seen)
	for _, w := range c.Writers {
		if w < 1 || w > MaxWriters {
			errs = append(errs, fmt.Errorf("writer count %d out of range [1, %d]", w, MaxWriters))
		}
		if seen[w] {
			errs = append(errs, fmt.Errorf("writer count %d given twice", w))
		}
		seen[w] = true
		for _, s := range c.Sizes {
			if s < MinFramedSize && w > MaxSmallWriters {
				errs = append(errs, fmt.Errorf("%d writers with %d-byte records: records under %d bytes identify their writer in one byte, so at most %d writers", w, s, MinFramedSize, MaxSmallWriters))
			}
		}
	}
	if _, err := selectStrategies(c.Strategies); err != nil {
		errs = append(errs, err)
	}
	if c.Runs < MinRuns {
		errs = append(errs, fmt.Errorf("runs %d: every case runs at least %d times", c.Runs, MinRuns))
	}
	if c.RunTime < 0 {
		errs = append(errs, fmt.Errorf("run time %v is negative", c.RunTime))
	}
	if c.MaxBytes < CeilingWrite {
		errs = append(errs, fmt.Errorf("max bytes %d: at least %d (one ceiling write)", c.MaxBytes, CeilingWrite))
	}
	if c.Records < 0 {
		errs = append(errs, fmt.Errorf("records %d is negative", c.Records))
	}
	for _, s := range c.Sizes {
		if c.Records > 0 && s > 0 && c.Records > c.MaxBytes/int64(s) {
			errs = append(errs, fmt.Errorf("records %d of %d bytes: more than max bytes %d per run", c.Records, s, c.MaxBytes))
			break
		}
	}
	for _, w := range c.Writers {
		if c.Records > 0 && c.Records < int64(w) {
			errs = append(errs, fmt.Errorf("records %d: fewer than the %d writers", c.Records, w))
			break
		}
		if w > 0 && c.Records/int64(w) >= _maxCounter {
			errs = append(errs, fmt.Errorf("records %d: more than %d per writer with %d writers", c.Records, int64(_maxCounter), w))
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("bench: invalid config: %w", errors.Join(errs...))
	}
	return nil
}
