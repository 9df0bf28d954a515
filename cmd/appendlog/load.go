package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/wal"
)

// syncAlways is load's own sync mode: wal.SyncBatch, and every writer waits
// for its record to be durable before appending the next one.
const syncAlways = "always"

const (
	_ackPoll      = 2 * time.Millisecond
	_progressTick = 100 * time.Millisecond
	_maxWriters   = 1 << 16
	// _maxSize is the largest payload the largest wal buffer (512 MiB)
	// accepts: half of it.
	_maxSize = 256 << 20
)

type loadFlags struct {
	dir         string
	keep        bool
	records     int64
	size        int
	writers     int
	sync        string
	syncEvery   time.Duration
	segmentSize int64
	acks        bool
	json        bool
	force       bool
	verifyOpen  bool
	// syncEverySet: --sync-every was given.
	syncEverySet bool
}

// loadResult is load's report; with --json it is printed as the last line
// of stdout.
type loadResult struct {
	// Records counts the records Append accepted. A run stopped early has
	// fewer; of those, WrittenRecords were handed to the OS and
	// DurableRecords survived fdatasync, by the log's own counters.
	Records        int64 `json:"records"`
	Requested      int64 `json:"requested_records"`
	WrittenRecords int64 `json:"written_records"`
	DurableRecords int64 `json:"durable_records"`
	// Error says why a run stopped early; empty when it completed.
	Error string `json:"error,omitempty"`

	Bytes         int64   `json:"bytes"`       // payload bytes
	FrameBytes    int64   `json:"frame_bytes"` // payload bytes plus frame headers
	Seconds       float64 `json:"seconds"`     // first Append to Close returned
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`  // payload, 10^6 bytes
	MiBPerSec     float64 `json:"mib_per_sec"` // payload, 2^20 bytes
	Writers       int     `json:"writers"`
	Size          int     `json:"size"`
	Sync          string  `json:"sync"`
	SyncEvery     string  `json:"sync_every,omitempty"`
	SegmentSize   int64   `json:"segment_size,omitempty"`
	Dir           string  `json:"dir"`
	Kept          bool    `json:"kept"`
	FirstSeq      uint64  `json:"first_seq"`
	LastSeq       uint64  `json:"last_seq"`
	DurableSeq    uint64  `json:"durable_seq"`
	// Syncs counts the log's fdatasyncs, Close's included; InlineSyncs
	// those a lone waiting writer ran on its own goroutine (--sync always).
	Syncs       uint64 `json:"syncs"`
	InlineSyncs uint64 `json:"inline_syncs"`
	// MaxRSSBytes is the process's peak resident set size (0 where the
	// platform does not report it).
	MaxRSSBytes int64 `json:"max_rss_bytes"`
}

func newLoadCmd() *cobra.Command {
	var f loadFlags
	cmd := &cobra.Command{
		Use:   "load [flags]",
		Short: "Append generated records from concurrent writers and report throughput",
		Long: `load appends --records generated records of --size bytes to the log in --dir,
split across --writers goroutines, and reports throughput.

Each payload is one printable line holding its writer id, that writer's
counter, filler and a check of all three, so "appendlog verify --payloads"
can prove that no record was lost, torn, mixed up or reordered.

Sync modes:
  never     never fdatasync while appending (Close still syncs)
  interval  fdatasync every --sync-every
  batch     group commit: fdatasync after each flushed batch
  always    batch, and each writer waits until its record is durable
            (WaitDurable) before appending the next one; a lone waiter
            writes and syncs on its own goroutine, and an interrupt takes
            effect once the wait in hand returns (a second one ends load)

Without --dir, load writes to a fresh temporary directory and removes it at
the end unless --keep is given.

Before it starts, load refuses a run whose records (payload and 16-byte
frame header each) need more bytes than the file system holding the log
directory has free; --force runs it anyway. A run stopped early (a full
disk, an error, SIGINT) reports how many records were appended, how many of
those were written (handed to the OS) and how many are durable, and exits
with status 1.

The time measured runs from the first Append to the return of Close, so it
includes the final flush and fdatasync. Rates count payload bytes only (each
record also costs a 16-byte frame header on disk); MB = 10^6 bytes and
MiB = 2^20 bytes.

` + _sizeHelp + `

Output: a progress bar on stderr when stderr is a terminal; with --acks a
line "durable <seq>" on stdout each time the durable sequence number
advances (polled every 2ms) and once more at the end; a summary on stderr;
with --json a JSON object as the last line of stdout, also after a run
stopped early (then with "error", and written_records and durable_records
below records) and when load cannot start (then with "error" and no
records; the message is on stderr too, and the exit status 1, or 2 for a
bad command line).`,
		Example: `  appendlog load --records 1000000 --writers 8 --sync batch
  appendlog load --dir /tmp/log --records 100000 --size 512 --sync always --acks --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.syncEverySet = cmd.Flags().Changed("sync-every")
			if cmd.Flags().Changed("dir") && f.dir == "" {
				// An unset variable in a script: the run would go to a
				// temporary directory, removed at the end.
				return usagef("--dir: empty name; leave --dir out for a temporary directory")
			}
			return runLoad(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "log directory, created if missing (default: a temporary directory)")
	fl.BoolVar(&f.keep, "keep", false, "keep the temporary directory used when --dir is not given")
	fl.Int64Var(&f.records, "records", 100000, "records to append, in total across writers")
	sizeVar(fl, &f.size, "size", 128, fmt.Sprintf("payload size, at least %d bytes", payload.MinSize))
	fl.IntVar(&f.writers, "writers", 4, "concurrent writer goroutines")
	fl.StringVar(&f.sync, "sync", "batch", "sync mode: never, interval, batch or always")
	fl.DurationVar(&f.syncEvery, "sync-every", 10*time.Millisecond, "fdatasync period for --sync interval")
	sizeVar(fl, &f.segmentSize, "segment-size", 0, "segment file size, e.g. 64MiB (0: the wal default)")
	fl.BoolVar(&f.acks, "acks", false, `print "durable <seq>" to stdout as the durable sequence number advances`)
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object on the last line of stdout")
	fl.BoolVar(&f.verifyOpen, "verify-on-open", false, "CRC-check every segment of an existing log before appending, and refuse a damaged one")
	fl.BoolVar(&f.force, "force", false, "run even when the records need more bytes than the file system has free")
	return cmd
}

