package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// removeLogFiles removes the files of the log in dir, as `rm DIR/*` does:
// segments, index files and the LOCK file; the directory (and its
// cursors subdirectory) stays.
func removeLogFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	noErr(t, err)
	for _, e := range ents {
		if !e.IsDir() {
			noErr(t, os.Remove(filepath.Join(dir, e.Name())))
		}
	}
}

// TestFollowSegmentsRemoved: a follower waiting at the end of the segment
// it has open stops with an error naming the segment when the log's files
// are removed while the directory stays, or removed and a new log created
// in their place, where it waited for ever (its open file reads on as it
// was). A follower that finds no segment at all says the files were
// removed, not that retention deleted records before record 0.
func TestFollowSegmentsRemoved(t *testing.T) {
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	cases := []struct {
		name string
		// records written before the follower reaches the end
		n int
		// writerOpen keeps the writer open while the files are removed.
		writerOpen bool
		// recreate creates a new log of that many records in the directory
		// after the removal (0: none).
		recreate int
		// beforeWait removes the files before the follower's first Wait.
		beforeWait bool
	}{
		{name: "rm/writer-open", n: 10, writerOpen: true},
		{name: "rm/writer-closed", n: 10},
		{name: "rm/several-segments", n: 3000},
		{name: "recreate/same-segment", n: 10, recreate: 3},
		{name: "recreate/earlier-segment", n: 3000, recreate: 3},
		{name: "rm/before-wait", n: 10, beforeWait: true},
		{name: "recreate/before-wait", n: 10, recreate: 3, beforeWait: true},
		{name: "recreate/before-wait-longer", n: 10, recreate: 30, beforeWait: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, o)
			appendN(t, l, tc.n)
			noErr(t, l.Flush(context.Background()))
			if !tc.writerOpen {
				noErr(t, l.Close())
			} else {
				defer l.Close() // its files are gone: what Close says does not matter
			}
			r, err := OpenReader(dir, 1, o)
			noErr(t, err)
			defer r.Close()
			got := 0
			for r.Next() {
				got++
			}
			noErr(t, r.Err())
			if got != tc.n {
				t.Fatalf("read %d records, want %d", got, tc.n)
			}
			seg, _ := r.Position()
			remove := func() {
				removeLogFiles(t, dir)
				if tc.recreate > 0 {
					l2 := mustOpen(t, dir, o)
					appendN(t, l2, tc.recreate)
					noErr(t, l2.Close())
				}
			}
			if tc.beforeWait {
				remove()
			} else {
				short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
				if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Wait at the end of a quiet log: %v", err)
				}
				cancelShort()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				for {
					if err := r.Wait(ctx); err != nil {
						errc <- err
						return
					}
					for r.Next() {
						got++
					}
					if err := r.Err(); err != nil {
						errc <- err
						return
					}
				}
			}()
			if !tc.beforeWait {
				remove()
			}
			err = <-errc
			if got != tc.n {
				t.Fatalf("read %d records in all, want %d (none of the new log's)", got, tc.n)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the follower waited on: %v", err)
			}
			if _, ok := errors.AsType[*TruncatedError](err); ok {
				t.Fatalf("a *TruncatedError for removed files: %v", err)
			}
			if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "removed") {
				t.Fatalf("%v does not name %s and the removal", err, dir)
			}
			if tc.recreate == 0 && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%v does not wrap fs.ErrNotExist", err)
			}
			if !tc.beforeWait && !strings.Contains(err.Error(), seg) {
				t.Fatalf("%v does not name segment %s", err, seg)
			}
			t.Logf("%v", err)
			if werr := r.Wait(context.Background()); werr == nil {
				t.Fatal("Wait after the stop returned nil")
			}
		})
	}
}

// TestFollowRetentionNotRemoval: retention deleting the segment a follower
// waits at the end of (after the writer sealed it and named the next) is
// not taken for the log's files removed: the follower goes on into the
// next segment. With a poll interval short enough that every wait looks.
func TestFollowRetentionNotRemoval(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	l := mustOpen(t, dir, o)
	defer l.Close()
	appendN(t, l, 10)
	noErr(t, l.Flush(context.Background()))
	r, err := OpenReader(dir, 1, o)
	noErr(t, err)
	defer r.Close()
	for r.Next() {
	}
	noErr(t, r.Err())
	r.followPoll = time.Millisecond
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait at the end of a quiet log: %v", err)
	}
	cancelShort()
	// Rotate past the follower's segment, and delete it.
	for l.Stats().SegmentsCreated < 3 {
		appendN(t, l, 100)
		noErr(t, l.Flush(context.Background()))
	}
	noErr(t, l.Sync(context.Background()))
	noErr(t, l.TruncateFront(l.NextSeq()-1))
	want := l.NextSeq() - 1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for last := uint64(10); last < want; {
		if err := r.Wait(ctx); err != nil {
			t.Fatalf("after record %d of %d: %v", last, want, err)
		}
		for r.Next() {
			if r.Seq() != last+1 {
				t.Fatalf("record %d after %d", r.Seq(), last)
			}
			last = r.Seq()
		}
		if err := r.Err(); err != nil {
			// The segments between were deleted too: a *TruncatedError
			// naming the first left is right, a removal is not.
			if _, ok := errors.AsType[*TruncatedError](err); !ok {
				t.Fatalf("after record %d: %v", last, err)
			}
			return
		}
	}
}

