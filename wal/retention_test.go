package wal

import (
	"context"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// TestRetentionMaxAgeQuietLog: on a log that seals nothing, MaxAge still
// deletes the sealed segments that expired (the ager, on the log's clock),
// and the first write into an active segment idle for MaxAge seals it
// first, so its old records are deleted too and the new record starts
// the log.
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
	// Nothing is sealed from now on: only the ager can delete.
	changed := fake.Changed()
	fake.Advance(2 * time.Hour)
	active := segs[len(segs)-1].firstSeq
	giveUp := time.After(time.Minute) // a hang guard, not a timing check
	for l.FirstSeq() != active {
		select {
		case <-changed:
		case <-giveUp:
			t.Fatalf("FirstSeq %d, %d segments deleted: the expired sealed segments stay", l.FirstSeq(), l.Stats().SegmentsDeleted)
		}
		changed = fake.Changed()
		if l.FirstSeq() != active {
			fake.Advance(_agerMaxPeriod)
		}
	}
	if n := l.Stats().SegmentsDeleted; n != int64(len(segs)-1) {
		t.Fatalf("%d segments deleted, want %d", n, len(segs)-1)
	}
	// The active segment's records are two hours old: the next write
	// seals it first.
	seq, err := l.Append(testPayload(1, 0, 100))
	noErr(t, err)
	noErr(t, l.Sync(ctx))
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