// loadOptions validates the flags and returns the wal options they ask for.
func loadOptions(f *loadFlags) (*wal.Options, error) {
	switch {
	case f.records < 0:
		return nil, usagef("--records must not be negative, got %d", f.records)
	case f.size < payload.MinSize:
		return nil, usagef("--size must be at least %d bytes (writer id, counter, checksum and filler), got %d", payload.MinSize, f.size)
	case f.size > _maxSize:
		return nil, usagef("--size must be at most %d bytes, got %d", _maxSize, f.size)
	case f.writers < 1 || f.writers > _maxWriters:
		return nil, usagef("--writers must be between 1 and %d, got %d", _maxWriters, f.writers)
	case f.segmentSize < 0:
		return nil, usagef("--segment-size must not be negative, got %d", f.segmentSize)
	case f.syncEvery <= 0:
		return nil, usagef("--sync-every must be positive, got %v", f.syncEvery)
	}
	opts := &wal.Options{SegmentSize: f.segmentSize, VerifyOnOpen: f.verifyOpen}
	if f.sync == syncAlways {
		opts.Sync = wal.SyncBatch
	} else {
		m, err := wal.ParseSyncMode(f.sync)
		if err != nil {
			return nil, usagef("--sync must be never, interval, batch or always, got %q", f.sync)
		}
		opts.Sync = m
	}
	if opts.Sync == wal.SyncInterval {
		opts.SyncEvery = f.syncEvery
	} else if f.syncEverySet {
		// Ignored, it would leave the log syncing otherwise than asked.
		return nil, usagef("--sync-every is the period of --sync interval; --sync %s does not sync on a timer", f.sync)
	}
	// A record may take up to a quarter of the default buffer, and half of
	// a larger one.
	if f.size > wal.DefaultBufferSize/4 {
		opts.MaxRecordSize = f.size
		opts.BufferSize = wal.DefaultBufferSize
		for opts.BufferSize < 2*f.size {
			opts.BufferSize *= 2
		}
	}
	if err := opts.Validate(); err != nil {
		return nil, &usageError{err}
	}
	return opts, nil
}

