package peers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Records. Every contender writes the same 128-byte records. A record is 16
// little-endian words, word i holding key ^ _mix[i], where key packs the
// writing goroutine's id (high 24 bits) and its sequence number (low 40
// bits). Every word depends on both, so a torn record, a splice of two
// records, a zeroed block or a record from the wrong writer fails the check;
// building and checking a record costs a few nanoseconds, the same for every
// contender.

const (
	recSize  = 128
	recWords = recSize / 8
	seqBits  = 40
	seqMask  = 1<<seqBits - 1
	maxWID   = 1<<(64-seqBits) - 1
)

var _mix = func() (m [recWords]uint64) {
	for i := range m {
		m[i] = uint64(i+1) * 0x9E3779B97F4A7C15
	}
	return m
}()

// fillRecord writes the record of writer wid's seq-th write into rec.
func fillRecord(rec []byte, wid int, seq uint64) {
	k := uint64(wid)<<seqBits | seq
	for i := 0; i < recWords; i++ {
		binary.LittleEndian.PutUint64(rec[i*8:], k^_mix[i])
	}
}

// parseRecord returns the writer and sequence number of rec, or ok == false
// if rec is not a well-formed record.
func parseRecord(rec []byte) (wid int, seq uint64, ok bool) {
	if len(rec) != recSize {
		return 0, 0, false
	}
	k := binary.LittleEndian.Uint64(rec) ^ _mix[0]
	for i := 1; i < recWords; i++ {
		if binary.LittleEndian.Uint64(rec[i*8:])^_mix[i] != k {
			return 0, 0, false
		}
	}
	return int(k >> seqBits), k & seqMask, true
}

// checker verifies a stream of records: each well formed, and each
// writer's records in the order it wrote them. Strict (gaps == false), a
// writer's records must be exactly 0, 1, 2, ...; with gaps (a writer that
// drops records) they must be strictly increasing. A checker is also an
// io.Writer: records may be split across Write calls, as bufio splits them.
// Write never fails, so a sink never sees an error; the first problem is
// kept and reported by finish.
type checker struct {
	gaps    bool
	next    []uint64 // per writer: expected (strict) or lowest allowed seq
	records uint64
	offset  int64 // stream bytes consumed
	carry   [recSize]byte
	nc      int
	err     error
}

func newChecker(writers int, gaps bool) *checker {
	return &checker{gaps: gaps, next: make([]uint64, writers)}
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// Write feeds stream bytes to the checker.
func (c *checker) Write(p []byte) (int, error) {
	n := len(p)
	if c.nc > 0 {
		k := copy(c.carry[c.nc:], p)
		c.nc += k
		p = p[k:]
		if c.nc < recSize {
			return n, nil
		}
		c.record(c.carry[:])
		c.nc = 0
	}
	for len(p) >= recSize {
		c.record(p[:recSize])
		p = p[recSize:]
	}
	c.nc = copy(c.carry[:], p)
	return n, nil
}

// record checks one whole record (a WAL entry, or recSize stream bytes).
func (c *checker) record(rec []byte) {
	at := c.offset
	c.offset += int64(len(rec))
	if c.err != nil {
		return
	}
	wid, seq, ok := parseRecord(rec)
	switch {
	case !ok:
		c.fail("record %d (byte %d, %d bytes): malformed", c.records, at, len(rec))
	case wid >= len(c.next):
		c.fail("record %d (byte %d): writer %d, want < %d", c.records, at, wid, len(c.next))
	case !c.gaps && seq != c.next[wid]:
		c.fail("record %d (byte %d): writer %d seq %d, want %d (lost, duplicated or reordered)", c.records, at, wid, seq, c.next[wid])
	case c.gaps && seq < c.next[wid]:
		c.fail("record %d (byte %d): writer %d seq %d after %d (duplicated or reordered)", c.records, at, wid, seq, c.next[wid]-1)
	default:
		c.next[wid] = seq + 1
		c.records++
	}
}

// finish checks the stream against what was written: written[w] records by
// writer w, of which dropped (in total) were dropped by the contender and
// reported as such. A strict checker requires dropped == 0.
func (c *checker) finish(written []uint64, dropped uint64) error {
	if c.err != nil {
		return c.err
	}
	if c.nc != 0 {
		return fmt.Errorf("stream ends with a partial record of %d bytes", c.nc)
	}
	if len(written) > len(c.next) {
		return fmt.Errorf("%d writers, checker sized for %d", len(written), len(c.next))
	}
	var total uint64
	for w, n := range written {
		total += n
		if c.gaps {
			if c.next[w] > n {
				return fmt.Errorf("writer %d: read seq %d, but it wrote only %d records", w, c.next[w]-1, n)
			}
		} else if c.next[w] != n {
			return fmt.Errorf("writer %d: read %d records, wrote %d", w, c.next[w], n)
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
	if c.err != nil {
		return c.err
	}
	if c.nc != 0 {
		return fmt.Errorf("stream ends with a partial record of %d bytes", c.nc)
	}
	if len(written) > len(c.next) {
		return fmt.Errorf("%d writers, checker sized for %d", len(written), len(c.next))
	}
	for w, n := range written {
		if c.next[w] > n {
			return fmt.Errorf("writer %d: read seq %d, but it wrote only %d records", w, c.next[w]-1, n)
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
