package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/appendlog/appendlog/ship"
	"github.com/appendlog/appendlog/stream"
)

func init() { register(func(*bool) *cobra.Command { return newShipCmd() }) }

type shipFlags struct {
	dir         string
	stream      string
	group       string
	brokers     []string
	topic       string
	cursor      string
	source      string
	compression string
	partition   int32
	follow      bool
	asJSON      bool
	createTopic bool
	partitions  int32
	// transactional, transactionalID and commitInterval: see
	// ship.KafkaOptions.
	transactional   bool
	transactionalID string
	commitInterval  time.Duration
}

// shipResult is ship's summary; with --json it is the last line of stdout.
type shipResult struct {
	Shipped           uint64  `json:"shipped"`
	Bytes             uint64  `json:"bytes"`
	Seconds           float64 `json:"seconds"`
	RecordsPerSec     float64 `json:"records_per_sec"`
	DuplicatesSkipped uint64  `json:"duplicates_skipped"`
	Committed         uint64  `json:"committed"`
	LagRecords        uint64  `json:"lag_records"`
	LagBytes          uint64  `json:"lag_bytes"`
	ConnectErrors     uint64  `json:"connect_errors"`
	Transactions      uint64  `json:"transactions"`
	Topic             string  `json:"topic"`
	Error             string  `json:"error,omitempty"`
}

