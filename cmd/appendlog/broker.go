package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/sys"
	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

func init() { register(func(*bool) *cobra.Command { return newBrokerCmd() }) }

const (
	// _stampSize is the publish time (Unix ns, little endian) at the start
	// of each message; a payload record (see internal/payload) follows.
	_stampSize  = 8
	_brokerSpec = "broker.json"
	_brokerFmt  = "appendlog-broker"
	_storeSub   = "store"
	// _maxProblems is how many verification problems are reported.
	_maxProblems = 10
)

type brokerFlags struct {
	dir          string
	keep         bool
	resume       bool
	json         bool
	acks         bool
	streams      int
	publishers   int
	consumers    int
	size         int
	records      int64
	duration     time.Duration
	mode         string
	sync         string
	segmentSize  int64
	bufferSize   int
	readerWindow int64
	maxBytes     int64
	drainTimeout time.Duration
	backlog      bool
	rate         float64
	directSync   bool
}

// brokerSpec is the shape of a run's workload, kept in broker.json beside
// the store so that --resume runs the same one.
type brokerSpec struct {
	Format      string `json:"format"`
	Mode        string `json:"mode"`
	Streams     int    `json:"streams"`
	Publishers  int    `json:"publishers"`
	Consumers   int    `json:"consumers"`
	Size        int    `json:"size"`
	Sync        string `json:"sync"`
	SegmentSize int64  `json:"segment_size,omitempty"`
	MaxBytes    int64  `json:"max_bytes,omitempty"`
	// Created is set once the run created its store and every stream: a
	// resumed run then refuses a store or stream gone missing (its
	// records lost) instead of creating it anew. Without it (a run killed
	// while setting up, or a broker.json written before it existed), a
	// missing one is created.
	Created bool `json:"created,omitempty"`
}

// brokerResult is broker's report; with --json it is the last line of
// stdout.
type brokerResult struct {
	Mode       string `json:"mode"`
	Streams    int    `json:"streams"`
	Publishers int    `json:"publishers"`
	Consumers  int    `json:"consumers"`
	Groups     int    `json:"groups"`
	Size       int    `json:"size"`
	Sync       string `json:"sync"`
	// Rate is the --rate publishers were paced at (msg/s), 0 for as fast
	// as they can.
	Rate    float64 `json:"rate,omitempty"`
	Resumed bool    `json:"resumed"`

	// Published counts this run's publishes; Consumed the distinct
	// records the groups acked (a record counts once per group), which
	// on --resume includes the records the previous run left unacked.
	Published      int64   `json:"published"`
	Consumed       int64   `json:"consumed"`
	Redelivered    int64   `json:"redelivered"`
	PublishSeconds float64 `json:"publish_seconds"`
	Seconds        float64 `json:"seconds"`
	PublishPerSec  float64 `json:"publish_per_sec"`
	ConsumePerSec  float64 `json:"consume_per_sec"`
	E2EP50us       float64 `json:"e2e_p50_us"`
	E2EP99us       float64 `json:"e2e_p99_us"`
	E2EP999us      float64 `json:"e2e_p999_us"`
	MaxLagRecords  int64   `json:"max_lag_records"`
	EndLagRecords  int64   `json:"end_lag_records"`
	PeakRSSBytes   int64   `json:"peak_rss_bytes"`
	DiskBytes      int64   `json:"disk_bytes"`
	// CPUSeconds is the CPU time, user and system, of the whole process
	// (harness included: publishing, checking and timing each message)
	// from the start of publishing to the store's Close; CPUPerMsgNs is
	// it per message published. The kernel threads that run its parked
	// syncs count as the process's.
	CPUSeconds  float64 `json:"cpu_seconds"`
	CPUPerMsgNs float64 `json:"cpu_per_msg_ns"`

	// Lost counts the records a group had not received when its drain
	// ended: every record was due. Undelivered counts those it had not
	// received when the run stopped first (interrupted, or failed), which
	// says nothing about whether they could be delivered.
	Lost        int64    `json:"lost"`
	Undelivered int64    `json:"undelivered,omitempty"`
	Duplicates  int64    `json:"duplicates"`
	Problems    []string `json:"problems,omitempty"`
	Verified    bool     `json:"verified"`
	Error       string   `json:"error,omitempty"`

	// ResumedNext is, per stream, the sequence number after the last
	// record found at --resume: every record confirmed before the
	// previous run died is below it. ResumedFrom is, per group, the
	// checkpoint it resumed from.
	ResumedNext []uint64          `json:"resumed_next,omitempty"`
	ResumedFrom map[string]uint64 `json:"resumed_from,omitempty"`
	Dir         string            `json:"dir"`
	Kept        bool              `json:"kept"`
}

