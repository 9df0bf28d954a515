package wal

import (
	"errors"
	"fmt"
	"time"

	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/internal/walhook"
)

// SyncMode says when the log makes appended records durable on its own.
// Sync and WaitDurable force durability whatever the mode.
type SyncMode int

// Sync modes.
const (
	// SyncNever leaves durability to the OS (and to explicit Sync calls).
	SyncNever SyncMode = iota + 1
	// SyncInterval calls fdatasync every Options.SyncEvery while there are
	// unsynced records.
	SyncInterval
	// SyncBatch is group commit: one fdatasync covers every record appended
	// before it; a batch is synced when it reaches Options.BatchBytes or its
	// oldest record is Options.BatchAge old, or at once when someone waits
	// on it (WaitDurable, Sync).
	SyncBatch
)

// String returns the mode's name as ParseSyncMode accepts it.
func (m SyncMode) String() string {
	switch m {
	case SyncNever:
		return "never"
	case SyncInterval:
		return "interval"
	case SyncBatch:
		return "batch"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// ParseSyncMode parses "never", "interval" or "batch".
func ParseSyncMode(s string) (SyncMode, error) {
	for _, m := range []SyncMode{SyncNever, SyncInterval, SyncBatch} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("wal: unknown sync mode %q (want never, interval or batch)", s)
}

// Defaults for zero Options fields. A log opened with default options keeps
// its write-path memory near DefaultBufferSize whatever its size on disk.
//
// DefaultSegmentSize bounds recovery: unless Options.VerifyOnOpen is set,
// Open CRC-scans at most one segment (the tail), whatever the log's total
// size (see BenchmarkOpen).
const (
	DefaultSegmentSize   = 32 << 20
	DefaultBufferSize    = 8 << 20
	DefaultBatchBytes    = 256 << 10
	DefaultBatchAge      = 10 * time.Millisecond
	DefaultSyncEvery     = 100 * time.Millisecond
	DefaultFlushInterval = 10 * time.Millisecond
	// DefaultCheckpointEvery is the default Options.CheckpointEvery.
	DefaultCheckpointEvery = time.Second
	// DefaultReaderWindow is the default Options.ReaderWindow.
	DefaultReaderWindow = 1 << 20
)

// MaxBufferSize is the largest Options.BufferSize, and MaxBufferSize/2 the
// largest MaxRecordSize. Readers, Verify and Repair allocate nothing by
// BufferSize, so options with MaxRecordSize MaxBufferSize/2 read any log,
// whatever record size its writer allowed (a record longer than a
// reader's MaxRecordSize is refused with ErrTooLarge, never read).
const MaxBufferSize = engine.MaxSize

// Options configures a Log. A nil *Options, or a zero field, means the
// default. Open copies the options; it never modifies the caller's.
type Options struct {
	// SegmentSize is the size at which the active segment is sealed and a
	// new one started (a segment may exceed it by less than one record).
	// Default DefaultSegmentSize; at least 64 KiB.
	SegmentSize int64
	// BufferSize is the in-memory claim/commit buffer, a power of two in
	// [64 KiB, MaxBufferSize (512 MiB)]. Default DefaultBufferSize.
	BufferSize int
	// MaxRecordSize bounds one record's payload. Default BufferSize/4;
	// at most BufferSize/2.
	MaxRecordSize int
	// Sync is the durability mode. Default SyncBatch.
	Sync SyncMode
	// SyncEvery is the period of SyncInterval. Default DefaultSyncEvery.
	SyncEvery time.Duration
	// BatchBytes and BatchAge bound a group-commit batch in SyncBatch mode.
	// Defaults DefaultBatchBytes and DefaultBatchAge.
	BatchBytes int
	BatchAge   time.Duration
	// FlushInterval bounds how long appended bytes wait in the buffer
	// before they are handed to the OS. Default DefaultFlushInterval.
	FlushInterval time.Duration
	// VerifyOnOpen makes Open CRC-scan every segment, not only the tail,
	// and refuse damage anywhere as a *CorruptionError, as it does for
	// damage in the tail's durable region. It costs a read of the whole
	// log (see BenchmarkOpenVerify); without it Open trusts the footers of
	// sealed segments and damage inside them is found only by a Reader,
	// Verify or Repair.
	VerifyOnOpen bool
	// CheckpointEvery is how often the log writes the committed position
	// of each Cursor whose acks moved it since its last checkpoint (see
	// Cursor). Default DefaultCheckpointEvery.
	CheckpointEvery time.Duration
	// Retention bounds what the log keeps (see Retention). Zero keeps
	// everything.
	Retention Retention
	// ReaderWindow bounds how many bytes of a mapped segment a Reader of
	// the open log keeps resident behind its position: past it, it
	// releases the pages it has read (madvise MADV_DONTNEED; the data
	// stays in the page cache). Touched pages of a mapping count in the process's RSS, so a
	// process that reads many logs at once bounds its RSS by about
	// ReaderWindow per Reader; each release is a system call, so a
	// smaller window costs a Reader that drains a backlog some speed.
	// Default DefaultReaderWindow; at least 4 KiB.
	ReaderWindow int64
	// ParkedSync parks the goroutine that waits for each fdatasync and
	// directory fsync of the log instead of blocking it in the system
	// call: on Linux the sync runs on a kernel worker (io_uring) and the
	// goroutine waits in Go's network poller, like one reading a socket.
	//
	// A goroutine blocked in a system call keeps its P (the runtime's
	// right to run Go code), and the goroutines queued on that P wait with
	// it until the runtime's monitor takes the P back, which in a busy
	// process can take up to 10 ms. An fdatasync that waits for a journal
	// commit takes milliseconds, so several logs syncing at once in a
	// process with few CPUs delay every ready goroutine. Turn it on there
	// (package stream does for every stream). A parked sync costs more
	// CPU and lowers the group-commit throughput of one busy log (see
	// BENCHMARKS.md), so it is off by default. Where io_uring is not
	// available it changes nothing.
	//
	// The kernel workers that run parked syncs are threads of this
	// process; on Linux they are moved to SCHED_BATCH (sched_setattr), so
	// that a sync's completion does not preempt the thread running Go code
	// on its CPU. They keep their fair share of CPU time. This applies to
	// every io_uring worker of the process.
	ParkedSync bool

	// fsys is the file system, vfs.OS() (or vfs.OSParked()) when nil.
	// Tests set it (see
	// export_test.go).
	fsys vfs.FS
	// clock is the engine's clock, the system clock when nil. Tests set a
	// clock.Fake and advance it instead of sleeping.
	clock clock.Clock
	// markEvery is how long a completed sync's durable mark may wait to be
	// written (_markEvery when zero). Tests set it.
	markEvery time.Duration
}

// withDefaults returns a copy of o with defaults filled in.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.fsys == nil {
		c.fsys = vfs.OS()
		if c.ParkedSync {
			c.fsys = vfs.OSParked()
		}
	}
	if c.markEvery == 0 {
		c.markEvery = _markEvery
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.MaxRecordSize == 0 {
		c.MaxRecordSize = c.BufferSize / 4
	}
	if c.Sync == 0 {
		c.Sync = SyncBatch
	}
	if c.SyncEvery == 0 {
		c.SyncEvery = DefaultSyncEvery
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.BatchAge == 0 {
		c.BatchAge = DefaultBatchAge
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = DefaultCheckpointEvery
	}
	if c.ReaderWindow == 0 {
		c.ReaderWindow = DefaultReaderWindow
	}
	return c
}

// Validate reports whether the options, with defaults filled in, are usable.
func (o *Options) Validate() error {
	c := o.withDefaults()
	return c.validate()
}

func (c *Options) validate() error {
	var errs []error
	if c.SegmentSize < 64<<10 {
		errs = append(errs, fmt.Errorf("SegmentSize %d is below 64 KiB", c.SegmentSize))
	}
	if c.BufferSize < engine.MinSize || c.BufferSize > engine.MaxSize || c.BufferSize&(c.BufferSize-1) != 0 {
		errs = append(errs, fmt.Errorf("BufferSize %d is not a power of two in [%d, %d]", c.BufferSize, engine.MinSize, engine.MaxSize))
	}
	if c.MaxRecordSize < 1 || c.MaxRecordSize > c.BufferSize/2 {
		errs = append(errs, fmt.Errorf("MaxRecordSize %d is not in [1, BufferSize/2]", c.MaxRecordSize))
	}
	if c.Sync < SyncNever || c.Sync > SyncBatch {
		errs = append(errs, fmt.Errorf("unknown Sync mode %d", c.Sync))
	}
	if c.SyncEvery < 0 || c.BatchAge < 0 || c.BatchBytes < 0 || c.FlushInterval < 0 || c.CheckpointEvery < 0 ||
		c.Retention.MaxBytes < 0 || c.Retention.MaxAge < 0 {
		errs = append(errs, errors.New("durations and sizes must not be negative"))
	}
	if c.ReaderWindow < 4<<10 {
		errs = append(errs, fmt.Errorf("ReaderWindow %d is below 4 KiB", c.ReaderWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wal: invalid options: %w", err)
	}
	return nil
}

func init() {
	walhook.SetFS = func(opts any, fsys vfs.FS) { opts.(*Options).fsys = fsys }
}