// runLoad runs one load: setupLoad opens the log, the driver appends while
// startProgress reports, and finish prints what the log holds.
func runLoad(cmd *cobra.Command, f *loadFlags) (err error) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal stops the writers after the append or wait in hand
	// (see write); a second one, with the default disposition restored,
	// ends the process, should a wait hang on the disk.
	defer context.AfterFunc(ctx, stop)()
	r, err := setupLoad(cmd, f)
	if err != nil {
		if f.json {
			// A script reading the last line of stdout gets the failure
			// there too, as after a run stopped early.
			err = errors.Join(err, json.NewEncoder(cmd.OutOrStdout()).Encode(&loadResult{Requested: f.records, Writers: f.writers,
				Size: f.size, Sync: f.sync, SegmentSize: f.segmentSize, Dir: f.dir, Kept: f.dir != "", Error: err.Error()}))
		}
		return err
	}
	defer func() {
		if rerr := r.removeTemp(); err == nil {
			err = rerr
		}
	}()

	d := newDriver(r.l, f)
	stopProgress := r.startProgress(d)
	start := time.Now()
	runErr := d.run(ctx)
	closeErr := r.l.Close()
	elapsed := time.Since(start)
	stopProgress()
	return r.finish(elapsed, errors.Join(runErr, closeErr))
}

// loadRun is one load between setup and its report.
type loadRun struct {
	f              *loadFlags
	stdout, stderr io.Writer
	l              *wal.Log
	// temp is the temporary directory to remove at the end, or "".
	temp string
	res  loadResult
}

// setupLoad validates the flags, refuses a run the file system has no room
// for, creates the log directory (a temporary one without --dir) and opens
// the log. On error it leaves nothing behind that it created.
func setupLoad(cmd *cobra.Command, f *loadFlags) (_ *loadRun, err error) {
	opts, err := loadOptions(f)
	if err != nil {
		return nil, err
	}
	r := &loadRun{f: f, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
	target := f.dir
	if target == "" {
		target = os.TempDir()
	}
	if err := checkSpace(r.stderr, target, f); err != nil {
		return nil, err
	}

	dir, kept := f.dir, true
	if dir == "" {
		if dir, err = os.MkdirTemp("", "appendlog-load-*"); err != nil {
			return nil, err
		}
		kept = f.keep
		if !kept {
			r.temp = dir
		}
	} else if err := checkNotStore(dir); err != nil {
		// The store's LOCK file makes the wal package take it for a log.
		return nil, err
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.removeTemp())
		}
	}()

	if r.l, err = wal.Open(dir, opts); err != nil {
		return nil, fmt.Errorf("open log: %w", unprefixed(err))
	}
	if rec := r.l.Recovery(); rec.Segments > 0 {
		fmt.Fprintf(r.stderr, "appendlog load: %s\n", describeRecovery(rec))
	}
	r.res = loadResult{
		Requested:   f.records,
		Writers:     f.writers,
		Size:        f.size,
		Sync:        f.sync,
		SegmentSize: f.segmentSize,
		Dir:         dir,
		Kept:        kept,
		FirstSeq:    r.l.NextSeq(),
	}
	if opts.Sync == wal.SyncInterval {
		r.res.SyncEvery = f.syncEvery.String()
	}
	return r, nil
}

// removeTemp removes the temporary log directory, if load made one and
// --keep was not given.
func (r *loadRun) removeTemp() error {
	if r.temp == "" {
		return nil
	}
	err := os.RemoveAll(r.temp)
	r.temp = ""
	return err
}

