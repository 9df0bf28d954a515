package wal

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// TestRetentionMaxAgeQuietLog: on a log that seals nothing, MaxAge still
// deletes the sealed segments that expired (the ager, on the log's clock),
// and then the active segment idle for MaxAge, sealed on the flusher's
// timer with no write at all; the next write goes on in the new, empty
// segment.
func TestRetentionMaxAgeQuietLog(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	dir := t.TempDir()
	o := &Options{SegmentSize: 64 << 10, clock: fake, Retention: Retention{MaxAge: time.Hour}}
	l := mustOpen(t, dir, o)
	defer func() { l.Close() }()
	ctx := context.Background()
	appendRecs(t, l, 3000)
	noErr(t, l.Sync(ctx))
	segs, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	if len(segs) < 3 || l.FirstSeq() != 1 {
		t.Fatalf("%d segments, FirstSeq %d before the hour passed", len(segs), l.FirstSeq())
	}
	// Nothing is written from now on: only the ager and the flusher's
	// timer can delete. The sealed segments expired, and so did the
	// active one's records: the flusher seals it (TimedTick) and
	// retention deletes them all.
	end := l.NextSeq()
	// The seal and the deletion run on the flusher and the sealer (the
	// count after the files are gone).
	expireQuiet(t, fake, func() bool { return l.FirstSeq() == end && l.Stats().SegmentsDeleted == int64(len(segs)) },
		func() string {
			return fmt.Sprintf("FirstSeq %d of %d, %d segments deleted: expired records of a quiet log stay", l.FirstSeq(), end, l.Stats().SegmentsDeleted)
		})
	if n := l.Stats().SegmentsDeleted; n != int64(len(segs)) {
		t.Fatalf("%d segments deleted, want %d", n, len(segs))
	}
	// An empty active segment is left alone; the next write goes on.
	created := l.Stats().SegmentsCreated
	fake.Advance(2 * time.Hour)
	seq, err := l.Append(testPayload(1, 0, 100))
	noErr(t, err)
	noErr(t, l.Sync(ctx))
	if seq != end || l.Stats().SegmentsCreated != created {
		t.Fatalf("append after the expiry: seq %d (want %d), %d segments created (want %d)", seq, end, l.Stats().SegmentsCreated, created)
	}
	noErr(t, l.Close()) // joins the sealer, and so retention
	l = mustOpen(t, dir, o)
	if l.FirstSeq() != seq {
		t.Fatalf("FirstSeq %d after a write into an active segment idle for MaxAge, want the new record %d", l.FirstSeq(), seq)
	}
	r, err := l.NewReader(seq, nil)
	noErr(t, err)
	defer r.Close()
	if !r.Next() || r.Seq() != seq {
		t.Fatalf("record %d not readable: %v", seq, r.Err())
	}
}

// TestRetentionMaxAgeReopenedQuietLog: a log reopened and never written
// to still loses the records of its active segment MaxAge after the last
// of them was written (dated by the segment file's modification time):
// the flusher arms its timer for the seal when it starts.
func TestRetentionMaxAgeReopenedQuietLog(t *testing.T) {
	fake := clock.NewFake(time.Now())
	dir := t.TempDir()
	o := &Options{clock: fake, Retention: Retention{MaxAge: time.Hour}}
	l := mustOpen(t, dir, o)
	appendRecs(t, l, 10)
	noErr(t, l.Close())
	l = mustOpen(t, dir, o)
	defer func() { l.Close() }()
	end := l.NextSeq()
	if l.FirstSeq() != 1 {
		t.Fatalf("FirstSeq %d before the hour passed", l.FirstSeq())
	}
	expireQuiet(t, fake, func() bool { return l.FirstSeq() == end }, func() string {
		return fmt.Sprintf("FirstSeq %d of %d: the expired records of a reopened quiet log stay", l.FirstSeq(), end)
	})
}

// expireQuiet moves fake two hours on, past a MaxAge of an hour, and
// then, each time a timer of the log is set on it, on by the ager's
// longest period, until done holds; it looks at done now and then too,
// since the seal and the deletion run on other goroutines. After a minute
// (a hang guard, not a timing check) it fails with why().
func expireQuiet(t *testing.T, fake *clock.Fake, done func() bool, why func() string) {
	t.Helper()
	changed := fake.Changed()
	fake.Advance(2 * time.Hour)
	giveUp := time.After(time.Minute)
	for !done() {
		select {
		case <-changed:
			changed = fake.Changed()
			fake.Advance(_agerMaxPeriod)
		case <-time.After(5 * time.Millisecond):
		case <-giveUp:
			t.Fatal(why())
		}
	}
}

// TestRetentionStopsOnFailedLog: once an fdatasync failed, the log deletes
// nothing more. The sealer stops applying retention after a failed seal;
// the MaxAge pass of a quiet log (applyRetention, run by the ager) went
// on removing expired segments, and fsyncing the directory, of a log
// every call reports failed, whose files the user may want as they are.
func TestRetentionStopsOnFailedLog(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	dir := t.TempDir()
	failing := new(atomic.Bool)
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && failing.Load() {
			return 0, syscall.EIO
		}
		return n, nil
	}
	o := &Options{fsys: vfs.WithFaults(vfs.OS(), inj), SegmentSize: 64 << 10, clock: fake, Retention: Retention{MaxAge: time.Hour}}
	l := mustOpen(t, dir, o)
	defer l.Close()
	ctx := context.Background()
	appendRecs(t, l, 3000)
	noErr(t, l.Sync(ctx))
	before, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	if len(before) < 3 {
		t.Fatalf("%d segments, want 3 or more", len(before))
	}
	failing.Store(true)
	seq, err := l.Append([]byte("x"))
	noErr(t, err)
	if err := l.WaitDurable(ctx, seq); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable over the failing fdatasync: %v", err)
	}
	fake.Advance(2 * time.Hour) // every sealed segment expired
	l.applyRetention()          // the ager's pass
	after, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	if len(after) != len(before) || l.Stats().SegmentsDeleted != 0 {
		t.Fatalf("retention of the failed log: %d segments of %d left, %d deleted", len(after), len(before), l.Stats().SegmentsDeleted)
	}
}
