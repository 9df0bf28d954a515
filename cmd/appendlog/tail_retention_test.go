package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// gateWriter blocks its first Write until open is closed, and tells
// blocked when that Write starts; it keeps everything written.
type gateWriter struct {
	blocked, open chan struct{}
	once          sync.Once
	mu            sync.Mutex
	buf           bytes.Buffer
}

func (w *gateWriter) Write(p []byte) (int, error) {
	w.once.Do(func() {
		close(w.blocked)
		<-w.open
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *gateWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestTailFollowPastRetention: tail -f, held up (a slow terminal) while
// retention deletes the segments ahead of it, says which records it could
// not print and goes on from the first record left, following the log, as
// tail -F goes on after logrotate, instead of exiting; with --from or with
// the default -n.
func TestTailFollowPastRetention(t *testing.T) {
	for _, explicit := range []bool{true, false} {
		t.Run(fmt.Sprintf("from=%v", explicit), func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "log")
			const n = 50000
			smallLog(t, d, n)
			segs := segments(t, d)
			l, err := wal.Open(d, &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			f := &tailFlags{follow: true, lines: n}
			from, until := uint64(1), uint64(0)
			if !explicit {
				if from, until, err = lastRecords(d, f.lines); err != nil {
					t.Fatal(err)
				}
			}
			out := &gateWriter{blocked: make(chan struct{}), open: make(chan struct{})}
			var stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- runFollow(ctx, out, &stderr, d, from, until, explicit, f) }()
			<-out.blocked // tail is in the first segment, its output held up
			cut := firstSeq(t, segs[len(segs)-2])
			if err := l.TruncateFront(cut); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append([]byte(fmt.Sprintf("record %d", n))); err != nil {
				t.Fatal(err)
			}
			if err := l.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			close(out.open)
			last := fmt.Sprintf("%d\trecord %d\n", n+1, n)
			deadline := time.Now().Add(time.Minute)
			for !strings.HasSuffix(out.String(), last) {
				select {
				case err := <-done:
					t.Fatalf("tail -f returned %v before the record appended after the cut\nstdout ends %q\nstderr: %s", err, tailOf(out.String()), stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("tail -f did not print the record appended after the cut\nstdout ends %q", tailOf(out.String()))
				}
				time.Sleep(time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("tail -f interrupted: %v", err)
			}
			// The records printed: 1 up to some seq in the segments
			// deleted (the ones tail had read before the cut), then the
			// rest from cut on, each once, in order.
			got := out.String()
			k := strings.Index(got, fmt.Sprintf("\n%d\trecord %d\n", cut, cut-1))
			if k < 0 {
				t.Fatalf("record %d, the first left, not printed; stderr: %s", cut, stderr.String())
			}
			before := got[:k+1]
			printed := uint64(strings.Count(before, "\n"))
			if before != walLines(1, printed, nil) {
				t.Fatalf("records before the cut are not 1..%d in order", printed)
			}
			if got[k+1:] != walLines(cut, n+1, nil) {
				t.Fatalf("records from the cut on are not %d..%d in order", cut, n+1)
			}
			want := seqRange(printed+1, cut) + " deleted by retention before tail printed"
			if printed+1 < cut && !strings.Contains(stderr.String(), want) {
				t.Fatalf("stderr %q, want %q", stderr.String(), want)
			}
		})
	}
}

// tailOf returns the last few hundred bytes of s.
func tailOf(s string) string { return s[max(0, len(s)-300):] }

// TestTailStartDeletedSinceChosen: the start tail chose itself (the last
// -n records), deleted by retention before tail opened the log, is named
// on stderr and tail starts at the first record left; a start the user
// gave (--from) is an error naming the first record left.
func TestTailStartDeletedSinceChosen(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	const n = 10000
	smallLog(t, d, n)
	segs := segments(t, d)
	from, _, err := lastRecords(d, n)
	if err != nil {
		t.Fatal(err)
	}
	cut := firstSeq(t, segs[2])
	l, err := wal.Open(d, &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFront(cut); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	r, err := openFrom(&stderr, d, from, false)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Next() || r.Seq() != cut {
		t.Fatalf("the Reader starts at %d (%v), want %d", r.Seq(), r.Err(), cut)
	}
	r.Close()
	if want := seqRange(from, cut) + " deleted by retention before tail printed them; going on from record"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
	if _, err := openFrom(&stderr, d, from, true); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the first record available is %d", cut)) {
		t.Fatalf("an explicit start below the first record: %v", err)
	}
}