func newBrokerCmd() *cobra.Command {
	var f brokerFlags
	cmd := &cobra.Command{
		Use:   "broker [flags]",
		Short: "Run a message-broker workload on a stream store and verify every delivery",
		Long: `broker runs publishers and consumer groups on a store of streams (package
stream) in --dir, and reports publish and consume rates, end-to-end latency
(publish call to delivery), lag, peak RSS and disk use. It verifies what it
consumed: every record delivered exactly once per group, none lost, torn,
duplicated or never published, and in streams mode in each publisher's
order. It exits with status 1 when verification fails.

Modes:
  streams  --streams streams, each with its own publishers (a publisher owns
           every --publishers-th stream, or, with more publishers than
           streams, several publishers share one) and its own one-member
           groups: --consumers/--streams of them (at least one), each of
           which receives every record of its stream.
  queue    one stream, every publisher on it, and one group whose
           --consumers members share its records (a work queue).

Sync modes: never (the OS decides), batch (group commit: each fdatasync
covers what every publisher of the stream appended), always (batch, and each
publisher waits for its confirm before publishing again).

Each message is --size bytes: its publish time, then a self-checking record
of its publisher lane and counter. --records is the total to publish; with
--duration publishers publish until it has passed instead. Consumers then
drain what is left; --drain-timeout bounds a drain that stops progressing.

Without --dir, broker uses a fresh temporary directory and removes it at the
end unless --keep is given. --resume reopens the store in --dir that an
earlier run left (killed or not) with its workload: publishers go on with
their counters, groups resume from their last checkpoint, and the drain
verifies everything from each group's checkpoint to the end: no record
below it is delivered, and each lane's first delivery is its first record
at or after it. Each group's checkpoint must be where the runs before left
it (checkpoints.json beside broker.json records it): never below one an
earlier run found, and, after a run that ended and closed the store,
exactly where that run left it. With --acks, "durable <stream> <seq>"
lines on stdout confirm records as each stream's durable position
advances.

The publish time runs from the start to the last publish returning and
its record reaching the OS: for batch and always, its confirm; for never,
the store's buffers handed to the OS. The consume time runs to the last
record acked. With --backlog the consumers start only when publishing has
ended, and the consume time runs from then: the rate at which groups drain
a backlog. With --json a JSON object is the last line of stdout, also when
the run cannot start (then with "error", and verified false; the message is
on stderr too, and the exit status 1, or 2 for a bad command line).`,
		Example: `  appendlog broker
  appendlog broker --mode queue --consumers 20 --records 2000000
  appendlog broker --streams 1000 --duration 30s --sync batch --json`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{_jsonVerified: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBroker(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "store directory (default: a temporary directory)")
	fl.BoolVar(&f.keep, "keep", false, "keep the temporary directory used when --dir is not given")
	fl.BoolVar(&f.resume, "resume", false, "reopen the store an earlier run left in --dir and go on with its workload")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object on the last line of stdout")
	fl.BoolVar(&f.acks, "acks", false, `print "durable <stream> <seq>" to stdout as each stream's durable position advances`)
	fl.IntVar(&f.streams, "streams", 20, "streams (streams mode)")
	fl.IntVar(&f.publishers, "publishers", 20, "publisher goroutines")
	fl.IntVar(&f.consumers, "consumers", 20, "consumer goroutines (streams mode: at least one per stream)")
	sizeVar(fl, &f.size, "size", 128, fmt.Sprintf("message size, at least %d bytes", _stampSize+payload.MinSize))
	fl.Int64Var(&f.records, "records", 1000000, "records to publish in total")
	fl.DurationVar(&f.duration, "duration", 0, "publish for this long instead of --records")
	fl.Float64Var(&f.rate, "rate", 0, "publish this many messages per second in all, shared by the publishers (0: as fast as they can); latency below saturation")
	fl.StringVar(&f.mode, "mode", "streams", "workload: streams or queue")
	fl.StringVar(&f.sync, "sync", "batch", "sync mode: never, batch or always")
	sizeVar(fl, &f.segmentSize, "segment-size", 0, "segment file size of each stream (0: the stream default)")
	sizeVar(fl, &f.bufferSize, "buffer-size", 0, "write buffer of each open stream (0: the store default, sized by the number of streams)")
	sizeVar(fl, &f.readerWindow, "reader-window", 0, "bytes of a stream's segment each group keeps resident behind it (0: the store default, sized by the number of streams)")
	sizeVar(fl, &f.maxBytes, "max-bytes", 0, "retention: keep each stream under this many bytes of segments, deleting only what every group acked (0: keep all)")
	fl.BoolVar(&f.directSync, "direct-sync", false, "block in fdatasync instead of parking the wait (stream Options.DirectSync): faster for one stream whose syncs never overlap")
	fl.BoolVar(&f.backlog, "backlog", false, "start the consumers only once publishing ends, and time how fast they drain the backlog")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 30*time.Second, "give up a drain that makes no progress for this long")
	return cmd
}

// specOf validates the flags of a new run and returns its workload.
func specOf(cmd *cobra.Command, f *brokerFlags) (brokerSpec, error) {
	sp := brokerSpec{Format: _brokerFmt, Mode: f.mode, Streams: f.streams, Publishers: f.publishers,
		Consumers: f.consumers, Size: f.size, Sync: f.sync, SegmentSize: f.segmentSize, MaxBytes: f.maxBytes}
	if f.mode == "queue" {
		if cmd.Flags().Changed("streams") && f.streams != 1 {
			return sp, usagef("--mode queue uses one stream; --streams %d asks for more", f.streams)
		}
		sp.Streams = 1
	}
	if err := sp.check(); err != nil {
		return sp, err
	}
	return sp, sp.checkSegmentSize()
}

// checkSegmentSize refuses a segment size the stream store would refuse.
func (sp *brokerSpec) checkSegmentSize() error {
	if err := (&wal.Options{SegmentSize: sp.SegmentSize}).Validate(); sp.SegmentSize != 0 && err != nil {
		return usagef("--segment-size %d: %v", sp.SegmentSize, err)
	}
	return nil
}

func (sp *brokerSpec) check() error {
	switch {
	case sp.Mode != "streams" && sp.Mode != "queue":
		return usagef("--mode must be streams or queue, got %q", sp.Mode)
	case sp.Sync != "never" && sp.Sync != "batch" && sp.Sync != syncAlways:
		return usagef("--sync must be never, batch or always, got %q", sp.Sync)
	case sp.Streams < 1 || sp.Streams > 100000:
		return usagef("--streams must be between 1 and 100000, got %d", sp.Streams)
	case sp.Mode == "queue" && sp.Streams != 1:
		return usagef("--mode queue uses one stream; --streams %d asks for more", sp.Streams)
	case sp.Publishers < 1 || sp.Publishers > 10000:
		return usagef("--publishers must be between 1 and 10000, got %d", sp.Publishers)
	case sp.Consumers < 1 || sp.Consumers > 10000:
		return usagef("--consumers must be between 1 and 10000, got %d", sp.Consumers)
	case sp.Size < _stampSize+payload.MinSize || sp.Size > 1<<20:
		return usagef("--size must be between %d and %d bytes, got %d", _stampSize+payload.MinSize, 1<<20, sp.Size)
	case sp.SegmentSize < 0 || sp.MaxBytes < 0:
		return usagef("--segment-size and --max-bytes must not be negative")
	case sp.Mode == "streams" && max(sp.Streams, sp.Publishers) > payload.MaxWriters:
		return usagef("at most %d publisher lanes (streams or publishers)", payload.MaxWriters)
	}
	return nil
}

// config returns the stream configuration the workload asks for.
func (sp *brokerSpec) config() *stream.Config {
	c := &stream.Config{SegmentSize: sp.SegmentSize, Sync: wal.SyncBatch}
	if sp.Sync == "never" {
		c.Sync = wal.SyncNever
	}
	if sp.MaxBytes > 0 {
		c.Retention = stream.Retention{MaxBytes: sp.MaxBytes, UntilAcked: true}
	}
	return c
}

// topology is who publishes to and consumes from which stream. A lane is
// one publisher's sequence of records to one stream: its records carry the
// lane as their writer id and consecutive counters.
type topology struct {
	streams  []string
	laneOf   []int   // lane -> stream index
	laneIdx  []int   // lane -> its index among its stream's lanes
	nLanes   []int   // stream index -> how many lanes publish to it
	pubLanes [][]int // publisher -> its lanes
	groups   []groupSpec
}

type groupSpec struct {
	stream  int
	name    string
	members int
}

func (sp *brokerSpec) topology() topology {
	var t topology
	if sp.Mode == "queue" {
		t.streams = []string{"queue"}
		for p := range sp.Publishers {
			t.laneOf = append(t.laneOf, 0)
			t.pubLanes = append(t.pubLanes, []int{p})
		}
		t.groups = []groupSpec{{stream: 0, name: "workers", members: sp.Consumers}}
		t.indexLanes()
		return t
	}
	for i := range sp.Streams {
		t.streams = append(t.streams, fmt.Sprintf("s%05d", i))
	}
	t.pubLanes = make([][]int, sp.Publishers)
	lanes := max(sp.Streams, sp.Publishers)
	for l := range lanes {
		t.laneOf = append(t.laneOf, l%sp.Streams)
		p := l % sp.Publishers
		t.pubLanes[p] = append(t.pubLanes[p], l)
	}
	per := max(1, sp.Consumers/sp.Streams)
	for i := range sp.Streams {
		for k := range per {
			t.groups = append(t.groups, groupSpec{stream: i, name: fmt.Sprintf("g%03d", k), members: 1})
		}
	}
	t.indexLanes()
	return t
}

// indexLanes numbers each stream's lanes, so that a group's state is
// sized by its own stream's lanes, not by every lane of the run.
func (t *topology) indexLanes() {
	t.nLanes = make([]int, len(t.streams))
	t.laneIdx = make([]int, len(t.laneOf))
	for l, si := range t.laneOf {
		t.laneIdx[l] = t.nLanes[si]
		t.nLanes[si]++
	}
}

// runBroker sets the run up, runs it and reports.
func runBroker(cmd *cobra.Command, f *brokerFlags) (err error) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := setupBroker(cmd, f)
	if err != nil {
		if f.json {
			// A script reading the last line of stdout gets the failure
			// there too, as after a failed run. The flags are as given
			// (the rate left out: a NaN one has no JSON form).
			err = errors.Join(err, json.NewEncoder(cmd.OutOrStdout()).Encode(&brokerResult{Mode: f.mode, Streams: f.streams,
				Publishers: f.publishers, Consumers: f.consumers, Size: f.size, Sync: f.sync,
				Resumed: f.resume, Error: err.Error(), Dir: f.dir, Kept: f.dir != ""}))
		}
		return err
	}
	defer func() {
		if b.temp != "" {
			err = errors.Join(err, os.RemoveAll(b.temp))
		}
	}()
	runErr := b.run(ctx)
	return b.report(runErr)
}