// startProgress starts what reports progress while d runs: the "durable
// <seq>" lines of --acks on stdout, and a progress bar on stderr when it is
// a terminal. The function it returns stops and joins them.
func (r *loadRun) startProgress(d *driver) (stop func()) {
	var bg sync.WaitGroup
	done := make(chan struct{})
	if r.f.acks {
		bg.Add(1)
		go func() {
			defer bg.Done()
			printAcks(r.stdout, r.l, done)
		}()
	}
	var bar *progressbar.ProgressBar
	if isTerminal(r.stderr) {
		bar = newProgressBar(r.stderr, r.f.records, "load", "rec")
		bg.Add(1)
		go func() {
			defer bg.Done()
			t := time.NewTicker(_progressTick)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					_ = bar.Set64(d.appended())
				}
			}
		}()
	}
	return func() {
		close(done)
		bg.Wait()
		if bar != nil {
			_ = bar.Finish()
		}
	}
}

// finish reads the closed log's counters into the result and prints it: the
// summary, or what a run stopped early by runErr appended, wrote and made
// durable; with --json the result as the last line of stdout.
func (r *loadRun) finish(elapsed time.Duration, runErr error) error {
	f, res := r.f, &r.res
	st := r.l.Stats()
	durable := st.DurableSeq
	if f.acks {
		fmt.Fprintf(r.stdout, "durable %d\n", durable)
	}

	res.Records, res.WrittenRecords, res.DurableRecords = recordCounts(st, res.FirstSeq, f.size)
	res.Bytes = res.Records * int64(f.size)
	res.FrameBytes = res.Records * int64(f.size+frame.HeaderSize)
	res.Seconds = elapsed.Seconds()
	if res.Seconds > 0 {
		res.RecordsPerSec = float64(res.Records) / res.Seconds
		res.MBPerSec = float64(res.Bytes) / 1e6 / res.Seconds
		res.MiBPerSec = float64(res.Bytes) / (1 << 20) / res.Seconds
	}
	res.LastSeq = res.FirstSeq + uint64(res.Records) - 1
	res.DurableSeq = durable
	res.Syncs, res.InlineSyncs = st.Syncs, st.InlineSyncs
	res.MaxRSSBytes, _ = sys.MaxRSS()

	if runErr != nil {
		res.Error = runErr.Error()
		printLoadStop(r.stderr, res)
	} else {
		printLoadSummary(r.stderr, res)
	}
	if f.json {
		if err := json.NewEncoder(r.stdout).Encode(res); err != nil {
			return err
		}
	}
	if runErr != nil {
		return &exitError{exitFailure}
	}
	return nil
}

// recordCounts returns how many records of size bytes, from seq first on,
// the log with counters st accepted (appended), handed to the OS (written)
// and made durable. These are the log's counters, not the writers': after a
// failure the log holds fewer records than Append accepted.
func recordCounts(st wal.Stats, first uint64, size int) (appended, written, durable int64) {
	appended = int64(st.NextSeq - first)
	if st.DurableSeq >= first {
		durable = int64(st.DurableSeq - first + 1)
	}
	// Stats.Written counts the bytes of the log's completed writes. A write
	// that failed part way (ENOSPC preallocating the next segment) may have
	// handed earlier whole segments to the OS, even made them durable,
	// without being counted: durable records were written either way.
	written = int64(st.Written / uint64(size+frame.HeaderSize))
	written = min(max(written, durable), appended)
	return appended, written, durable
}

