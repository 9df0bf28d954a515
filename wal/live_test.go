package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// liveFS runs a test on the OS file system (Readers map segments) and on
// the in-memory one (Readers fall back to ReadAt).
func liveFS(t *testing.T, fn func(t *testing.T, dir string, o Options)) {
	t.Run("fs=os", func(t *testing.T) { fn(t, t.TempDir(), Options{}) })
	t.Run("fs=mem", func(t *testing.T) { fn(t, "/log", WithFS(Options{}, vfs.NewMem())) })
}

// follow reads records from r until it has want of them, waiting for
// more, and checks that they come in sequence order from first on, each
// intact and in its writer's order. It returns the records' sequence
// numbers by writer.
func follow(t *testing.T, r *Reader, first uint64, want int) map[int][]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[int][]int{}
	next := first
	for n := 0; n < want; {
		if !r.Next() {
			if err := r.Err(); err != nil {
				t.Fatalf("after %d records: %v", n, err)
			}
			if err := r.Wait(ctx); err != nil {
				t.Fatalf("wait after %d records (next %d): %v", n, next, err)
			}
			continue
		}
		if r.Seq() != next {
			t.Fatalf("record %d: seq %d, want %d", n, r.Seq(), next)
		}
		g, i, err := parsePayload(r.Record())
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq(), err)
		}
		if s := seen[g]; len(s) > 0 && s[len(s)-1] >= i {
			t.Fatalf("seq %d: writer %d counter %d after %d", r.Seq(), g, i, s[len(s)-1])
		}
		seen[g] = append(seen[g], i)
		next++
		n++
	}
	return seen
}

func TestLiveReaderFollowsAppendersThroughRotationAndTruncateFront(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		o.SegmentSize, o.BufferSize = 64<<10, 128<<10
		o.Retention.IgnoreCursors = true
		l := mustOpen(t, dir, &o)
		const writers, per = 8, 1500
		const readers = 3
		var wg sync.WaitGroup
		results := make([]map[int][]int, readers)
		for k := range readers {
			r, err := l.NewReader(0, nil)
			noErr(t, err)
			wg.Go(func() {
				defer r.Close()
				results[k] = follow(t, r, 1, writers*per)
			})
		}
		var aw sync.WaitGroup
		for g := range writers {
			aw.Go(func() {
				for i := range per {
					if _, err := l.Append(testPayload(g, i, 40+i%200)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		aw.Wait()
		wg.Wait()
		if l.Stats().SegmentsCreated < 3 {
			t.Fatalf("only %d rotations: the test must cross segments", l.Stats().SegmentsCreated)
		}
		for k, seen := range results {
			for g := range writers {
				if len(seen[g]) != per {
					t.Fatalf("reader %d: writer %d: %d records, want %d", k, g, len(seen[g]), per)
				}
			}
		}
		// Truncate below the middle; a reader from the start gets
		// ErrTruncated naming FirstSeq; one from FirstSeq reads to the end.
		mid := l.NextSeq() / 2
		noErr(t, l.TruncateFront(mid))
		first := l.FirstSeq()
		if first <= 1 || first > mid {
			t.Fatalf("FirstSeq %d after TruncateFront(%d)", first, mid)
		}
		_, err := l.NewReader(1, nil)
		var te *TruncatedError
		if !errors.As(err, &te) || !errors.Is(err, ErrTruncated) || te.First != first {
			t.Fatalf("reader below FirstSeq: %v, want a TruncatedError naming %d", err, first)
		}
		r, err := l.NewReader(mid, nil)
		noErr(t, err)
		follow(t, r, mid, int(l.NextSeq()-mid))
		noErr(t, r.Close())
		noErr(t, l.Close())
		// The deletion is on disk: a reopened log starts at first.
		l = mustOpen(t, dir, &o)
		if l.FirstSeq() != first {
			t.Fatalf("reopened FirstSeq %d, want %d", l.FirstSeq(), first)
		}
		noErr(t, l.Close())
	})
}

func TestLiveReaderSeek(t *testing.T) {
	liveFS(t, func(t *testing.T, dir string, o Options) {
		o.SegmentSize = 256 << 10
		l := mustOpen(t, dir, &o)
		defer l.Close()
		const n = 20000
		for i := range n {
			_, err := l.Append(testPayload(0, i, 40+i%100))
			noErr(t, err)
		}
		noErr(t, l.Flush(context.Background()))
		for _, from := range []uint64{1, 2, 777, 5000, 12345, n - 1, n} {
			t.Run(fmt.Sprint(from), func(t *testing.T) {
				r, err := l.NewReader(from, nil)
				noErr(t, err)
				defer r.Close()
				if !r.Next() || r.Seq() != from {
					t.Fatalf("first record %d (%v), want %d", r.Seq(), r.Err(), from)
				}
				if _, i, err := parsePayload(r.Record()); err != nil || i != int(from-1) {
					t.Fatalf("record %d holds counter %d (%v)", from, i, err)
				}
			})
		}
	})
}