// checkBrokerFlags checks the flags that do not make the workload.
func checkBrokerFlags(cmd *cobra.Command, f *brokerFlags) error {
	if f.records < 0 || f.duration < 0 || f.drainTimeout <= 0 || f.bufferSize < 0 || f.readerWindow < 0 || !(f.rate >= 0) || math.IsInf(f.rate, 1) {
		return usagef("--records, --duration, --rate, --buffer-size and --reader-window must not be negative, --rate must be finite, --drain-timeout must be positive")
	}
	// Checked here, not first by the store once the run's directory and
	// files are made.
	if err := (&wal.Options{BufferSize: f.bufferSize, ReaderWindow: f.readerWindow}).Validate(); err != nil {
		return usagef("--buffer-size %d, --reader-window %d: %v", f.bufferSize, f.readerWindow, err)
	}
	if cmd.Flags().Changed("dir") && f.dir == "" {
		// An unset variable in a script: the run would go to a temporary
		// directory, removed at the end.
		return usagef("--dir: empty name; leave --dir out for a temporary directory")
	}
	if f.duration > 0 && cmd.Flags().Changed("records") {
		return usagef("--records and --duration are exclusive: publish --records in total, or for --duration")
	}
	return nil
}

// brokerRun is one run of the workload.
type brokerRun struct {
	f              *brokerFlags
	spec           brokerSpec
	topo           topology
	stdout, stderr io.Writer
	st             *stream.Store
	temp           string // the temporary directory to remove, or ""
	res            brokerResult

	streams   []*stream.Stream
	created   []bool // per stream: created by this run, not found
	lanes     []*lane
	groups    []*groupRun
	startNext []uint64 // per stream, NextSeq at the start

	lifeStart int64     // Unix ns: messages stamped earlier are the previous run's
	epoch     time.Time // when lifeStart was read; see stamp

	// atPublishEnd, if set, is called as the publish clock stops: a test
	// seam.
	atPublishEnd func()

	mu       sync.Mutex
	problems []string                // Protected by mu.
	nprob    int                     // Protected by mu.
	latency  *hdrhistogram.Histogram // Protected by mu; the members' end-to-end latencies, merged as they stop.
}

// lane is one publisher's sequence of records to one stream.
type lane struct {
	id     int
	stream int
	s      *stream.Stream
	buf    []byte
	next   uint64 // counter of the next record; the publisher's own
	quota  int64  // records to publish this run; -1 until stopped
	start  uint64 // first counter of this run
	// published counts this run's publishes, for the lag and progress
	// readers; it is alone on its cache line, as each lane is written by
	// one publisher.
	_         [64]byte
	published atomic.Int64
	_         [56]byte
}

// setupBroker validates the flags, makes or finds the directory, and opens
// the store and its streams.
func setupBroker(cmd *cobra.Command, f *brokerFlags) (_ *brokerRun, err error) {
	if err := checkBrokerFlags(cmd, f); err != nil {
		return nil, err
	}
	b := &brokerRun{f: f, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), latency: newLatencyHist()}
	dir := f.dir
	if f.resume {
		if dir == "" {
			return nil, usagef("--resume needs the --dir of the run to resume")
		}
		if b.spec, err = readSpec(dir); err != nil {
			return nil, err
		}
		for _, name := range []string{"mode", "streams", "publishers", "consumers", "size", "sync", "segment-size", "max-bytes"} {
			if cmd.Flags().Changed(name) {
				return nil, usagef("--%s is set by the run being resumed (see %s)", name, filepath.Join(dir, _brokerSpec))
			}
		}
	} else {
		if b.spec, err = specOf(cmd, f); err != nil {
			return nil, err
		}
		if dir == "" {
			if dir, err = os.MkdirTemp("", "appendlog-broker-*"); err != nil {
				return nil, err
			}
			if !f.keep {
				b.temp = dir
			}
		} else if err := emptyDir(dir); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil && b.temp != "" {
			err = errors.Join(err, os.RemoveAll(b.temp))
			b.temp = ""
		}
	}()
	if !f.resume {
		if err := writeSpec(dir, b.spec); err != nil {
			return nil, err
		}
	}
	sp := &b.spec
	b.topo = sp.topology()
	if f.resume && sp.Created {
		if _, err := os.Stat(filepath.Join(dir, _storeSub)); err != nil {
			return nil, fmt.Errorf("%s: the store of the run being resumed is gone (its records with it): %w", dir, err)
		}
	}
	b.st, err = stream.Open(filepath.Join(dir, _storeSub), &stream.Options{BufferSize: f.bufferSize, ReaderWindow: f.readerWindow, DirectSync: f.directSync})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.st.Close())
		}
	}()
	for _, name := range b.topo.streams {
		var s *stream.Stream
		if f.resume {
			s, err = b.st.Stream(name)
			if errors.Is(err, stream.ErrNotFound) && sp.Created {
				return nil, fmt.Errorf("%s: stream %s of the run being resumed is gone (its records with it): %w", dir, name, err)
			}
		}
		if !f.resume || errors.Is(err, stream.ErrNotFound) {
			// A run killed while it created its streams published nothing
			// to those it had not created.
			s, err = b.st.Create(name, sp.config())
			b.created = append(b.created, true)
		} else {
			b.created = append(b.created, false)
		}
		if err != nil {
			return nil, err
		}
		b.streams = append(b.streams, s)
	}
	if !sp.Created {
		sp.Created = true
		if err := writeSpec(dir, *sp); err != nil {
			return nil, err
		}
	}
	b.res = brokerResult{Mode: sp.Mode, Streams: len(b.streams), Publishers: sp.Publishers, Consumers: sp.Consumers,
		Groups: len(b.topo.groups), Size: sp.Size, Sync: sp.Sync, Rate: f.rate, Resumed: f.resume, Dir: dir, Kept: b.temp == ""}
	return b, nil
}

