package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// _followChildEnv makes the test binary run followChild instead of the
// tests: "MODE DIR N".
const _followChildEnv = "APPENDLOG_WAL_FOLLOW_CHILD"

// followChild is the writer process of the follower tests. Mode "write"
// appends n records (testPayload, writer 1) to the log in dir through
// several segment rotations, flushing now and then, and closes it. Mode
// "ping" appends one record per byte read from stdin, each stamped with
// the wall clock time (Unix nanoseconds, 8 bytes) just before Append, and
// flushes it; it closes the log when stdin ends.
func followChild(mode, dir string, n int) error {
	l, err := Open(dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch mode {
	case "write":
		for i := range n {
			if _, err := l.Append(testPayload(1, i, 40+i%400)); err != nil {
				l.Close()
				return err
			}
			if i%97 == 0 {
				if err := l.Flush(ctx); err != nil {
					l.Close()
					return err
				}
			}
		}
	case "ping":
		var b [1]byte
		p := make([]byte, 128)
		for {
			if _, err := io.ReadFull(os.Stdin, b[:]); err != nil {
				break
			}
			binary.LittleEndian.PutUint64(p, uint64(time.Now().UnixNano()))
			if _, err := l.Append(p); err != nil {
				l.Close()
				return err
			}
			if err := l.Flush(ctx); err != nil {
				l.Close()
				return err
			}
		}
	default:
		l.Close()
		return fmt.Errorf("unknown mode %q", mode)
	}
	return l.Close()
}

// runFollowChild runs followChild if this process is one, and exits.
func runFollowChild() {
	v := os.Getenv(_followChildEnv)
	if v == "" {
		return
	}
	f := strings.Fields(v)
	n, _ := strconv.Atoi(f[2])
	if err := followChild(f[0], f[1], n); err != nil {
		fmt.Fprintln(os.Stderr, "follow child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// startFollowChild starts the test binary as followChild.
func startFollowChild(tb testing.TB, run, mode, dir string, n int) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.bench=^"+run+"$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", _followChildEnv, mode, dir, n))
	cmd.Stderr = os.Stderr
	return cmd
}

// TestFollowAnotherProcess: a Reader from OpenReader follows, with Wait,
// the log a child process appends to through several segment rotations,
// and sees every record exactly once, in order, intact; then the child
// closes the log, and the Reader sees nothing more.
func TestFollowAnotherProcess(t *testing.T) {
	runFollowChild()
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	appendRecs(t, l, 10)
	noErr(t, l.Close())

	r, err := OpenReader(dir, 5, nil)
	noErr(t, err)
	defer r.Close()
	if runtime.GOOS == "linux" {
		// Change events alone must wake the follower, rotations included.
		r.followPoll = time.Hour
	}
	const n = 3000 // about 700 KiB: ten segments of 64 KiB
	cmd := startFollowChild(t, "TestFollowAnotherProcess", "write", dir, n)
	noErr(t, cmd.Start())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := uint64(5)
	for next < 11+n {
		if !r.Next() {
			noErr(t, r.Err())
			if err := r.Wait(ctx); err != nil {
				t.Fatalf("Wait before seq %d: %v", next, err)
			}
			continue
		}
		if r.Seq() != next {
			t.Fatalf("seq %d, want %d", r.Seq(), next)
		}
		g, i, err := parsePayload(r.Record())
		noErr(t, err)
		wantG, wantI := 0, int(next-1)
		if next > 10 {
			wantG, wantI = 1, int(next-11)
		}
		if g != wantG || i != wantI {
			t.Fatalf("seq %d: writer %d record %d, want %d %d", next, g, i, wantG, wantI)
		}
		next++
	}
	noErr(t, cmd.Wait())
	segs, _, _, err := listSegments(r.fsys, dir)
	noErr(t, err)
	if len(segs) < 5 {
		t.Fatalf("only %d segments: the follower saw too few rotations", len(segs))
	}
	if r.Next() {
		t.Fatalf("record %d past the end", r.Seq())
	}
	noErr(t, r.Err())
	short, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait after the writer closed the log: %v, want the context's error", err)
	}
}

// followAll reads records from r until it has read up to seq last,
// waiting with ctx, and returns the error that stopped it, if any.
func followTo(ctx context.Context, r *Reader, last uint64) error {
	for r.Seq() < last {
		if r.Next() {
			continue
		}
		if err := r.Err(); err != nil {
			return err
		}
		if err := r.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// TestFollowRetention: a follower finishes, from its mapping or open
// file, a segment that TruncateFront deleted under it, then gets a
// *TruncatedError naming the first record left; a follower behind nothing
// deleted goes on through newly named segments.
func TestFollowRetention(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, Retention: Retention{IgnoreCursors: true}}
	l := mustOpen(t, dir, o)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	appendRecs(t, l, 10)
	noErr(t, l.Flush(ctx))
	slow, err := OpenReader(dir, 1, nil)
	noErr(t, err)
	defer slow.Close()
	fast, err := OpenReader(dir, 1, nil)
	noErr(t, err)
	defer fast.Close()
	noErr(t, followTo(ctx, slow, 10))
	noErr(t, followTo(ctx, fast, 10))
	for l.Stats().SegmentsCreated < 6 {
		appendRecs(t, l, 100)
	}
	noErr(t, l.Flush(ctx))
	noErr(t, followTo(ctx, slow, 11)) // still in the first segment
	// Into the third segment, which was sealed before the Reader got
	// there: it is mapped.
	segs, _, _, err := listSegments(slow.fsys, dir)
	noErr(t, err)
	for fast.cur.firstSeq < segs[2].firstSeq {
		noErr(t, followTo(ctx, fast, fast.Seq()+1))
	}
	if fast.ls.m == nil {
		t.Fatalf("follower in sealed segment %s reads it without a mapping", fast.ls.name)
	}
	noErr(t, followTo(ctx, fast, fast.Seq()+1))
	cut := segs[3].firstSeq
	noErr(t, l.TruncateFront(cut))
	if got := l.FirstSeq(); got != cut {
		t.Fatalf("FirstSeq %d after TruncateFront(%d)", got, cut)
	}
	// Both finish their deleted segment, and fast goes on past the cut.
	noErr(t, followTo(ctx, fast, cut+5))
	err = followTo(ctx, slow, cut)
	var te *TruncatedError
	if !errors.As(err, &te) || te.First != cut || te.Seq != segs[1].firstSeq {
		t.Fatalf("follower behind the cut: %v, want a *TruncatedError at %d naming first %d", err, segs[1].firstSeq, cut)
	}
	if slow.Seq() != segs[1].firstSeq-1 {
		t.Fatalf("follower behind the cut stopped at %d, want the end of its segment %d", slow.Seq(), segs[1].firstSeq-1)
	}
	if err := slow.Wait(ctx); !errors.As(err, &te) {
		t.Fatalf("Wait after the error: %v", err)
	}
}

// TestFollowEmptyLog: a follower of a directory with no segment yet
// starts at the first record once a writer creates the log.
func TestFollowEmptyLog(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenReader(dir, 0, nil)
	noErr(t, err)
	defer r.Close()
	if r.Next() {
		t.Fatal("a record in an empty directory")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	short, cancel2 := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel2()
	if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty directory: %v", err)
	}
	l := mustOpen(t, dir, nil)
	defer l.Close()
	appendRecs(t, l, 3)
	noErr(t, l.Flush(ctx))
	noErr(t, followTo(ctx, r, 3))
}

// TestFollowDamage: a frame that does not decode in the active segment
// is the end of what was written so far, unless the segment's durable
// mark covers it: then it is a *CorruptionError naming segment and
// offset, never a silent stop.
func TestFollowDamage(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, nil)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	appendRecs(t, l, 5)
	noErr(t, l.Sync(ctx))
	r, err := OpenReader(dir, 1, nil)
	noErr(t, err)
	defer r.Close()
	noErr(t, followTo(ctx, r, 5))
	seg, off := r.Position()
	off += int64(len(r.Record()) + 16)
	if r.Next() || r.Err() != nil {
		t.Fatalf("Next at the end: %v", r.Err())
	}
	short, cancel2 := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel2()
	if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait at the end: %v", err)
	}
	appendRecs(t, l, 2)
	noErr(t, l.Sync(ctx))
	appendRecs(t, l, 1)
	noErr(t, l.Sync(ctx)) // the second sync writes the mark of the first
	f, err := os.OpenFile(filepath.Join(dir, seg), os.O_RDWR, 0)
	noErr(t, err)
	_, err = f.WriteAt([]byte{0xff}, off+20) // in record 6's payload
	noErr(t, f.Close())
	noErr(t, err)
	noErr(t, r.Wait(ctx))
	if r.Next() {
		t.Fatalf("damaged record %d returned", r.Seq())
	}
	var ce *CorruptionError
	if !errors.As(r.Err(), &ce) || ce.Segment != seg || ce.Offset != off {
		t.Fatalf("damage under the durable mark: %v, want a *CorruptionError at %s offset %d", r.Err(), seg, off)
	}
}

// BenchmarkFollowLatency measures the time from Append in a writer
// process to the record being returned by Next in a follower in this
// process (OpenReader, Wait): the writer stamps the wall clock just before
// Append and flushes; the follower asks for the next record only after it
// saw the last one, so no queue builds up. Reported as p50/p99/p99.9 in
// µs. Every record is checked in order.
func BenchmarkFollowLatency(b *testing.B) {
	runFollowChild()
	dir := b.TempDir()
	l, err := Open(dir, nil)
	noErr(b, err)
	noErr(b, l.Close())
	r, err := OpenReader(dir, 1, nil)
	noErr(b, err)
	defer r.Close()
	cmd := startFollowChild(b, "BenchmarkFollowLatency", "ping", dir, 0)
	in, err := cmd.StdinPipe()
	noErr(b, err)
	noErr(b, cmd.Start())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := in.Write([]byte{1}); err != nil {
			b.Fatal(err)
		}
		for !r.Next() {
			noErr(b, r.Err())
			noErr(b, r.Wait(ctx))
		}
		now := time.Now()
		if r.Seq() != uint64(i+1) || len(r.Record()) != 128 {
			b.Fatalf("record %d: seq %d, %d bytes", i+1, r.Seq(), len(r.Record()))
		}
		lat = append(lat, now.Sub(time.Unix(0, int64(binary.LittleEndian.Uint64(r.Record())))))
	}
	b.StopTimer()
	noErr(b, in.Close())
	noErr(b, cmd.Wait())
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(q(0.999), "p99.9-µs")
}

// TestFollowerWaitAllocs: a follower at the end of what the writer wrote
// (zeros after the last frame) waits and reads the next record without
// allocating, once its segment is open.
func TestFollowerWaitAllocs(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{Sync: SyncNever})
	defer l.Close()
	appendRecs(t, l, 10)
	ctx := context.Background()
	noErr(t, l.Flush(ctx))
	r, err := OpenReader(dir, 0, nil)
	noErr(t, err)
	defer r.Close()
	for r.Next() {
	}
	p := testPayload(0, 0, 64)
	step := func() {
		if r.Next() { // at the zeros past the last frame: nothing yet
			panic("a record before the append")
		}
		if _, err := l.Append(p); err != nil {
			panic(err)
		}
		if err := l.Flush(ctx); err != nil {
			panic(err)
		}
		for !r.Next() {
			if err := r.Err(); err != nil {
				panic(err)
			}
			if r.Next() {
				break
			}
			if err := r.Wait(ctx); err != nil {
				panic(err)
			}
		}
	}
	step() // the first wait starts following: the watcher, the table
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Fatalf("a follower's wait and read allocate %v times", a)
	}
}