// TestFollowEmptyLogFrontDeleted: a follower that began on an empty log
// at record 1 and first finds the log after retention deleted its front
// reports a *TruncatedError naming the first record left, as OpenReader
// does for a from below it, instead of starting there silently; from 0
// (the log's first record) starts there.
func TestFollowEmptyLogFrontDeleted(t *testing.T) {
	for _, from := range []uint64{1, 0} {
		dir := t.TempDir()
		o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
		r, err := OpenReader(dir, from, o)
		noErr(t, err)
		defer r.Close()
		if r.Next() {
			t.Fatal("a record in an empty log")
		}
		short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
		if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait on an empty log: %v", err)
		}
		cancelShort()
		l := mustOpen(t, dir, o)
		for l.Stats().SegmentsCreated < 3 {
			appendN(t, l, 100)
			noErr(t, l.Flush(context.Background()))
		}
		noErr(t, l.Sync(context.Background()))
		noErr(t, l.TruncateFront(l.NextSeq()-1))
		first := l.FirstSeq()
		noErr(t, l.Close())
		if first <= 1 {
			t.Fatalf("nothing deleted: first %d", first)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		noErr(t, r.Wait(ctx))
		got := r.Next()
		te, ok := errors.AsType[*TruncatedError](r.Err())
		switch {
		case from == 0 && (!got || r.Seq() != first):
			t.Fatalf("from 0: Next %v at %d (%v), want record %d", got, r.Seq(), r.Err(), first)
		case from == 1 && (got || !ok || te.Seq != 1 || te.First != first):
			t.Fatalf("from 1: Next %v at %d, Err %v; want a *TruncatedError{Seq: 1, First: %d}", got, r.Seq(), r.Err(), first)
		}
	}
}

// TestFollowFromPastEndFrontDeleted: a follower that began past the end of
// the log (from ahead of the last record) and whose segment, and the next,
// retention deletes while it waits, goes on to record from, which is still
// there, instead of stopping with a *TruncatedError for records it never
// asked for; when record from was deleted too, the *TruncatedError names
// from.
func TestFollowFromPastEndFrontDeleted(t *testing.T) {
	for _, past := range []bool{false, true} {
		t.Run(fmt.Sprintf("from-deleted=%v", past), func(t *testing.T) { followFromPastEnd(t, past) })
	}
}

func followFromPastEnd(t *testing.T, past bool) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	l := mustOpen(t, dir, o)
	defer l.Close()
	appendN(t, l, 10)
	noErr(t, l.Flush(context.Background()))
	const from = 6000
	r, err := OpenReader(dir, from, o)
	noErr(t, err)
	defer r.Close()
	if r.Next() {
		t.Fatalf("record %d before from", r.Seq())
	}
	noErr(t, r.Err())
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait at the end of a quiet log: %v", err)
	}
	cancelShort()
	segs := func() []segInfo {
		s, _, _, err := listSegments(vfs.OS(), dir)
		noErr(t, err)
		return s
	}
	for l.NextSeq() < 3*from {
		appendN(t, l, 100)
		noErr(t, l.Flush(context.Background()))
	}
	noErr(t, l.Sync(context.Background()))
	firstEnd := segs()[1].firstSeq // the end of the follower's segment
	cut := uint64(from)
	if past {
		cut = 2 * from
	}
	noErr(t, l.TruncateFront(cut))
	first := l.FirstSeq()
	if first <= firstEnd || (first > from) != past {
		t.Fatalf("first record left %d: want past %d, past %d: %v", first, firstEnd, from, past)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if r.Next() {
			if past || r.Seq() != from {
				t.Fatalf("first record %d, want %d", r.Seq(), from)
			}
			return
		}
		if err := r.Err(); err != nil {
			te, ok := errors.AsType[*TruncatedError](err)
			if !past || !ok || te.Seq != from || te.First != first {
				t.Fatalf("before record %d: %v", from, err)
			}
			return
		}
		noErr(t, r.Wait(ctx))
	}
}

// TestFollowTableSegmentGone: a follower's table that lists a segment
// whose file is gone when a Reader opens it says the log's files were
// removed when no later segment is there, and names the first record
// left when retention deleted it.
func TestFollowTableSegmentGone(t *testing.T) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	l := mustOpen(t, dir, o)
	for l.Stats().SegmentsCreated < 3 {
		appendN(t, l, 100)
		noErr(t, l.Flush(context.Background()))
	}
	noErr(t, l.Close())
	tab := &segTable{fsys: vfs.OS(), dir: dir, maxRec: o.withDefaults().MaxRecordSize, sealedOnly: true}
	defer tab.close()
	noErr(t, tab.refresh())
	segs, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	last := segs[len(segs)-1]
	noErr(t, os.Remove(filepath.Join(dir, last.name)))
	_, err = tab.acquire(last.firstSeq)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "removed") || !strings.Contains(err.Error(), last.name) {
		t.Fatalf("the last segment removed: %v", err)
	}
	noErr(t, os.Remove(filepath.Join(dir, segs[0].name)))
	_, err = tab.acquire(segs[0].firstSeq)
	if te, ok := errors.AsType[*TruncatedError](err); !ok || te.First != segs[1].firstSeq {
		t.Fatalf("the first segment deleted: %v", err)
	}
}