// emptyDir creates dir, or accepts it empty: a new run does not write over
// anything.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return usagef("%s is not empty; pass --resume to go on with the run it holds, or use an empty directory", dir)
	}
	return nil
}

func writeSpec(dir string, sp brokerSpec) error { return writeRunFile(dir, _brokerSpec, sp) }

// writeRunFile writes v as JSON to the file name in dir.
func writeRunFile(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	// Synced and renamed into place, so that a run killed here, or a
	// power cut, leaves it whole or absent.
	path := filepath.Join(dir, name)
	// Made anew, exclusively: a link left at the temporary name is
	// removed, not followed to write over a file outside dir.
	if err := os.Remove(path + ".tmp"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path+".tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	err = errors.Join(err, f.Sync(), f.Close())
	if err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	return sys.SyncDir(dir)
}

func readSpec(dir string) (brokerSpec, error) {
	var sp brokerSpec
	path := filepath.Join(dir, _brokerSpec)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return sp, fmt.Errorf("%s: no broker run to resume (no %s)", dir, _brokerSpec)
	}
	if err != nil {
		return sp, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return sp, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return sp, fmt.Errorf("%s: data after the JSON object", path)
	}
	if sp.Format != _brokerFmt {
		return sp, fmt.Errorf("%s: format %q, want %q", path, sp.Format, _brokerFmt)
	}
	for _, check := range []func() error{sp.check, sp.checkSegmentSize} {
		if err := check(); err != nil {
			// A damaged file, not a bad command line.
			return sp, fmt.Errorf("%s: %s", path, err)
		}
	}
	return sp, nil
}

// groupMarks is checkpoints.json beside broker.json: what the runs on the
// store knew of each group's checkpoint (by stream/group), so that a
// resumed run holds the store to it. A group's checkpoint never moves
// back: each run records, before it starts, where each group resumed as a
// floor; one that ends with every group and the store closed records
// where it left each group, exactly.
type groupMarks struct {
	Exact     bool              `json:"exact"`
	Committed map[string]uint64 `json:"committed"`
}

const _groupMarks = "checkpoints.json"

// checkResumePoints compares where each group resumed with what the
// earlier runs recorded: a group below the floor would deliver again what
// it acked before that checkpoint was written, and one off the exact
// position the previous run left skips records or delivers them again.
// Then it records the groups' positions as the floor for the runs after
// this one. A store without the file (a run killed before it wrote one,
// or made by an older build) has nothing to compare.
func (b *brokerRun) checkResumePoints() error {
	dir := b.res.Dir
	marks := groupMarks{Committed: make(map[string]uint64, len(b.groups))}
	for _, gr := range b.groups {
		marks.Committed[b.streams[gr.spec.stream].Name()+"/"+gr.spec.name] = gr.from
	}
	if b.f.resume {
		var old groupMarks
		buf, err := os.ReadFile(filepath.Join(dir, _groupMarks))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Errorf("read the groups' checkpoints: %w", err)
		default:
			if err := json.Unmarshal(buf, &old); err != nil {
				// Left as it is: what it held is the record to look at.
				return fmt.Errorf("read the groups' checkpoints: %s is damaged (remove it to resume without checking where the groups resume): %w",
					filepath.Join(dir, _groupMarks), err)
			}
		}
		for _, gr := range b.groups {
			name := b.streams[gr.spec.stream].Name() + "/" + gr.spec.name
			was, ok := old.Committed[name]
			switch {
			case !ok || b.created[gr.spec.stream]:
				// A stream a run killed while setting up never made,
				// or whose store it never made: what the file says of
				// its groups is of one that is gone, with nothing in it.
			case gr.from < was:
				marks.Committed[name] = was // the floor stands
				b.problem("group %s resumed from %d, below %d, where an earlier run left its checkpoint: records %d to %d, acked before, are delivered again",
					name, gr.from, was, gr.from, was-1)
			case old.Exact && gr.from > was:
				b.problem("group %s resumed from %d, past %d, where the previous run left it: records %d to %d are never delivered to it",
					name, gr.from, was, was, gr.from-1)
			}
		}
	}
	if err := writeRunFile(dir, _groupMarks, marks); err != nil {
		return fmt.Errorf("record the groups' checkpoints: %w", err)
	}
	return nil
}

// markEnd records the checkpoint each group was left at as exact: the
// next run must resume each group there. REQUIRES: every group was closed
// without error: Close wrote its committed position as its last
// checkpoint, after waiting for the acked records to be durable.
func (b *brokerRun) markEnd() error {
	marks := groupMarks{Exact: true, Committed: make(map[string]uint64, len(b.groups))}
	for _, gr := range b.groups {
		marks.Committed[b.streams[gr.spec.stream].Name()+"/"+gr.spec.name] = gr.g.Committed()
	}
	if err := writeRunFile(b.res.Dir, _groupMarks, marks); err != nil {
		return fmt.Errorf("record the groups' checkpoints: %w", err)
	}
	return nil
}

// problem records a verification failure (the first few are kept).
func (b *brokerRun) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nprob++
	if len(b.problems) < _maxProblems {
		b.problems = append(b.problems, fmt.Sprintf(format, args...))
	}
}

