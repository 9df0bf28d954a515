package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/wal"
)

// walLines returns the lines tail prints for the records first..last of
// a log smallLog wrote (record i has seq i+1), skipping seqs in skip.
func walLines(first, last uint64, skip func(uint64) bool) string {
	var b strings.Builder
	for s := first; s <= last; s++ {
		if skip != nil && skip(s) {
			continue
		}
		fmt.Fprintf(&b, "%d\trecord %d\n", s, s-1)
	}
	return b.String()
}

// TestTailLastLines: tail prints the last -n records (10 by default) of
// a log directory, as tail(1) prints the last lines of a file; -n 0 prints
// nothing, -n past the log's start prints it all, and --from with -n is a
// usage error.
func TestTailLastLines(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 50)
	empty := filepath.Join(t.TempDir(), "empty")
	smallLog(t, empty, 0)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{d}, walLines(41, 50, nil)},
		{[]string{"-n", "3", d}, walLines(48, 50, nil)},
		{[]string{"--lines", "1", d}, walLines(50, 50, nil)},
		{[]string{"-n", "0", d}, ""},
		{[]string{"-n", "50", d}, walLines(1, 50, nil)},
		{[]string{"-n", "1000000", d}, walLines(1, 50, nil)},
		{[]string{"--from", "49", d}, walLines(49, 50, nil)},
		{[]string{empty}, ""},
		{[]string{"-n", "0", empty}, ""},
	} {
		r := runInProcess(append([]string{"tail"}, tc.args...)...)
		expect(t, r, exitOK)
		if r.stdout != tc.want || r.stderr != "" {
			t.Errorf("tail %s: printed\n%s\nwant\n%s", strings.Join(tc.args, " "), r, tc.want)
		}
	}
	expect(t, runInProcess("tail", "-n", "3", "--from", "5", d), exitUsage, "--from and -n (--lines)")
	expect(t, runInProcess("tail", "-f", "--lines", "0", "--from", "5", d), exitUsage, "--from and -n (--lines)")
	expect(t, runInProcess("tail", "-n", "-1", d), exitUsage, "-n")
	expect(t, runInProcess("tail", "-n", "x", d), exitUsage, "-n")
}

// TestTailLastLinesReadsOnlyTheEnd: the last records of a log of many
// segments are found without reading the log from its start: a damaged
// first segment, which dump reports, does not stop tail -n, while -n
// reaching into it does.
func TestTailLastLinesReadsOnlyTheEnd(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	const n = 20000
	smallLog(t, d, n)
	segs := segments(t, d)
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	// Across segment boundaries: the last three segments and a bit.
	k := n - firstSeq(t, segs[len(segs)-3]) + 1 + 7
	r := runInProcess("tail", "-n", strconv.FormatUint(k, 10), d)
	expect(t, r, exitOK)
	if want := walLines(n-k+1, n, nil); r.stdout != want {
		t.Fatalf("tail -n %d printed %d bytes, want %d\n%s", k, len(r.stdout), len(want), r.stderr)
	}
	flipByte(t, filepath.Join(d, segs[0]), frame.FileHeaderSize+frame.HeaderSize+2)
	expect(t, runInProcess("dump", "--count", d), exitFailure, segs[0])
	r = runInProcess("tail", "-n", "5", d)
	expect(t, r, exitOK)
	if want := walLines(n-4, n, nil); r.stdout != want {
		t.Fatalf("tail -n 5 of a log damaged at its start:\n%s", r)
	}
	expect(t, runInProcess("tail", "-n", strconv.Itoa(n), d), exitFailure, d, segs[0], "checksum")
}

