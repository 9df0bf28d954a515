package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/appendlog/appendlog/internal/sys"
)

// Kind says which regime a strategy's numbers belong to and which ceiling
// they are compared with.
type Kind int

// Strategy kinds.
const (
	// PageCache strategies hand records to the kernel's page cache; they
	// are compared with the buffered ceiling.
	PageCache Kind = iota + 1
	// Device strategies write with O_DIRECT, bypassing the page cache;
	// they are compared with the O_DIRECT ceiling.
	Device
	// Durable strategies make records durable (fdatasync) before the
	// clock stops; they are compared with the buffered ceiling, which does
	// not sync, so their percentage shows what durability costs.
	Durable
)

// String returns "page cache", "device" or "durable".
func (k Kind) String() string {
	switch k {
	case PageCache:
		return "page cache"
	case Device:
		return "device"
	case Durable:
		return "durable"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Strategy is one way of getting records into a file. Strategies returns
// every strategy the package knows; a Strategy is a description plus the
// unexported code that runs it.
type Strategy struct {
	// Name is the strategy's name in flags and output ("ring", "write").
	Name string
	// Doc says in one line what the strategy does.
	Doc string
	// Kind is the regime the strategy measures.
	Kind Kind
	// Use is the call that gives a program this strategy, through appendlog
	// or the standard library, with the settings the benchmark runs. It is
	// empty for a strategy measured only as a reference (raw system calls a
	// program would have to write itself); recommendations never name one.
	Use string
	// Avoid, if set, says why the library does not recommend the strategy
	// although a program can get it (Use): it is measured, and named in
	// advice only as faster beyond noise, with this reason.
	Avoid string

	// open starts one run writing into the empty directory dir.
	open func(ctx context.Context, dir string, rc runCase) (sink, error)
	// probe, if set, reports why the strategy cannot run on dir (nil if
	// it can).
	probe func(dir string) error
}

// runCase is what a strategy needs to know about the case it runs.
type runCase struct {
	size    int
	writers int
}

// A sink is one run of a strategy: an open file (or log) and the state that
// writes to it.
type sink interface {
	// producer returns what writer goroutine w writes through. It is called
	// for every w before the clock starts.
	producer(w int) (producer, error)
	// finish hands every record written so far on (to the OS, the device,
	// or the disk for a durable strategy). The clock stops when it returns.
	finish(ctx context.Context) error
	// close releases the file; it runs after the clock stopped.
	close() error
	// output says where the records are, for the verifier.
	output() output
	// dropped returns the records the strategy accepted and dropped.
	dropped() uint64
}

// A producer is what one writer goroutine writes through. Shared sinks
// return themselves; per-goroutine batching sinks return a batcher.
type producer interface {
	// write writes one record; rec may be reused once it returns.
	write(rec []byte) error
	// done runs on the writer goroutine after its last write, while the
	// clock runs: a batching producer writes its partial batch.
	done() error
}

// output is where a run left its records.
type output struct {
	path string
	wal  bool // path is a wal directory, else a flat file of records
}

// Strategies returns every strategy, in the order reports list them. Each
// call returns a new slice.
func Strategies() []Strategy {
	return []Strategy{
		{Name: "write", Kind: PageCache, Use: "os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644), one Write per record", Doc: "one write(2) per record, O_APPEND", open: openWrite},
		{Name: "writev", Kind: PageCache, Doc: "each writer gathers up to 64 KiB of records and writes them with one pwritev(2) at a range reserved with one atomic add", open: openWritev},
		{Name: "bufio-4k", Kind: PageCache, Use: "bufio.NewWriterSize(f, 4<<10) under a sync.Mutex", Doc: "bufio.Writer of 4 KiB under a mutex", open: openBufio(4 << 10)},
		{Name: "bufio-64k", Kind: PageCache, Use: "bufio.NewWriterSize(f, 64<<10) under a sync.Mutex", Doc: "bufio.Writer of 64 KiB under a mutex", open: openBufio(64 << 10)},
		{Name: "page-aligned", Kind: PageCache, Use: "writer.NewBuffered(f, 64<<10)", Doc: "writer.Buffered: page-aligned 64 KiB buffer under a mutex", open: openBuffered},
		{Name: "mmap", Kind: PageCache, Use: "writer.OpenMmap(path, nil)", Doc: "writer.Mmap: copy into a shared mapping grown by 4 MiB chunks", open: openMmap},
		{Name: "direct", Kind: Device, Doc: "O_DIRECT: 1 MiB aligned buffer under a mutex, aligned writes, partial last block carried, truncated at close", open: openDirect, probe: probeDirect},
		{Name: "slab", Kind: PageCache, Use: "writer.NewSlab(f, nil)", Doc: "writer.Slab: 4 slabs of 1 MiB under a mutex, written by a flusher goroutine", open: openSlab,
			Avoid: "every Write takes a mutex, so its producers pay what bufio+mutex pays (BENCHMARKS.md, Producer cost)"},
		{Name: "ring", Kind: PageCache, Use: "writer.OpenFile(path, nil)", Doc: "writer.Ring: lock-free claim/commit ring (8 MiB), one flusher goroutine, buffered file", open: openRing(false)},
		{Name: "ring-direct", Kind: Device, Use: "writer.OpenFile(path, &writer.RingOptions{Direct: true})", Doc: "writer.Ring with O_DIRECT", open: openRing(true), probe: probeDirect},
		{Name: "wal-nosync", Kind: PageCache, Use: "wal.Open(dir, &wal.Options{Sync: wal.SyncNever})", Doc: "wal.Log, SyncNever: framed, sequence-numbered records", open: openWAL(false)},
		{Name: "wal-batch", Kind: Durable, Use: "wal.Open(dir, nil), Append from each writer, then one Sync (a WaitDurable after every Append instead runs at the group-commit rate)", Doc: "wal.Log, SyncBatch group commit; the clock stops after the final Sync", open: openWAL(true)},
		{Name: "io_uring", Kind: PageCache, Doc: "64 KiB buffers under a mutex, written by IORING_OP_WRITE with up to 8 in flight", open: openUring, probe: probeUring},
	}
}

// StrategyNames returns the names of Strategies, in order.
func StrategyNames() []string {
	var names []string
	for _, s := range Strategies() {
		names = append(names, s.Name)
	}
	return names
}

// selectStrategies returns the strategies named in names, in the order of
// Strategies; no names means all of them.
func selectStrategies(names []string) ([]Strategy, error) {
	all := Strategies()
	if len(names) == 0 {
		return all, nil
	}
	want := make(map[string]bool)
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown strategy %q (known: %s)", n, strings.Join(StrategyNames(), ", "))
		}
		want[n] = true
	}
	var out []Strategy
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// probeDirect reports whether dir's file system accepts O_DIRECT.
func probeDirect(dir string) error {
	f, err := sys.OpenDirect(filepath.Join(dir, "odirect-probe"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, sys.ErrDirectUnsupported) {
			return fmt.Errorf("O_DIRECT not supported on %s: %w", dir, err)
		}
		return fmt.Errorf("probe O_DIRECT: %w", err)
	}
	name := f.Name()
	b := sys.AlignedBuffer(sys.BlockSize)
	_, werr := f.WriteAt(b, 0)
	err = errors.Join(f.Close(), os.Remove(name))
	if werr != nil {
		return fmt.Errorf("O_DIRECT write on %s fails: %w", dir, werr)
	}
	return err
}

// probeUring reports whether io_uring can write a file in dir: set up a
// ring, write one block through IORING_OP_WRITE (Linux 5.6 and later) and
// reap it.
func probeUring(dir string) (err error) {
	r, err := sys.NewUring(1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	f, err := os.CreateTemp(dir, "uring-probe-*")
	if err != nil {
		return fmt.Errorf("probe io_uring: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close(), os.Remove(f.Name())) }()
	b := make([]byte, sys.BlockSize)
	if err := r.Write(f, b, 0, 1); err != nil {
		return fmt.Errorf("io_uring is set up but cannot submit a write: %w", err)
	}
	c, err := r.Wait()
	switch {
	case err != nil:
		return fmt.Errorf("io_uring is set up but waiting for a write fails: %w", err)
	case c.Err != nil:
		return fmt.Errorf("io_uring is set up but IORING_OP_WRITE fails (it needs Linux 5.6): %w", c.Err)
	case c.N != len(b):
		return fmt.Errorf("io_uring probe wrote %d of %d bytes", c.N, len(b))
	}
	return nil
}