// scanStreams reads what an earlier run left in each stream: every record
// must be whole and its lane's counters consecutive. It sets each lane's
// next counter, and the counter each group's lane delivers first: that of
// the lane's first record at or after the group's checkpoint, or, for a
// lane with none, the first one published this run.
func (b *brokerRun) scanStreams() error {
	next := make([]int64, len(b.topo.laneOf)) // counter after the last seen; 0: none
	b.res.ResumedNext = make([]uint64, len(b.streams))
	byStream := make([][]*groupRun, len(b.streams))
	found := make(map[*groupRun][]bool, len(b.groups)) // per lane: its first counter is set
	for _, gr := range b.groups {
		byStream[gr.spec.stream] = append(byStream[gr.spec.stream], gr)
		found[gr] = make([]bool, len(gr.next))
	}
	for si, s := range b.streams {
		err := s.Scan(0, func(seq uint64, rec []byte) error {
			w, c, err := decodeMsg(rec, b.spec.Size)
			switch {
			case err != nil:
				b.problem("stream %s seq %d: %v", s.Name(), seq, err)
				return nil
			case w >= len(next) || b.topo.laneOf[w] != si:
				b.problem("stream %s seq %d: lane %d does not publish to this stream", s.Name(), seq, w)
				return nil
			case next[w] != 0 && int64(c) != next[w]:
				b.problem("stream %s seq %d: lane %d counter %d after %d", s.Name(), seq, w, c, next[w]-1)
				next[w] = max(next[w], int64(c)+1)
			default:
				next[w] = int64(c) + 1
			}
			k := b.topo.laneIdx[w]
			for _, gr := range byStream[si] {
				if f := found[gr]; seq >= gr.from && !f[k] {
					gr.next[k], f[k] = c, true
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("scan stream %s: %w", s.Name(), err)
		}
		b.res.ResumedNext[si] = s.NextSeq()
	}
	for i, l := range b.lanes {
		l.next, l.start = uint64(next[i]), uint64(next[i])
		k := b.topo.laneIdx[i]
		for _, gr := range byStream[l.stream] {
			if !found[gr][k] {
				gr.next[k] = l.start
			}
		}
	}
	return nil
}

// decodeMsg checks a message and returns its lane and counter.
func decodeMsg(rec []byte, size int) (int, uint64, error) {
	if len(rec) != size {
		return 0, 0, fmt.Errorf("%d bytes, want %d", len(rec), size)
	}
	return payload.Decode(rec[_stampSize:])
}

// run publishes and drains, then closes the store.
func (b *brokerRun) run(ctx context.Context) error {
	sp := &b.spec
	for i, si := range b.topo.laneOf {
		l := &lane{id: i, stream: si, s: b.streams[si], buf: make([]byte, sp.Size)}
		if err := payload.Encode(l.buf[_stampSize:], i, 0); err != nil {
			return err
		}
		b.lanes = append(b.lanes, l)
	}
	// The groups first: scanStreams needs where each resumes from.
	for _, gs := range b.topo.groups {
		g, err := b.streams[gs.stream].Group(gs.name, nil)
		if err != nil {
			return errors.Join(err, b.st.Close())
		}
		b.groups = append(b.groups, newGroupRun(b, gs, g))
	}
	if b.f.resume {
		if err := b.scanStreams(); err != nil {
			return errors.Join(err, b.st.Close())
		}
	}
	// Quotas: --records split over the lanes.
	n := int64(len(b.lanes))
	for i, l := range b.lanes {
		l.quota = b.f.records / n
		if int64(i) < b.f.records%n {
			l.quota++
		}
		if b.f.duration > 0 {
			l.quota = -1
		}
	}
	b.startNext = make([]uint64, len(b.streams))
	for i, s := range b.streams {
		b.startNext[i] = s.NextSeq()
	}
	if b.f.resume {
		b.res.ResumedFrom = map[string]uint64{}
		for _, gr := range b.groups {
			b.res.ResumedFrom[b.streams[gr.spec.stream].Name()+"/"+gr.spec.name] = gr.from
		}
	}

	if b.temp == "" { // a directory removed at the end is never resumed
		if err := b.checkResumePoints(); err != nil {
			return errors.Join(err, b.st.Close())
		}
	}

	cpu0, cpuErr := sys.CPUTime()
	b.epoch = time.Now()
	b.lifeStart = b.epoch.UnixNano()
	start := b.epoch
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var bg sync.WaitGroup
	stopBg := make(chan struct{})
	b.startBackground(&bg, stopBg)

	// Consumers: from the start, or with --backlog once publishing ends.
	var cons sync.WaitGroup
	startConsumers := func() {
		for _, gr := range b.groups {
			for range gr.spec.members {
				cons.Add(1)
				go func() {
					defer cons.Done()
					if err := gr.consume(runCtx); err != nil {
						cancel(err)
					}
				}()
			}
		}
	}
	if !b.f.backlog {
		startConsumers()
	}
	// Publishers.
	// Publishers poll stopPub rather than ctx (ctx.Err takes a lock).
	var stopPub atomic.Bool
	stopOnCancel := context.AfterFunc(runCtx, func() { stopPub.Store(true) })
	defer stopOnCancel()
	var timer *time.Timer
	if b.f.duration > 0 {
		timer = time.AfterFunc(b.f.duration, func() { stopPub.Store(true) })
	}
	var pubs sync.WaitGroup
	for p := range b.topo.pubLanes {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			if err := b.publish(runCtx, p, &stopPub); err != nil {
				cancel(err)
			}
		}()
	}
	pubs.Wait()
	if timer != nil {
		timer.Stop()
	}
	// Confirm the last record of every stream: the publish time includes
	// making it durable, or without syncs handing it to the OS.
	for i, s := range b.streams {
		next := s.NextSeq()
		if next <= b.startNext[i] {
			continue
		}
		if sp.Sync != "never" {
			if err := s.WaitDurable(runCtx, next-1); err != nil && runCtx.Err() == nil {
				cancel(fmt.Errorf("confirm stream %s: %w", s.Name(), err))
			}
			continue
		}
		if err := s.Flush(runCtx); err != nil && runCtx.Err() == nil {
			cancel(fmt.Errorf("flush stream %s: %w", s.Name(), err))
		}
	}
	pubTime := time.Since(start)
	if b.atPublishEnd != nil {
		b.atPublishEnd()
	}
	consStart := start
	if b.f.backlog {
		consStart = time.Now()
		startConsumers()
	}

	// Drain: each group is done when it has acked every record from
	// where it started to the end of its stream.
	for _, gr := range b.groups {
		end := b.streams[gr.spec.stream].NextSeq()
		gr.expect.Store(int64(end - gr.from))
		gr.checkDone()
	}
	drainErr := b.drain(runCtx)
	if drainErr != nil {
		cancel(drainErr)
	}
	// A drain cut short by the run stopping did not wait for every record.
	cut := drainErr == nil && runCtx.Err() != nil
	for _, gr := range b.groups {
		gr.cancel()
	}
	cons.Wait()
	consTime := time.Duration(0)
	for _, gr := range b.groups {
		consTime = max(consTime, time.Duration(gr.doneAt.Load()-consStart.UnixNano()))
	}
	groupsClosed := true
	for _, gr := range b.groups {
		b.res.Redelivered += int64(gr.g.Stats().Redelivered)
		if err := gr.g.Close(); err != nil {
			groupsClosed = false
			cancel(err)
		}
	}
	for _, s := range b.streams {
		b.res.DiskBytes += s.Stats().DiskBytes
	}
	closeErr := b.st.Close()
	close(stopBg)
	bg.Wait()
	elapsed := time.Since(start)
	if cpu1, err := sys.CPUTime(); err == nil && cpuErr == nil {
		b.res.CPUSeconds = (cpu1 - cpu0).Seconds()
	}
	if closeErr == nil && groupsClosed && b.temp == "" {
		closeErr = b.markEnd()
	}

	b.finish(pubTime, consTime, elapsed, cut)
	err := context.Cause(runCtx)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = nil // canceled by the deferred cancel only
	}
	if ctx.Err() != nil {
		err = errInterrupted
	}
	return errors.Join(err, closeErr)
}

// publish runs publisher p: round robin over its lanes until each has
// published its quota, or stop is set (--duration), or ctx is done.
func (b *brokerRun) publish(ctx context.Context, p int, stop *atomic.Bool) error {
	always := b.spec.Sync == syncAlways
	lanes := b.topo.pubLanes[p]
	var pace pacer
	if b.f.rate > 0 {
		pace.every = float64(time.Second) * float64(len(b.topo.pubLanes)) / b.f.rate
		pace.epoch, pace.start = b.epoch, time.Since(b.epoch)
		// Stagger the schedules over one slack, so that the publishers do
		// not all wake, and publish a slack's worth each, at once.
		pace.start += time.Duration(p) * _paceSlack / time.Duration(len(b.topo.pubLanes))
		t, err := sys.NewTimer()
		if err != nil {
			return fmt.Errorf("publisher %d: pacing: %w", p, err)
		}
		defer t.Close()
		pace.timer = t
	}
	for left := len(lanes); left > 0; {
		if stop.Load() {
			return nil
		}
		left = 0
		for _, li := range lanes {
			l := b.lanes[li]
			if l.quota >= 0 && int64(l.next-l.start) >= l.quota {
				continue
			}
			left++
			if err := payload.Stamp(l.buf[_stampSize:], l.id, l.next); err != nil {
				return err
			}
			el := time.Since(b.epoch)
			binary.LittleEndian.PutUint64(l.buf, uint64(b.stamp(el)))
			seq, err := l.s.Publish(l.buf)
			if err != nil {
				return fmt.Errorf("publish to stream %s: %w", l.s.Name(), err)
			}
			l.next++
			l.published.Add(1)
			if pace.every > 0 {
				if more, err := pace.wait(ctx, stop, el); !more {
					return err
				}
			}
			if always {
				if err := l.s.WaitDurable(ctx, seq); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("confirm seq %d of stream %s: %w", seq, l.s.Name(), err)
				}
			}
		}
	}
	return nil
}