// TestTailLastLinesRetention: a log whose first segments retention
// deleted (its first seq above 1) gives its last records, and -n past
// its start prints what is left.
func TestTailLastLinesRetention(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	const n = 10000
	smallLog(t, d, n)
	segs := segments(t, d)
	first := firstSeq(t, segs[2])
	l, err := wal.Open(d, &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFront(first); err != nil {
		t.Fatal(err)
	}
	if got := l.FirstSeq(); got != first {
		t.Fatalf("FirstSeq %d after TruncateFront(%d)", got, first)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := runInProcess("tail", "-n", "4", d)
	expect(t, r, exitOK)
	if want := walLines(n-3, n, nil); r.stdout != want {
		t.Fatalf("tail -n 4:\n%s", r)
	}
	r = runInProcess("tail", "-n", strconv.Itoa(n), d)
	expect(t, r, exitOK)
	if want := walLines(first, n, nil); r.stdout != want {
		t.Fatalf("tail -n %d printed %d bytes, want %d (seqs %d..%d)\n%s", n, len(r.stdout), len(want), first, n, r.stderr)
	}
	// Without --from, dump starts at the first record left; a --from
	// below it names what was deleted instead of starting later unsaid.
	r = runInProcess("dump", d)
	expect(t, r, exitOK)
	if want := walLines(first, n, nil); r.stdout != want {
		t.Fatalf("dump printed %d bytes, want %d (seqs %d..%d)\n%s", len(r.stdout), len(want), first, n, r.stderr)
	}
	deleted := fmt.Sprintf("record 1 was deleted by retention; the first record available is %d", first)
	for _, args := range [][]string{{"dump", "--from", "1", d}, {"dump", "--count", "--from", "1", d}, {"tail", "--from", "1", d}, {"tail", "-f", "--from", "1", d}} {
		r := runInProcess(args...)
		expect(t, r, exitFailure, deleted)
		if r.stdout != "" {
			t.Errorf("%s printed %q", strings.Join(args, " "), r.stdout)
		}
	}
}

// TestTailLastLinesGap: the last records of a log with a gap recorded by
// repair --force are the records present, the gap not counted; the gap
// is named on stderr when it falls among them, not when it is before.
func TestTailLastLinesGap(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	const n = 10000
	smallLog(t, d, n)
	segs := segments(t, d)
	lost := segs[len(segs)-2]
	gf, ge := firstSeq(t, lost), firstSeq(t, segs[len(segs)-1]) // seqs gf..ge-1 lost
	rm(t, filepath.Join(d, lost))
	if _, err := wal.Repair(d, true, nil); err != nil {
		t.Fatal(err)
	}
	inGap := func(s uint64) bool { return s >= gf && s < ge }
	after := n - ge + 1 // records after the gap

	r := runInProcess("tail", "-n", strconv.FormatUint(after, 10), d)
	expect(t, r, exitOK)
	if r.stdout != walLines(ge, n, nil) || strings.Contains(r.stderr, "gap") {
		t.Fatalf("tail -n %d (the records after the gap):\n%s", after, r)
	}
	r = runInProcess("tail", "-n", strconv.FormatUint(after+3, 10), d)
	expect(t, r, exitOK, fmt.Sprintf("gap: records %d..%d", gf, ge-1))
	if want := walLines(gf-3, n, inGap); r.stdout != want {
		t.Fatalf("tail -n %d (across the gap) printed %d bytes, want %d\n%s", after+3, len(r.stdout), len(want), r.stderr)
	}
	r = runInProcess("tail", "-n", strconv.Itoa(n), d)
	expect(t, r, exitOK, "gap")
	if want := walLines(1, n, inGap); r.stdout != want {
		t.Fatalf("tail -n %d printed %d bytes, want %d\n%s", n, len(r.stdout), len(want), r.stderr)
	}
}

// TestTailLastLinesTornTail: a log ending in a torn tail gives its last
// whole records, and tail notes the torn tail on stderr.
func TestTailLastLinesTornTail(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 30)
	seg, end := dataEnd(t, d)
	fr := make([]byte, frame.Size(100))
	frame.Encode(fr, 31, bytes.Repeat([]byte{'x'}, 100))
	writeAt(t, filepath.Join(d, seg), fr[:40], end)
	r := runInProcess("tail", "-n", "2", d)
	expect(t, r, exitOK, "torn tail")
	if r.stdout != walLines(29, 30, nil) {
		t.Fatalf("tail -n 2 of a torn log:\n%s", r)
	}
}

// TestTailShmLastLines: tail FILE prints the last -n committed records of
// a shared-memory log spread over several files.
func TestTailShmLastLines(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	want := shmAppend(t, file, 0, 300)
	join := func(l []string) string {
		if len(l) == 0 {
			return ""
		}
		return strings.Join(l, "\n") + "\n"
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{file}, join(want[290:])},
		{[]string{"-n", "7", file}, join(want[293:])},
		{[]string{"-n", "0", file}, ""},
		{[]string{"-n", "300", file}, join(want)},
		{[]string{"-n", "5000", file}, join(want)},
		{[]string{"--from", "0", file}, join(want)},
	} {
		r := cli(t, append([]string{"tail"}, tc.args...)...)
		expect(t, r, exitOK)
		if r.stdout != tc.want {
			t.Errorf("tail %s printed %d bytes, want %d\n%s", strings.Join(tc.args, " "), len(r.stdout), len(tc.want), r.stderr)
		}
	}
	expect(t, runInProcess("tail", "-n", "3", "--from", "1", file), exitUsage, "--from and -n (--lines)")
	expect(t, runInProcess("tail", "--from", "5", file), exitUsage, "--from")
}

// tailProc is an "appendlog tail" process whose stdout lines arrive on
// lines.
type tailProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	ctx    context.Context
}

func startTail(t *testing.T, ctx context.Context, args ...string) *tailProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, cliPath, append([]string{"tail"}, args...)...)
	cmd.Env = cliEnv()
	p := &tailProc{cmd: cmd, lines: make(chan string, 1<<16), stderr: &strings.Builder{}, ctx: ctx}
	cmd.Stderr = p.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p
}

// next returns the next line, failing the test if none comes.
func (p *tailProc) next(t *testing.T) string {
	t.Helper()
	select {
	case got, ok := <-p.lines:
		if !ok {
			t.Fatalf("tail ended; stderr:\n%s", p.stderr.String())
		}
		return got
	case <-p.ctx.Done():
		t.Fatalf("tail printed nothing more; stderr:\n%s", p.stderr.String())
	}
	return ""
}

