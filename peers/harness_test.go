package peers

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/appendlog/appendlog/internal/payload"
)

// Records. Every contender writes the same 128-byte records: package
// internal/payload's records, each naming the writing goroutine and its
// sequence number, with filler and a check, every byte fixed by those. A
// torn record, a splice of two records, a zeroed block or a record from the
// wrong writer fails the check. A goroutine encodes its buffer once and then
// rewrites only the head and check per record (payload.Stamp), a few
// nanoseconds, the same for every contender.

const recSize = 128

// fillRecord writes the record of writer wid's seq-th write into rec. A
// buffer that already holds a record (it ends in a newline, which a fresh
// buffer does not) only has its head and check rewritten: the timed loops
// reuse one buffer. io.Writer forbids a writer to modify it; one that does
// leaves a record the checker refuses.
func fillRecord(rec []byte, wid int, seq uint64) {
	var err error
	if len(rec) > 0 && rec[len(rec)-1] == '\n' {
		err = payload.Stamp(rec, wid, seq)
	} else {
		err = payload.Encode(rec, wid, seq)
	}
	if err != nil {
		panic(fmt.Sprintf("fillRecord(%d bytes, writer %d, seq %d): %v", len(rec), wid, seq, err))
	}
}

// checker verifies a stream of records with a payload.Checker: each well
// formed, and each writer's records in the order it wrote them. Strict
// (gaps == false), a writer's records must be exactly 0, 1, 2, ...; with
// gaps (a writer that drops records) they must be strictly increasing. A
// checker is also an io.Writer: records may be split across Write calls,
// as bufio splits them. Write never fails, so a sink never sees an error;
// the first problem is kept and reported by finish.
type checker struct {
	k       *payload.Checker
	writers int
	gaps    bool
	records uint64 // intact records, set by finish
	res     *payload.Result
}

func newChecker(writers int, gaps bool) *checker {
	k, err := payload.NewChecker(payload.Options{Size: recSize, Writers: writers, Gaps: gaps})
	if err != nil {
		panic(fmt.Sprintf("newChecker(%d): %v", writers, err))
	}
	return &checker{k: k, writers: writers, gaps: gaps}
}

// Write feeds stream bytes to the checker.
func (c *checker) Write(p []byte) (int, error) { return c.k.Write(p) }

// record checks one whole record (a WAL entry).
func (c *checker) record(rec []byte) { c.k.Check(rec, -1, 0) }

// result finishes the check once and returns the first problem, if any.
func (c *checker) result(written []uint64) error {
	if c.res == nil {
		c.res = c.k.Finish()
		c.records = c.res.Intact
	}
	if c.res.ProblemCount > 0 {
		return c.res.Problems[0]
	}
	if len(written) > c.writers {
		return fmt.Errorf("%d writers, checker sized for %d", len(written), c.writers)
	}
	return nil
}

// finish checks the stream against what was written: written[w] records by
// writer w, of which dropped (in total) were dropped by the contender and
// reported as such. A strict checker requires dropped == 0.
func (c *checker) finish(written []uint64, dropped uint64) error {
	if err := c.result(written); err != nil {
		return err
	}
	var total uint64
	for w, n := range written {
		total += n
		if c.gaps {
			if next := c.k.Next(w); next > n {
				return fmt.Errorf("writer %d: read seq %d, but it wrote only %d records", w, next-1, n)
			}
		} else if next := c.k.Next(w); next != n {
			return fmt.Errorf("writer %d: read %d records, wrote %d", w, next, n)
		}
	}
	if c.records+dropped != total {
		return fmt.Errorf("read %d records + %d reported dropped != %d written", c.records, dropped, total)
	}
	return nil
}

// finishGaps checks the stream of a writer that may drop records: whole
// records, and no writer's sequence number beyond what it wrote. The
// count is the caller's to judge (c.records).
func (c *checker) finishGaps(written []uint64) error {
	if err := c.result(written); err != nil {
		return err
	}
	for w, n := range written {
		if next := c.k.Next(w); next > n {
			return fmt.Errorf("writer %d: read seq %d, but it wrote only %d records", w, next-1, n)
		}
	}
	return nil
}