// pacer paces one publisher at one message per every nanoseconds, on a
// schedule from start (since epoch): a publisher that fell behind catches
// up without waiting, so the rate holds on average. It sleeps on a
// sys.Timer: a time.Timer's sub-millisecond sleeps end about a millisecond
// late whenever the process goes idle, which turns a steady rate into
// bursts a millisecond apart.
type pacer struct {
	epoch time.Time
	start time.Duration
	every float64 // ns
	sent  int64
	timer *sys.Timer
}

// _paceSlack is how far ahead of its schedule a publisher runs before it
// sleeps: sleeping for less costs more than it smooths.
const _paceSlack = 200 * time.Microsecond

// _paceNap bounds one sleep of a paced publisher, so that it sees stop
// and ctx soon at a low rate.
const _paceNap = 50 * time.Millisecond

// wait counts a message sent at el (since epoch) and sleeps while the
// publisher is ahead of its schedule. more is false once ctx is done or
// stop is set, or when the timer failed (err says why).
func (pc *pacer) wait(ctx context.Context, stop *atomic.Bool, el time.Duration) (more bool, err error) {
	pc.sent++
	for {
		d := time.Duration(float64(pc.sent)*pc.every) - (el - pc.start)
		if d < _paceSlack {
			return true, nil
		}
		if err := pc.timer.Sleep(min(d, _paceNap)); err != nil {
			return false, fmt.Errorf("pacing: %w", err)
		}
		if ctx.Err() != nil || stop.Load() {
			return false, nil
		}
		el = time.Since(pc.epoch)
	}
}

