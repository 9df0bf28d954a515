package writer

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/appendlog/appendlog/internal/payload"
)

// Test records are package payload's records: one line each, naming the
// producer and its counter, with filler and a check. Their sizes vary with
// (producer, counter); every 97th record is large (a few KiB) to cross
// blocks and wraps.

// recordSize returns the size of record (id, ctr), newline included.
func recordSize(id, ctr int) int {
	if ctr%97 == 96 {
		return payload.MinSize + 3000 + (id*131+ctr*7)%2000
	}
	return payload.MinSize + 8 + (id*7+ctr*13)%120
}

// appendRecord appends the record (id, ctr) to b.
func appendRecord(b []byte, id, ctr int) []byte {
	b, err := payload.Append(b, id, uint64(ctr), recordSize(id, ctr))
	if err != nil {
		panic(fmt.Sprintf("appendRecord(%d, %d): %v", id, ctr, err))
	}
	return b
}

// checkResult is what verifyRecords found.
type checkResult struct {
	records     int
	perProducer []int // records seen from each producer
	markers     int   // marker lines
	markedDrops uint64
}

// verifyRecords checks data, the output of producers writing records with
// appendRecord: every line is a whole, intact record or (if markers) a
// drop marker; each producer's counters increase (by exactly one when
// lossless, in which case producer i must have written want[i] records).
func verifyRecords(t testing.TB, data []byte, producers int, lossless, markers bool, want []int) checkResult {
	t.Helper()
	o := payload.Options{Writers: producers, Gaps: !lossless}
	if lossless {
		o.Expect = make([]uint64, producers)
		for i, n := range want {
			o.Expect[i] = uint64(n)
		}
	}
	k, err := payload.NewChecker(o)
	if err != nil {
		t.Fatal(err)
	}
	res := checkResult{perProducer: make([]int, producers)}
	var off int64
	for line := range bytes.Lines(data) {
		at := off
		off += int64(len(line))
		if bytes.HasPrefix(line, []byte("appendlog: ")) {
			if !markers {
				t.Fatalf("unexpected marker line %q at byte %d", line, at)
			}
			f := bytes.Fields(line)
			if len(f) != 4 || string(f[2]) != "records" || string(f[3]) != "dropped" {
				t.Fatalf("bad marker line %q at byte %d", line, at)
			}
			n, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil || n == 0 {
				t.Fatalf("bad marker count in %q at byte %d", line, at)
			}
			res.markers++
			res.markedDrops += n
			continue
		}
		if pr := k.Check(line, at, 0); pr != nil {
			t.Fatalf("%v (lossless=%v) in record %q", pr, lossless, clip(line))
		}
		res.records++
	}
	r := k.Finish()
	if err := r.Err(); err != nil {
		t.Fatalf("%v (lossless=%v)", err, lossless)
	}
	for i, n := range r.PerWriter {
		res.perProducer[i] = int(n)
	}
	return res
}

// parseRecord checks that line is one whole record, its newline included,
// and returns its producer and counter.
func parseRecord(line []byte) (id, ctr int, err error) {
	w, c, err := payload.Decode(line)
	return w, int(c), err
}

func clip(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

func TestRecordRoundTrip(t *testing.T) {
	var b []byte
	for c := range 200 {
		b = appendRecord(b, 3, c)
	}
	res := verifyRecords(t, b, 4, true, false, []int{0, 0, 0, 200})
	if res.records != 200 || res.perProducer[3] != 200 {
		t.Fatalf("records = %d, per producer %v", res.records, res.perProducer)
	}
	for line := range bytes.Lines(b) {
		if id, _, err := parseRecord(line); err != nil || id != 3 {
			t.Fatalf("parseRecord(%q) = %d, %v", line, id, err)
		}
	}
}

// fatalTB records the first Fatal of a check run in its own goroutine.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// TestVerifyRecordsCatchesDamage checks that verifyRecords fails on each
// kind of damage an output can have.
func TestVerifyRecordsCatchesDamage(t *testing.T) {
	var good []byte
	var lines [][]byte
	for c := range 100 {
		for id := range 2 {
			start := len(good)
			good = appendRecord(good, id, c)
			lines = append(lines, good[start:])
		}
	}
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	for _, tt := range []struct {
		name     string
		data     []byte
		lossless bool
		markers  bool
		want     string
	}{
		{"missing, lossless", join(join(lines[:20]...), join(lines[22:]...)), true, false, "missing"},
		{"reordered, lossy", join(join(lines[:20]...), lines[22], lines[20], join(lines[23:]...)), false, false, "reordered"},
		{"duplicate, lossy", join(join(lines[:21]...), lines[20], join(lines[21:]...)), false, false, "duplicate"},
		{"torn line", join(join(lines[:20]...), lines[20][:30], join(lines[21:]...)), false, false, "filler mismatch"},
		{"no newline at the end", good[:len(good)-1], false, false, "torn"},
		{"flipped bit", func() []byte { b := bytes.Clone(good); b[500] ^= 4; return b }(), false, false, "mismatch"},
		{"marker, not allowed", join(join(lines[:20]...), []byte("appendlog: 3 records dropped\n"), join(lines[20:]...)), false, false, "unexpected marker"},
		{"bad marker", join(join(lines[:20]...), []byte("appendlog: 0 records dropped\n"), join(lines[20:]...)), false, true, "bad marker count"},
		{"foreign producer", join(good, appendRecord(nil, 2, 0)), false, false, "only 2 writers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fatalTB{TB: t}
			var wg sync.WaitGroup
			wg.Go(func() { verifyRecords(f, tt.data, 2, tt.lossless, tt.markers, []int{100, 100}) })
			wg.Wait()
			if !strings.Contains(f.msg, tt.want) {
				t.Fatalf("verifyRecords said %q, want %q", f.msg, tt.want)
			}
			t.Log(f.msg)
		})
	}
	f := &fatalTB{TB: t}
	var wg sync.WaitGroup
	wg.Go(func() {
		res := verifyRecords(f, join(join(lines[:20]...), []byte("appendlog: 3 records dropped\n"), join(lines[20:]...)), 2, true, true, []int{100, 100})
		if res.markers != 1 || res.markedDrops != 3 || res.records != 200 {
			f.msg = fmt.Sprintf("%+v", res)
		}
	})
	wg.Wait()
	if f.msg != "" {
		t.Fatalf("clean output with a marker: %s", f.msg)
	}
}