// checkSpace refuses a run whose records need more bytes than the file
// system holding dir has free, unless --force is given; then it only warns.
// dir need not exist yet: its nearest existing ancestor is asked. Where free
// space cannot be read, it warns and lets the run go on.
func checkSpace(stderr io.Writer, dir string, f *loadFlags) error {
	free, err := sys.FreeSpace(existingAncestor(dir))
	if err != nil {
		fmt.Fprintf(stderr, "appendlog load: cannot check free space: %v\n", err)
		return nil
	}
	need := "more than " + humanBytes(math.MaxInt64)
	if hi, lo := bits.Mul64(uint64(f.records), uint64(f.size+frame.HeaderSize)); hi == 0 && lo <= math.MaxInt64 {
		if int64(lo) <= free {
			return nil
		}
		need = humanBytes(int64(lo))
	}
	msg := fmt.Sprintf("%d records of %d B need %s (%d-byte frame headers included), but %s are free on the file system of %s",
		f.records, f.size, need, frame.HeaderSize, humanBytes(free), dir)
	if f.force {
		fmt.Fprintf(stderr, "appendlog load: %s; running anyway (--force)\n", msg)
		return nil
	}
	return fmt.Errorf("%s; lower --records or --size, or pass --force to run anyway", msg)
}

// existingAncestor returns dir, or its nearest ancestor that exists.
func existingAncestor(dir string) string {
	p := filepath.Clean(dir)
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

// printLoadStop reports a run that stopped early.
func printLoadStop(w io.Writer, r *loadResult) {
	fmt.Fprintf(w, "appendlog load: stopped early: %s\n", r.Error)
	fmt.Fprintf(w, "  of %d records asked for: %d records appended, %d written (handed to the OS), %d durable (fdatasync)\n",
		r.Requested, r.Records, r.WrittenRecords, r.DurableRecords)
	if r.DurableRecords > 0 {
		fmt.Fprintf(w, "  durable through seq %d\n", r.DurableSeq)
	}
	if r.Kept {
		fmt.Fprintf(w, "  log kept in %s; check it with: appendlog verify %s\n", r.Dir, r.Dir)
	}
}

// driver runs load's writer goroutines.
type driver struct {
	l       *wal.Log
	size    int
	always  bool
	perW    []int64 // records per writer
	counts  []paddedCount
	stopped atomic.Bool // set when a writer failed or load was interrupted
}

// paddedCount is one writer's progress, alone on its cache lines.
type paddedCount struct {
	n atomic.Int64
	_ [120]byte
}

var errInterrupted = errors.New("interrupted")

func newDriver(l *wal.Log, f *loadFlags) *driver {
	d := &driver{
		l:      l,
		size:   f.size,
		always: f.sync == syncAlways,
		perW:   make([]int64, f.writers),
		counts: make([]paddedCount, f.writers),
	}
	w := int64(f.writers)
	for i := range d.perW {
		d.perW[i] = f.records / w
		if int64(i) < f.records%w {
			d.perW[i]++
		}
	}
	return d
}

// appended returns how many records Append accepted so far.
func (d *driver) appended() int64 {
	var n int64
	for i := range d.counts {
		n += d.counts[i].n.Load()
	}
	return n
}

// run appends every record and returns the first error, or errInterrupted
// if ctx was canceled first.
func (d *driver) run(ctx context.Context) error {
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		d.stopped.Store(true)
	}
	// Writers poll d.stopped rather than ctx: ctx.Err takes a lock.
	watchDone := make(chan struct{})
	watch := context.AfterFunc(ctx, func() {
		fail(errInterrupted)
		close(watchDone)
	})
	for i := range d.perW {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.write(uint32(i)); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if !watch() {
		<-watchDone
	}
	return firstErr
}

func (d *driver) write(w uint32) error {
	// The whole record once; then each record rewrites only its counter
	// and check.
	buf := make([]byte, d.size)
	if err := payload.Encode(buf, int(w), 0); err != nil {
		return fmt.Errorf("writer %d: %w", w, err)
	}
	n := d.perW[w]
	cnt := &d.counts[w].n
	for c := int64(0); c < n; c++ {
		if d.stopped.Load() {
			return nil
		}
		if err := payload.Stamp(buf, int(w), uint64(c)); err != nil {
			return fmt.Errorf("writer %d, record %d: %w", w, c, err)
		}
		seq, err := d.l.Append(buf)
		if err != nil {
			return fmt.Errorf("writer %d: append record %d: %w", w, c, err)
		}
		cnt.Store(c + 1)
		if d.always {
			// A wait whose context cannot be cancelled, as a service's
			// commit path would use: a lone writer's wait then writes
			// and syncs on its own goroutine (wal.Log.WaitDurable). A
			// signal takes effect once the wait returns.
			if err := d.l.WaitDurable(context.Background(), seq); err != nil {
				return fmt.Errorf("writer %d: wait for seq %d to be durable: %w", w, seq, err)
			}
		}
	}
	return nil
}

// printAcks prints "durable <seq>" each time l's durable sequence number
// advances, until stop is closed. Each line is one Write, so a reader of a
// pipe sees whole lines as soon as they are printed.
func printAcks(w io.Writer, l *wal.Log, stop <-chan struct{}) {
	t := time.NewTicker(_ackPoll)
	defer t.Stop()
	last := l.DurableSeq()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if d := l.DurableSeq(); d > last {
				last = d
				fmt.Fprintf(w, "durable %d\n", d)
			}
		}
	}
}