// drain waits until every group is done, or no group made progress for
// --drain-timeout, or ctx is done.
func (b *brokerRun) drain(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	var last int64
	lastMove := time.Now()
	for {
		done, total := true, int64(0)
		for _, gr := range b.groups {
			total += gr.consumed.Load()
			if !gr.isDone() {
				done = false
			}
		}
		if done {
			return nil
		}
		if total != last {
			last, lastMove = total, time.Now()
		} else if time.Since(lastMove) > b.f.drainTimeout {
			return fmt.Errorf("drain made no progress for %v", b.f.drainTimeout)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// lag returns the records published to the groups' streams that they have
// not acked.
func (b *brokerRun) lag() int64 {
	pub := make([]int64, len(b.streams)) // published this run, per stream
	for _, l := range b.lanes {
		pub[l.stream] += l.published.Load()
	}
	var n int64
	for _, gr := range b.groups {
		si := gr.spec.stream
		n += int64(b.startNext[si]-gr.from) + pub[si] - gr.consumed.Load()
	}
	return max(n, 0)
}

// published returns the records published this run.
func (b *brokerRun) published() int64 {
	var n int64
	for _, l := range b.lanes {
		n += l.published.Load()
	}
	return n
}

// startBackground starts the lag sampler, the --acks printer and the
// progress bar; stop ends them.
func (b *brokerRun) startBackground(bg *sync.WaitGroup, stop <-chan struct{}) {
	var bar *progressbar.ProgressBar
	if isTerminal(b.stderr) {
		total := b.f.records
		if b.f.duration > 0 {
			total = -1
		}
		bar = newProgressBar(b.stderr, total, "broker", "msg")
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		t := time.NewTicker(_ackPoll)
		defer t.Stop()
		durable := make([]uint64, len(b.streams))
		for i, s := range b.streams {
			durable[i] = s.DurableSeq()
		}
		var ticks int
		for {
			select {
			case <-stop:
				if bar != nil {
					_ = bar.Finish()
				}
				return
			case <-t.C:
			}
			if b.f.acks {
				for i, s := range b.streams {
					if d := s.DurableSeq(); d > durable[i] {
						durable[i] = d
						fmt.Fprintf(b.stdout, "durable %d %d\n", i, d)
					}
				}
			}
			if ticks++; ticks%(int(_progressTick/_ackPoll)) == 0 {
				b.res.MaxLagRecords = max(b.res.MaxLagRecords, b.lag())
				if bar != nil {
					_ = bar.Set64(b.published())
				}
			}
		}
	}()
}

// finish fills the result in from the counters. cut says the drain was
// cut short: the records a group did not get are undelivered, not lost.
func (b *brokerRun) finish(pubTime, consTime, elapsed time.Duration, cut bool) {
	r := &b.res
	r.Published = b.published()
	for _, gr := range b.groups {
		r.Consumed += gr.consumed.Load()
		r.Duplicates += gr.dups.Load()
		if lost := gr.expect.Load() - gr.consumed.Load(); lost > 0 && cut {
			r.Undelivered += lost
		} else if lost > 0 {
			r.Lost += lost
		}
		for li, si := range b.topo.laneOf {
			if si != gr.spec.stream {
				continue
			}
			if bs := &gr.seen[b.topo.laneIdx[li]]; bs.end() > b.lanes[li].next {
				b.problem("group %s of stream %s: lane %d counter %d delivered, but only %d were published",
					gr.spec.name, b.streams[gr.spec.stream].Name(), li, bs.end()-1, b.lanes[li].next)
			}
		}
	}
	r.EndLagRecords = b.lag()
	r.MaxLagRecords = max(r.MaxLagRecords, r.EndLagRecords)
	r.PublishSeconds, r.Seconds = pubTime.Seconds(), elapsed.Seconds()
	if pubTime > 0 {
		r.PublishPerSec = float64(r.Published) / pubTime.Seconds()
	}
	if consTime > 0 {
		r.ConsumePerSec = float64(r.Consumed) / consTime.Seconds()
	}
	b.mu.Lock()
	h := b.latency
	b.mu.Unlock()
	us := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	if h.TotalCount() > 0 {
		r.E2EP50us, r.E2EP99us, r.E2EP999us = us(50), us(99), us(99.9)
	}
	r.PeakRSSBytes, _ = sys.MaxRSS()
	if r.Published > 0 {
		r.CPUPerMsgNs = r.CPUSeconds * 1e9 / float64(r.Published)
	}
	b.mu.Lock()
	r.Problems = b.problems
	if b.nprob > len(b.problems) {
		r.Problems = append(r.Problems, fmt.Sprintf("and %d more problems", b.nprob-len(b.problems)))
	}
	nprob := b.nprob
	b.mu.Unlock()
	r.Verified = nprob == 0 && r.Lost == 0 && r.Duplicates == 0
}

// report prints the result; a failed run or verification is exit status 1.
func (b *brokerRun) report(runErr error) error {
	r := &b.res
	if runErr != nil {
		r.Error = runErr.Error()
		r.Verified = false
	}
	w := b.stderr
	groups := fmt.Sprintf("%d groups", r.Groups)
	if r.Mode == "queue" {
		groups = fmt.Sprintf("1 group of %d members", r.Consumers)
	}
	resumed := ""
	if r.Rate > 0 {
		resumed = fmt.Sprintf(", paced at %.0f msg/s", r.Rate)
	}
	if r.Resumed {
		resumed += ", resumed"
	}
	fmt.Fprintf(w, "appendlog broker: %s mode, %d streams, %d publishers, %s, %d B messages, sync %s%s\n",
		r.Mode, r.Streams, r.Publishers, groups, r.Size, r.Sync, resumed)
	fmt.Fprintf(w, "  published %d in %.3f s: %.0f msg/s, %.1f MB/s\n",
		r.Published, r.PublishSeconds, r.PublishPerSec, r.PublishPerSec*float64(r.Size)/1e6)
	fmt.Fprintf(w, "  consumed  %d (once per group) at %.0f msg/s; %d redelivered\n", r.Consumed, r.ConsumePerSec, r.Redelivered)
	fmt.Fprintf(w, "  end to end (publish call to delivery): p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs\n", r.E2EP50us, r.E2EP99us, r.E2EP999us)
	fmt.Fprintf(w, "  lag: at most %d records while running, %d at the end\n", r.MaxLagRecords, r.EndLagRecords)
	fmt.Fprintf(w, "  peak RSS %s, %s of segments on disk\n", humanBytes(r.PeakRSSBytes), humanBytes(r.DiskBytes))
	if r.CPUSeconds > 0 {
		fmt.Fprintf(w, "  CPU %.2f s, user and system, harness included: %.0f ns per message published\n", r.CPUSeconds, r.CPUPerMsgNs)
	}
	dir := r.Dir
	if !r.Kept {
		dir += " (removed)"
	}
	fmt.Fprintf(w, "  store %s\n", dir)
	if r.Verified {
		order := ""
		if r.Mode == "streams" {
			order = ", in each publisher's order"
		}
		fmt.Fprintf(w, "  verified: every record delivered exactly once per group%s; none lost, torn, duplicated or never published\n", order)
	} else if r.Error != "" && r.Lost == 0 && r.Duplicates == 0 && len(r.Problems) == 0 {
		fmt.Fprintf(w, "  not verified: stopped before the drain ended, %d records not yet delivered; what was delivered checked out\n", r.Undelivered)
	} else {
		fmt.Fprintf(w, "  VERIFICATION FAILED: %d lost, %d duplicated, %d undelivered when the run stopped\n", r.Lost, r.Duplicates, r.Undelivered)
		for _, p := range r.Problems {
			fmt.Fprintf(w, "    %s\n", p)
		}
	}
	if r.Error != "" {
		fmt.Fprintf(w, "  stopped: %s\n", r.Error)
	}
	if b.f.json {
		if err := json.NewEncoder(b.stdout).Encode(r); err != nil {
			return err
		}
	}
	if !r.Verified {
		return &exitError{exitFailure}
	}
	return nil
}

// groupRun is one consumer group of the run and what it received.
type groupRun struct {
	b    *brokerRun
	spec groupSpec
	g    *stream.Group
	from uint64 // its committed position when opened: where it resumes

	ctx    context.Context
	cancel context.CancelFunc

	consumed atomic.Int64 // distinct records acked
	dups     atomic.Int64
	expect   atomic.Int64 // records to ack; set when publishing ends
	doneAt   atomic.Int64 // Unix ns of the last ack, once done

	seen []bitset // per lane of the group's stream (topology.laneIdx)
	// next is the counter each lane delivers next, for the order check of
	// a one-member group: at first the lane's first record at or after
	// from, so that a group resuming past records (a gap at its resume
	// point) is caught as one delivering out of order.
	next []uint64
}

func newGroupRun(b *brokerRun, gs groupSpec, g *stream.Group) *groupRun {
	gr := &groupRun{b: b, spec: gs, g: g, from: g.Committed()}
	gr.ctx, gr.cancel = context.WithCancel(context.Background())
	gr.expect.Store(-1)
	n := b.topo.nLanes[gs.stream]
	gr.seen = make([]bitset, n)
	gr.next = make([]uint64, n)
	return gr
}

func (gr *groupRun) isDone() bool { return gr.doneAt.Load() != 0 }

// checkDone marks the group done once it acked every record expected.
func (gr *groupRun) checkDone() {
	if e := gr.expect.Load(); e >= 0 && gr.consumed.Load() >= e && gr.doneAt.CompareAndSwap(0, time.Now().UnixNano()) {
		gr.cancel()
	}
}

// consume is one member: it takes records until the group is done or ctx
// is done, checks each and acks it.
func (gr *groupRun) consume(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(gr.ctx, cancel)
	defer stop()
	b := gr.b
	name := b.streams[gr.spec.stream].Name() + "/" + gr.spec.name
	buf := make([]byte, 0, b.spec.Size)
	h := newLatencyHist()
	defer func() {
		b.mu.Lock()
		b.latency.Merge(h)
		b.mu.Unlock()
	}()
	for {
		m, err := gr.g.Next(ctx, buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("group %s: %w", name, err)
		}
		buf = m.Data
		now := b.stamp(time.Since(b.epoch))
		if ts, ok := gr.check(name, m); ok && ts >= b.lifeStart {
			_ = h.RecordValue(min(now-ts, _maxLatency)) // clamped: never an error
		}
		if err := gr.g.Ack(m.Seq); err != nil {
			return fmt.Errorf("group %s: ack %d: %w", name, m.Seq, err)
		}
		gr.checkDone()
	}
}

// check verifies the delivery m to the group named name and counts it.
// ok says it is a record of the run, and ts is then its publish time.
// A record below from, the checkpoint the group resumed from, was acked
// before the checkpoint was written: delivered again. It does not count
// as consumed, so that it cannot stand in for a record of the group's
// range that was never delivered.
func (gr *groupRun) check(name string, m stream.Msg) (ts int64, ok bool) {
	b := gr.b
	w, c, err := decodeMsg(m.Data, b.spec.Size)
	switch {
	case err != nil:
		b.problem("group %s: seq %d: %v", name, m.Seq, err)
		return 0, false
	case w >= len(b.topo.laneOf) || b.topo.laneOf[w] != gr.spec.stream:
		b.problem("group %s: seq %d: lane %d does not publish to this stream", name, m.Seq, w)
		return 0, false
	case m.Seq < gr.from:
		gr.dups.Add(1)
		b.problem("group %s: seq %d: lane %d counter %d delivered again, below the checkpoint %d the group resumed from", name, m.Seq, w, c, gr.from)
		return int64(binary.LittleEndian.Uint64(m.Data)), true
	}
	k := b.topo.laneIdx[w]
	if gr.seen[k].set(c) {
		gr.dups.Add(1)
		b.problem("group %s: seq %d: lane %d counter %d delivered again", name, m.Seq, w, c)
	} else {
		gr.consumed.Add(1)
	}
	if b.spec.Mode == "streams" && m.Delivery == 1 {
		if want := gr.next[k]; c != want {
			b.problem("group %s: seq %d: lane %d counter %d, want %d", name, m.Seq, w, c, want)
		}
		gr.next[k] = c + 1
	}
	return int64(binary.LittleEndian.Uint64(m.Data)), true
}

// stamp returns the Unix time in ns el after the epoch: the publish time
// of a message and the delivery time it is measured against. Both read
// only the monotonic clock (one clock read where time.Now takes two; the
// harness reads it twice per message), and a previous run's stamps stay
// below lifeStart.
func (b *brokerRun) stamp(el time.Duration) int64 { return b.lifeStart + int64(el) }

// _maxLatency is the largest end-to-end latency told apart (ns); longer
// ones count as this.
const _maxLatency = int64(time.Minute)

// newLatencyHist returns a histogram of nanosecond latencies from 1 µs to
// a minute, to 2 significant digits (1%): about 20 KiB, one per member.
func newLatencyHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(int64(time.Microsecond), _maxLatency, 2)
}

// bitset is a set of counters, safe for concurrent use: chunks of 2^13
// counters (1 KiB) made as counters in them are set. Setting a counter in
// a chunk that exists takes one atomic OR and no lock (every member of
// every group sets one per message).
type bitset struct {
	chunks atomic.Pointer[[]atomic.Pointer[bitChunk]] // by counter >> _chunkBits; grown under mu
	mu     sync.Mutex
}

type bitChunk [_chunkWords]atomic.Uint64

const (
	_chunkBits  = 13
	_chunkWords = 1 << (_chunkBits - 6)
)

// set adds c and reports whether it was already there.
func (s *bitset) set(c uint64) bool {
	i := c >> _chunkBits
	var ch *bitChunk
	if cs := s.chunks.Load(); cs != nil && i < uint64(len(*cs)) {
		ch = (*cs)[i].Load()
	}
	if ch == nil {
		ch = s.chunk(i)
	}
	bit := uint64(1) << (c & 63)
	return ch[(c>>6)&(_chunkWords-1)].Or(bit)&bit != 0
}

// chunk returns chunk i, made (and the index grown) if missing.
func (s *bitset) chunk(i uint64) *bitChunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chunks.Load()
	if cs == nil || i >= uint64(len(*cs)) {
		grown := make([]atomic.Pointer[bitChunk], max(i+1, 2*uint64(lenOf(cs))))
		if cs != nil {
			for k := range *cs {
				grown[k].Store((*cs)[k].Load())
			}
		}
		s.chunks.Store(&grown)
		cs = &grown
	}
	ch := (*cs)[i].Load()
	if ch == nil {
		ch = new(bitChunk)
		(*cs)[i].Store(ch)
	}
	return ch
}

func lenOf(cs *[]atomic.Pointer[bitChunk]) int {
	if cs == nil {
		return 0
	}
	return len(*cs)
}

// end returns one past the largest counter set.
func (s *bitset) end() uint64 {
	s.mu.Lock() // no chunk is added meanwhile
	defer s.mu.Unlock()
	cs := s.chunks.Load()
	if cs == nil {
		return 0
	}
	for i := len(*cs) - 1; i >= 0; i-- {
		ch := (*cs)[i].Load()
		if ch == nil {
			continue
		}
		for w := _chunkWords - 1; w >= 0; w-- {
			if v := ch[w].Load(); v != 0 {
				return uint64(i)<<_chunkBits + uint64(w)<<6 + uint64(bits.Len64(v))
			}
		}
	}
	return 0
}