// checkFile feeds the file at path to c.
func checkFile(c *checker, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{f}, buf); err != nil {
		return fmt.Errorf("read back %s: %w", path, err)
	}
	return nil
}

// checkDir feeds every file in dir to c, in the order of their names: a
// rotated log's backups (name-<time>.ext, the time sortable) come before
// the current file (name.ext, '.' > '-').
func checkDir(c *checker, dir string) error {
	ents, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := checkFile(c, filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// countSink is the do-nothing sink that measures the writer rather than
// the harness: it adds up the bytes and counts the calls, nothing else.
// Atomic adds make it safe for the one-Write-per-record baseline, whose
// producers call it concurrently; a buffering writer calls it once per
// batch. What it cannot check (content and order) a separate verifying
// run of the same shape through the checkSink does (see asyncVerify).
type countSink struct {
	bytes atomic.Uint64
	calls atomic.Uint64
}

func (s *countSink) Write(p []byte) (int, error) {
	s.bytes.Add(uint64(len(p)))
	s.calls.Add(1)
	return len(p), nil
}

// Sync does nothing: there is nothing to make durable.
func (s *countSink) Sync() error { return nil }

// checkSink is the do-nothing sink of the writer benchmarks: it keeps
// nothing, but checks the stream as it arrives (a few ns per record, the
// same for every contender), so that a writer that loses, tears or
// reorders records fails even without a file. Its mutex makes it safe for
// the one-Write-per-record baseline, whose producers call it concurrently.
type checkSink struct {
	mu sync.Mutex
	c  *checker
}

func (s *checkSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.c.Write(p)
	s.mu.Unlock()
	return n, err
}

// Sync does nothing: there is nothing to make durable.
func (s *checkSink) Sync() error { return nil }

// Workload drivers. Writer ids are dense from 0. A driver returns how many
// records each writer wrote; every record it wrote was accepted (a write
// error stops the run and is returned).

// goroutinesFor returns the SetParallelism argument and the resulting
// number of goroutines for about g writers: g == 1 is a plain loop.
func goroutinesFor(g int) (parallelism, actual int) {
	if g <= 1 {
		return 0, 1
	}
	procs := runtime.GOMAXPROCS(0)
	p := (g + procs - 1) / procs
	return p, p * procs
}

// benchWrites runs b.N writes of one record each on g goroutines (see
// goroutinesFor); write must be safe for concurrent use when g > 1.
func benchWrites(b *testing.B, g int, write func(rec []byte) error) ([]uint64, error) {
	p, actual := goroutinesFor(g)
	written := make([]uint64, actual)
	if p == 0 {
		rec := make([]byte, recSize)
		for i := 0; i < b.N; i++ {
			fillRecord(rec, 0, uint64(i))
			if err := write(rec); err != nil {
				return written[:1], err
			}
			written[0]++
		}
		return written, nil
	}
	var (
		ids     atomic.Int32
		errOnce sync.Once
		first   error
	)
	b.SetParallelism(p)
	b.RunParallel(func(pb *testing.PB) {
		wid := int(ids.Add(1)) - 1
		rec := make([]byte, recSize)
		var seq uint64
		for pb.Next() {
			fillRecord(rec, wid, seq)
			if err := write(rec); err != nil {
				errOnce.Do(func() { first = err })
				break
			}
			seq++
		}
		written[wid] = seq
	})
	return written[:ids.Load()], first
}

// testWrites runs g goroutines writing n records each, as the Tests do.
func testWrites(g, n int, write func(rec []byte) error) ([]uint64, error) {
	written := make([]uint64, g)
	errs := make([]error, g)
	var wg sync.WaitGroup
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := make([]byte, recSize)
			for i := 0; i < n; i++ {
				fillRecord(rec, w, uint64(i))
				if err := write(rec); err != nil {
					errs[w] = err
					return
				}
				written[w]++
			}
		}()
	}
	wg.Wait()
	return written, errors.Join(errs...)
}

func sum(xs []uint64) (t uint64) {
	for _, x := range xs {
		t += x
	}
	return t
}
