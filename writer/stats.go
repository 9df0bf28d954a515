package writer

import (
	"time"

	"github.com/appendlog/appendlog/internal/hist"
)

// Histogram counts durations in power-of-two buckets; see hist.Histogram.
type Histogram = hist.Histogram

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = hist.Buckets

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
	// Write, and after Close). A Ring from NewRing (without SplitWrites)
	// holds back a record cut by a flush, and the bytes up to the next
	// record start it knows (4 KiB on), until the rest of the record
	// arrives: the io.Writer may have received that much less.
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
	// file, compressing, pruning) and the rotations that found the file
	// deleted or renamed by another program, each also passed to OnError.
	Rotations, RotationErrors uint64
	// Reopens counts the files Ring.Reopen switched to.
	Reopens uint64
}
