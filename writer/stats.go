package writer

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a writer's counters. Every writer in this package
// returns one; fields that do not apply to a writer stay zero.
//
// Records and Bytes count the Write calls that returned a nil error: each of
// those records was either stored (and is then written) or dropped and
// counted. Once the writer is closed,
//
//	Records == WrittenRecords + DroppedRecords
//	Bytes   == WrittenBytes + DroppedBytes
//
// hold exactly, unless a sink error stopped the writer (the records still
// buffered then are lost, QueuedBytes counts them, and every call returns
// the error). While writes are in flight the written counters may trail
// (see each field).
type Stats struct {
	// Records and Bytes count accepted Write calls and their bytes.
	Records, Bytes uint64
	// WrittenRecords and WrittenBytes count the records and record bytes
	// handed to the sink (the OS, for files). WrittenBytes is exact at all
	// times for writers without drop markers; WrittenRecords (and, with
	// drop markers, WrittenBytes) may trail while writes are in flight and
	// are exact once the writer is drained (after Flush with no concurrent
	// Write, and after Close).
	WrittenRecords, WrittenBytes uint64
	// DroppedRecords and DroppedBytes count records refused because the
	// buffer was full (Ring with Drop or a BlockTimeout).
	DroppedRecords, DroppedBytes uint64
	// Markers and MarkerBytes count the drop-marker lines written into the
	// stream (RingOptions.DropMarkers). Markers are not records: they are
	// not included in Records, Bytes or the written counters. The file
	// holds WrittenBytes + MarkerBytes bytes written by this writer.
	Markers, MarkerBytes uint64
	// QueuedBytes is the number of bytes accepted into the buffer but not
	// yet handed to the sink (markers included).
	QueuedBytes uint64
	// Flushes counts writes to the sink (one per batch of records), and
	// FlushLatency their durations.
	Flushes      uint64
	FlushLatency Histogram
	// Syncs counts completed syncs (fdatasync for files).
	Syncs uint64
	// BlockedWaits counts writes that had to wait for buffer space, and
	// Blocked is the total time they waited.
	BlockedWaits uint64
	Blocked      time.Duration
	// Retries counts failed sink writes that were retried (Ring with an
	// io.Writer sink).
	Retries uint64
	// Rotations counts the files a Ring with Rotate rotated away from, and
	// RotationErrors the errors met off the write path (syncing a rotated
	// file, compressing, pruning), each also passed to OnError.
	Rotations, RotationErrors uint64
	// Reopens counts the files Ring.Reopen switched to.
	Reopens uint64
}

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = 40

// Histogram counts durations in power-of-two buckets: Buckets[0] counts
// durations of at most 0 ns and Buckets[i], for i >= 1, those of
// [2^(i-1), 2^i) ns. The last bucket also holds every longer duration
// (2^38 ns is about 4.6 minutes). Sum is the total of the durations
// recorded (Prometheus histograms carry it). The zero value is an empty
// histogram; it is not safe for concurrent use (writers keep an atomic one
// and return copies).
type Histogram struct {
	Buckets [HistogramBuckets]uint64
	Sum     time.Duration
}

func bucketOf(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(d)), HistogramBuckets-1)
}

// Record adds d to the histogram.
func (h *Histogram) Record(d time.Duration) {
	h.Buckets[bucketOf(d)]++
	h.Sum += max(d, 0)
}

// Merge adds the counts of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o.Buckets {
		h.Buckets[i] += n
	}
	h.Sum += o.Sum
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	return n
}

// Quantile returns an upper bound of the q-quantile (0 <= q <= 1): the
// upper edge of the bucket that holds it, so the true value lies within a
// factor of two below. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	total := h.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	if rank >= total {
		rank = total - 1
	}
	var seen uint64
	for i, c := range h.Buckets {
		seen += c
		if seen > rank {
			if i == 0 {
				return 0
			}
			return time.Duration(1) << i
		}
	}
	return time.Duration(1) << (HistogramBuckets - 1)
}

// atomicHistogram is a Histogram that one goroutine records into while
// others take snapshots.
type atomicHistogram struct {
	b   [HistogramBuckets]atomic.Uint64
	sum atomic.Int64 // nanoseconds
}

func (h *atomicHistogram) record(d time.Duration) {
	h.b[bucketOf(d)].Add(1)
	h.sum.Add(int64(max(d, 0)))
}

// snapshot returns the histogram. Taken while durations are recorded, Sum
// may include a duration the buckets do not yet count, or the reverse.
func (h *atomicHistogram) snapshot() Histogram {
	var s Histogram
	for i := range h.b {
		s.Buckets[i] = h.b[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}
