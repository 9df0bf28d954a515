package writer

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"testing"
)

// Tagged test records are text lines:
//
//	<producer:4 hex> <counter:8 hex> <filler> <crc32 of everything before it:8 hex>\n
//
// The filler's length depends on (producer, counter), so records vary in
// size; every 97th record is large (a few KiB) to cross blocks and wraps.

// recordSize returns the filler length of a record.
func fillerLen(id, ctr int) int {
	if ctr%97 == 96 {
		return 3000 + (id*131+ctr*7)%2000
	}
	return 8 + (id*7+ctr*13)%120
}

// appendRecord appends the record (id, ctr) to b.
func appendRecord(b []byte, id, ctr int) []byte {
	start := len(b)
	b = fmt.Appendf(b, "%04x %08x ", id, ctr)
	n := fillerLen(id, ctr)
	for i := range n {
		b = append(b, byte('a'+(id+ctr+i)%26))
	}
	b = append(b, ' ')
	sum := crc32.ChecksumIEEE(b[start:])
	b = fmt.Appendf(b, "%08x\n", sum)
	return b
}

// checkResult is what verifyRecords found.
type checkResult struct {
	records     int
	perProducer []int // records seen from each producer
	markers     int   // marker lines
	markedDrops uint64
}

// verifyRecords checks data, the output of producers writing tagged records:
// every line is a whole, intact record or (if markers) a drop marker; each
// producer's counters increase (by exactly one when lossless, in which case
// producer i must have written want[i] records).
func verifyRecords(t testing.TB, data []byte, producers int, lossless, markers bool, want []int) checkResult {
	t.Helper()
	res := checkResult{perProducer: make([]int, producers)}
	next := make([]int, producers)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("output does not end with a newline: ...%q", tailOf(data))
	}
	for line := range bytes.Lines(data) {
		line = line[:len(line)-1]
		if bytes.HasPrefix(line, []byte("appendlog: ")) {
			if !markers {
				t.Fatalf("unexpected marker line %q", line)
			}
			f := bytes.Fields(line)
			if len(f) != 4 || string(f[2]) != "records" || string(f[3]) != "dropped" {
				t.Fatalf("bad marker line %q", line)
			}
			n, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil || n == 0 {
				t.Fatalf("bad marker count in %q", line)
			}
			res.markers++
			res.markedDrops += n
			continue
		}
		id, ctr, err := parseRecord(line)
		if err == nil && id >= producers {
			err = errors.New("bad tag")
		}
		if err != nil {
			t.Fatalf("%v in record %q", err, clip(line))
		}
		if lossless && ctr != next[id] || !lossless && ctr < next[id] {
			t.Fatalf("producer %d: record %d after %d (lossless=%v)", id, ctr, next[id]-1, lossless)
		}
		next[id] = ctr + 1
		res.perProducer[id]++
		res.records++
	}
	if lossless {
		for i := range producers {
			if res.perProducer[i] != want[i] {
				t.Fatalf("producer %d: %d records in the output, wrote %d", i, res.perProducer[i], want[i])
			}
		}
	}
	return res
}

// parseRecord parses one tagged record, its newline removed, and checks
// its checksum.
func parseRecord(line []byte) (id, ctr int, err error) {
	f := bytes.Fields(line)
	if len(f) != 4 || len(f[0]) != 4 || len(f[1]) != 8 || len(f[3]) != 8 {
		return 0, 0, errors.New("torn or garbled")
	}
	sum, err := strconv.ParseUint(string(f[3]), 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE(line[:len(line)-8]) {
		return 0, 0, errors.New("bad checksum")
	}
	id64, err1 := strconv.ParseUint(string(f[0]), 16, 16)
	ctr64, err2 := strconv.ParseUint(string(f[1]), 16, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, errors.New("bad tag")
	}
	return int(id64), int(ctr64), nil
}

func clip(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

func tailOf(b []byte) []byte {
	if len(b) > 80 {
		return b[len(b)-80:]
	}
	return b
}

func TestRecordRoundTrip(t *testing.T) {
	var b []byte
	for c := range 200 {
		b = appendRecord(b, 3, c)
	}
	res := verifyRecords(t, b, 4, true, false, []int{0, 0, 0, 200})
	if res.records != 200 {
		t.Fatalf("records = %d", res.records)
	}
}