func printLoadSummary(w io.Writer, r *loadResult) {
	dir := r.Dir
	if !r.Kept {
		dir += " (removed)"
	}
	mode := r.Sync
	if r.SyncEvery != "" {
		mode += " every " + r.SyncEvery
	}
	fmt.Fprintf(w, "appendlog load: %d records of %d B by %d writers, sync %s, in %.3f s (Close included)\n",
		r.Records, r.Size, r.Writers, mode, r.Seconds)
	fmt.Fprintf(w, "  %.0f records/s, %.2f MB/s, %.2f MiB/s of payload (%d bytes; %d with frame headers)\n",
		r.RecordsPerSec, r.MBPerSec, r.MiBPerSec, r.Bytes, r.FrameBytes)
	fmt.Fprintf(w, "  bytes count payloads only, each record adds a %d-byte frame header on disk; MB = 10^6 bytes, MiB = 2^20 bytes\n",
		frame.HeaderSize)
	if r.MaxRSSBytes > 0 {
		fmt.Fprintf(w, "  peak RSS %.1f MiB\n", float64(r.MaxRSSBytes)/(1<<20))
	}
	if r.Records > 0 {
		fmt.Fprintf(w, "  log %s: seqs %d..%d, durable through %d\n", dir, r.FirstSeq, r.LastSeq, r.DurableSeq)
		fmt.Fprintf(w, "  %d fdatasyncs (%.1f records each), %d of them on a waiting writer's goroutine\n",
			r.Syncs, float64(r.Records)/float64(max(r.Syncs, 1)), r.InlineSyncs)
	} else {
		fmt.Fprintf(w, "  log %s: no records appended\n", dir)
	}
}

// describeRecovery summarizes what wal.Open found in an existing log.
func describeRecovery(r wal.Recovery) string {
	s := fmt.Sprintf("opened existing log: %d segments, seqs %d..%d", r.Segments, r.FirstSeq, r.NextSeq-1)
	if r.NextSeq <= r.FirstSeq {
		s = fmt.Sprintf("opened existing log: %d segments, no records, next seq %d", r.Segments, r.NextSeq)
	}
	if r.TruncatedAt >= 0 && (r.TruncatedBytes > 0 || r.Damage != nil) {
		s += fmt.Sprintf("; cut a torn tail of %d bytes at byte offset %d of %s", r.TruncatedBytes, r.TruncatedAt, r.TailSegment)
		if r.Damage != nil {
			s += fmt.Sprintf(" (%v)", r.Damage)
		}
	}
	if r.RemovedSegment != "" {
		s += fmt.Sprintf("; removed %s, a segment left incomplete by a crash while it was created", r.RemovedSegment)
	}
	return s
}

// newProgressBar returns the progress bar of a command on a terminal w:
// total items (-1: unknown) named unit. The caller sets it every
// _progressTick: the spinner of an unknown total turns then, with no
// goroutine of the bar's own (progressbar's, started for an unknown
// total, is never joined and renders unsynchronised with Set).
func newProgressBar(w io.Writer, total int64, desc, unit string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(_progressTick),
		progressbar.OptionClearOnFinish(),
	)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