// stop interrupts the process, which must print nothing more and exit 0.
func (p *tailProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for l := range p.lines {
		t.Errorf("tail printed %q that nobody appended", l)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("tail -f after SIGINT: %v; stderr:\n%s", err, p.stderr.String())
	}
}

// TestTailFollowLastLines: tail -f -n N prints the last N records, then
// those appended after; -n 0 only those appended after; the default is
// the last 10.
func TestTailFollowLastLines(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		first uint64 // first seq printed
	}{
		{[]string{"-f", "-n", "3"}, 98},
		{[]string{"-f"}, 91},
		{[]string{"-f", "-n", "0"}, 101},
		{[]string{"-f", "--lines", "500"}, 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "log")
			smallLog(t, d, 100)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := startTail(t, ctx, append(tc.args, d)...)
			for s := tc.first; s <= 100; s++ {
				if got, want := p.next(t), fmt.Sprintf("%d\trecord %d", s, s-1); got != want {
					t.Fatalf("tail printed %q, want %q", got, want)
				}
			}
			l, err := wal.Open(d, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			i := 0
			if tc.first > 100 {
				// Nothing printed yet says when tail has found the end:
				// append until it prints one of the new records, which
				// must be followed by every record after it.
				for ; ; i++ {
					seq, err := l.Append([]byte(fmt.Sprintf("new %d", i)))
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					var got string
					select {
					case got = <-p.lines:
					case <-time.After(100 * time.Millisecond):
						continue
					}
					s, _ := strconv.ParseUint(strings.Split(got, "\t")[0], 10, 64)
					if s < 101 || s > seq || got != fmt.Sprintf("%d\tnew %d", s, s-101) {
						t.Fatalf("tail printed %q first, after appending up to seq %d", got, seq)
					}
					for s < seq {
						s++
						if got, want := p.next(t), fmt.Sprintf("%d\tnew %d", s, s-101); got != want {
							t.Fatalf("tail printed %q, want %q", got, want)
						}
					}
					i++
					break
				}
			}
			for end := i + 3; i < end; i++ {
				seq, err := l.Append([]byte(fmt.Sprintf("new %d", i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if got, want := p.next(t), fmt.Sprintf("%d\tnew %d", seq, i); got != want {
					t.Fatalf("tail printed %q, want %q", got, want)
				}
			}
			p.stop(t)
		})
	}
}

// TestTailFollowLastLinesWhileAppending starts tail -f -n 5 on a log
// another writer keeps appending to, through segment rotations: from the
// first line on, tail must print every record once, in order, with no
// gap between the last records it found and those it followed.
func TestTailFollowLastLinesWhileAppending(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 5000)
	l, err := wal.Open(d, &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		lastSeq atomic.Uint64
		werr    error
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			seq, err := l.Append([]byte(fmt.Sprintf("record %d", 5000+i)))
			if err == nil && i%10 == 0 {
				err = l.Flush(ctx)
			}
			if i%50 == 0 {
				time.Sleep(time.Millisecond) // let tail keep up
			}
			if err != nil {
				werr = err
				return
			}
			lastSeq.Store(seq)
		}
	})
	p := startTail(t, ctx, "-f", "-n", "5", d)
	check := func(line string) uint64 {
		t.Helper()
		s, _, _ := strings.Cut(line, "\t")
		seq, err := strconv.ParseUint(s, 10, 64)
		if err != nil || line != fmt.Sprintf("%d\trecord %d", seq, seq-1) {
			t.Fatalf("tail printed %q", line)
		}
		return seq
	}
	prev := check(p.next(t))
	if prev < 5000-4 {
		t.Fatalf("tail -n 5 began at seq %d, before the log's last 5 records", prev)
	}
	t.Logf("tail -n 5 began at seq %d; the writer had appended up to seq %d", prev, lastSeq.Load())
	for range 5000 { // records appended while tail -f started
		seq := check(p.next(t))
		if seq != prev+1 {
			t.Fatalf("tail printed seq %d after %d", seq, prev)
		}
		prev = seq
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for prev < lastSeq.Load() {
		seq := check(p.next(t))
		if seq != prev+1 {
			t.Fatalf("tail printed seq %d after %d", seq, prev)
		}
		prev = seq
	}
	if l.Stats().SegmentsCreated < 2 {
		t.Errorf("the writer created only %d segments while tail -f started", l.Stats().SegmentsCreated)
	}
	p.stop(t)
}

// TestTailShmFollowLastLines: tail -f -n N FILE prints the last N records
// of a shared-memory log, then those appended after, each once.
func TestTailShmFollowLastLines(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shm")
	want := shmAppend(t, file, 0, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startTail(t, ctx, "-f", "-n", "4", file)
	for _, w := range want[96:] {
		if got := p.next(t); got != w {
			t.Fatalf("tail printed %q, want %q", got, w)
		}
	}
	for _, w := range shmAppend(t, file, 100, 50) {
		if got := p.next(t); got != w {
			t.Fatalf("tail printed %q, want %q", got, w)
		}
	}
	p.stop(t)
}