func newShipCmd() *cobra.Command {
	var f shipFlags
	cmd := &cobra.Command{
		Use:   "ship --dir DIR [--stream NAME [--group G]] --brokers HOST:PORT[,...] --topic T",
		Short: "Ship a log to an Apache Kafka topic: nothing lost, no duplicates",
		Long: `ship copies the log in --dir to the Kafka topic --topic (package ship):
every record once, in order, with the headers appendlog-source (--source,
default the log's absolute directory) and appendlog-seq (its sequence
number). It reads through the durable cursor --cursor and acks a record on
it only once Kafka acknowledged it; on start it reads back the last record
of the partition it writes and skips what Kafka already holds, so a crash
re-sends nothing (when ship is the only writer of that partition).

With --transactional, ship writes through Kafka transactions: a ship that
starts fences every earlier one of the same --source and --topic (their
transactions are aborted and what they still send is refused), so not even
a request a killed ship left inside the broker lands twice. Records become
visible when their transaction commits (every --commit-interval), and the
topic's consumers must read with isolation.level=read_committed. Once a
source is shipped with --transactional, keep it: a ship without it does not
fence, and waits behind a transaction a killed one left open.

With --stream NAME, --dir is a stream store (package stream) and ship reads
stream NAME through the consumer group --group, of which it must be the only
member; the default source name is then "stream:NAME".

Without --follow it ships the records the log holds and exits 0 once Kafka
acknowledged them all. With --follow it ships new records as they are
appended until SIGINT or SIGTERM, then waits for the records in flight and
commits. ship reads a log's files and never takes its lock: the service
that writes the log may run, start and stop meanwhile (ship then ships the
records the writer handed to the OS, and makes the ones it checkpoints past
durable itself). A stream store, by contrast, is opened, so no other
process may have it open: to ship a stream beside the process that holds
its store, ship the stream's log directory (appendlog stat STORE names it)
through a cursor of its own, as the error then says.

Exit status 1: the brokers are unreachable (the message names them), the
topic is missing (create it, or pass --create-topic), Kafka refused a
record, or the log or its cursor file is damaged.`,
		Example: `  appendlog ship --dir /var/lib/app/log --brokers 127.0.0.1:9092 --topic events
  appendlog ship --dir /var/lib/app/log --brokers k1:9092,k2:9092 --topic events --follow --compression lz4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runShip(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "the log directory (required)")
	fl.StringSliceVar(&f.brokers, "brokers", nil, "seed brokers, host:port (required)")
	fl.StringVar(&f.topic, "topic", "", "the topic to write (required)")
	fl.StringVar(&f.cursor, "cursor", ship.DefaultCursor, "the log cursor to read with")
	fl.StringVar(&f.stream, "stream", "", "ship this stream of the stream store in --dir instead of a log")
	fl.StringVar(&f.group, "group", ship.DefaultCursor, "with --stream: the consumer group to read with (ship must be its only member)")
	fl.StringVar(&f.source, "source", "", "the source name in the appendlog-source header (default: the log's absolute directory)")
	fl.StringVar(&f.compression, "compression", "zstd", "batch compression: zstd, lz4, snappy or none")
	fl.Int32Var(&f.partition, "partition", 0, "the partition to write")
	fl.BoolVar(&f.follow, "follow", false, "keep shipping new records until SIGINT or SIGTERM")
	fl.BoolVar(&f.asJSON, "json", false, "print a JSON summary as the last line of stdout")
	fl.BoolVar(&f.createTopic, "create-topic", false, "create the topic if it is missing")
	fl.Int32Var(&f.partitions, "partitions", 1, "with --create-topic: the new topic's partitions")
	fl.BoolVar(&f.transactional, "transactional", false, "write through Kafka transactions, fencing earlier ships of the source (consumers read_committed)")
	fl.StringVar(&f.transactionalID, "transactional-id", "", "with --transactional: the transactional ID (default appendlog-ship/TOPIC/SOURCE)")
	fl.DurationVar(&f.commitInterval, "commit-interval", ship.DefaultCommitInterval, "with --transactional: how long a transaction gathers records before it commits")
	return cmd
}

func runShip(cmd *cobra.Command, f *shipFlags) error {
	if f.dir == "" || len(f.brokers) == 0 || f.topic == "" {
		return usagef("--dir, --brokers and --topic are required")
	}
	if f.partition < 0 || f.partitions < 1 {
		return usagef("--partition must not be negative and --partitions must be at least 1")
	}
	if !f.transactional && (cmd.Flags().Changed("transactional-id") || cmd.Flags().Changed("commit-interval")) {
		return usagef("--transactional-id and --commit-interval need --transactional")
	}
	if f.commitInterval <= 0 {
		return usagef("--commit-interval %v: want a positive duration", f.commitInterval)
	}
	switch f.compression {
	case "zstd", "lz4", "snappy", "none":
	default:
		return usagef("--compression %q: want zstd, lz4, snappy or none", f.compression)
	}
	for i, b := range f.brokers {
		if strings.TrimSpace(b) == "" {
			return usagef("--brokers %q: broker %d is empty (the client would try localhost:9092)", strings.Join(f.brokers, ","), i+1)
		}
	}
	fl := cmd.Flags()
	for _, name := range []string{"cursor", "group", "stream", "source", "transactional-id"} {
		// An empty name (an unset variable in a script) would read
		// through the default cursor or group, moving it, ship the
		// directory as a log, or ship as the default source, which
		// fences no earlier ship of the source meant.
		if fl.Changed(name) && fl.Lookup(name).Value.String() == "" {
			return usagef("--%s: empty name", name)
		}
	}
	switch {
	case !f.createTopic && fl.Changed("partitions"):
		return usagef("--partitions is the partition count of the topic --create-topic makes: it needs --create-topic")
	case f.stream == "" && fl.Changed("group"):
		return usagef("--group reads a stream: it needs --stream (a log is read through --cursor)")
	case f.stream != "" && fl.Changed("cursor"):
		return usagef("--stream is read through the consumer group --group, not --cursor")
	}
	if err := checkDir(f.dir); err != nil {
		return err
	}
	if f.stream == "" {
		// The store's LOCK file makes the wal package take it for an empty
		// log: ship would make its cursor there and ship nothing.
		if err := checkNotStore(f.dir); err != nil {
			return fmt.Errorf("%w; to ship one of its streams, pass --stream NAME", err)
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := &ship.KafkaOptions{
		Brokers: f.brokers, Topic: f.topic, Partition: f.partition, Compression: f.compression,
		Source: f.source, Cursor: f.cursor, Follow: f.follow,
		Transactional: f.transactional, TransactionalID: f.transactionalID, CommitInterval: f.commitInterval,
	}
	var newShipper func() (*ship.Shipper, error)
	var closeSrc func() error
	if f.stream != "" {
		// stream.Open makes a store where there is none: not in a
		// directory ship was only asked to read.
		if _, isStore, _ := describeStore(f.dir); !isStore {
			return fmt.Errorf("%s: not a stream store (no STORE file), so it has no stream %q", f.dir, f.stream)
		}
		st, err := stream.Open(f.dir, nil)
		if errors.Is(err, stream.ErrInUse) {
			return besideStore(f, err)
		}
		if err != nil {
			return err
		}
		defer st.Close()
		closeSrc = st.Close
		str, err := st.Stream(f.stream)
		if err != nil {
			return err
		}
		o.Cursor = f.group
		newShipper = func() (*ship.Shipper, error) { return ship.NewKafkaFromGroup(str, o) }
	} else {
		closeSrc = func() error { return nil }
		newShipper = func() (*ship.Shipper, error) { return ship.NewKafkaFromDir(f.dir, readOptions(), o) }
	}
	if f.createTopic {
		if err := createTopic(ctx, f); err != nil {
			return err
		}
	}
	s, err := newShipper()
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	start := time.Now()
	var bg sync.WaitGroup
	stopBg := make(chan struct{})
	if isTerminal(stderr) {
		bg.Go(func() { shipProgress(stderr, s, f.follow, stopBg) })
	}
	runErr := s.Run(ctx)
	close(stopBg)
	bg.Wait()
	st := s.Stats()
	runErr = errors.Join(runErr, s.Close(), closeSrc())
	elapsed := time.Since(start)
	res := shipResult{
		Shipped: st.Shipped, Bytes: st.Bytes, Seconds: elapsed.Seconds(), DuplicatesSkipped: st.Skipped,
		Committed: st.Committed, LagRecords: st.LagRecords, LagBytes: st.LagBytes, ConnectErrors: st.ConnectErrors, Transactions: st.Transactions, Topic: f.topic,
	}
	if elapsed > 0 {
		res.RecordsPerSec = float64(st.Shipped) / elapsed.Seconds()
	}
	if runErr != nil {
		res.Error = runErr.Error()
	}
	position := "cursor " + f.cursor
	if f.stream != "" {
		position = "group " + f.group // the stream is read through it, not --cursor
	}
	txns := ""
	if f.transactional {
		txns = fmt.Sprintf(" in %d transactions", st.Transactions)
	}
	fmt.Fprintf(stderr, "appendlog ship: %d records (%s) to %s%s in %.2f s, %.0f records/s; %d already in Kafka skipped; %s at %d\n",
		st.Shipped, humanBytes(int64(st.Bytes)), f.topic, txns, elapsed.Seconds(), res.RecordsPerSec, st.Skipped, position, st.Committed)
	if f.asJSON {
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(&res); err != nil {
			return err
		}
	}
	return runErr
}

// createTopic creates the topic unless it exists.
func createTopic(ctx context.Context, f *shipFlags) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.DialTimeout(ship.DefaultConnectTimeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, ship.DefaultConnectTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, f.topic)
	if err != nil {
		return fmt.Errorf("%w at %v: %v", ship.ErrUnreachable, f.brokers, err)
	}
	if topics.Has(f.topic) && topics[f.topic].Err == nil {
		return nil
	}
	if _, err := adm.CreateTopic(ctx, f.partitions, -1, nil, f.topic); err != nil {
		return fmt.Errorf("create topic %q on %v: %w", f.topic, f.brokers, err)
	}
	return nil
}

// shipProgress prints a progress line on a terminal until stop.
func shipProgress(w io.Writer, s *ship.Shipper, follow bool, stop <-chan struct{}) {
	total := int64(s.Stats().LagRecords)
	if follow {
		total = -1
	}
	bar := newProgressBar(w, total, "ship", "rec")
	t := time.NewTicker(_progressTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			_ = bar.Finish()
			return
		case <-t.C:
			st := s.Stats()
			_ = bar.Set64(int64(st.Shipped + st.Skipped))
			switch {
			case st.ConnectErrors > 0 && st.LastError != "":
				bar.Describe("ship (retrying: " + st.LastError + ")")
			case follow:
				bar.Describe(fmt.Sprintf("ship (lag %d records, %s, oldest %s)", st.LagRecords, humanBytes(int64(st.LagBytes)), st.OldestUnshipped.Round(time.Millisecond)))
			}
		}
	}
}

// besideStore explains, for a stream whose store another process holds
// (err), how to ship it anyway: its log directory through a cursor of its
// own, read from the files without the store's lock (NewKafkaFromDir).
// The stream's retention keeps what that cursor has not passed when the
// stream is kept UntilAcked, as it does for a group.
func besideStore(f *shipFlags, err error) error {
	infos, derr := stream.Describe(f.dir)
	if derr != nil {
		return err
	}
	for _, in := range infos {
		if in.Name == f.stream {
			return fmt.Errorf("%w\nto ship stream %s while that process holds the store, ship its log through a cursor of its own:\n  appendlog ship --dir %s --cursor ship-%s --brokers ... --topic %s\n(a cursor name no group uses: a group opened later under that name would move it back to the stream's start)",
				err, f.stream, in.LogDir, f.stream, f.topic)
		}
	}
	return fmt.Errorf("%w; and it has no stream %q", err, f.stream)
}
