package stream

import (
	"context"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// TestRedeliveryPastDeletedSegments: a record nacked (or expired) that
// retention left in the stream goes out again, even when the group's
// redelivery reader, placed at an earlier redelivery, must cross segments
// retention deleted to reach it. The reader then reports the deletion (a
// *wal.TruncatedError naming the first record left, at or below the one
// wanted), and the record was taken for deleted: acked, counted skipped,
// never delivered again.
func TestRedeliveryPastDeletedSegments(t *testing.T) {
	ctx := context.Background()
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{SegmentSize: _retSeg, Sync: wal.SyncNever, Retention: Retention{MaxBytes: 4 * _retSeg}})
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{AckWait: time.Hour, MaxAckPending: MaxAckPending})
	noErr(t, err)
	next := func(want uint64, delivery int) Msg {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		m, err := g.Next(cctx, nil)
		noErr(t, err)
		if want != 0 && (m.Seq != want || m.Delivery != delivery) {
			t.Fatalf("Next = record %d delivery %d, want record %d delivery %d", m.Seq, m.Delivery, want, delivery)
		}
		if string(m.Data) != string(retRecord(int(m.Seq-1))) {
			t.Fatalf("record %d holds %.12q", m.Seq, m.Data)
		}
		return m
	}
	publish := func(n int) {
		t.Helper()
		for range n {
			_, err := s.Publish(retRecord(int(s.NextSeq() - 1)))
			noErr(t, err)
			noErr(t, s.Flush(ctx))
		}
	}
	publish(100)
	// A redelivery of record 1 places the redelivery reader there.
	next(1, 1)
	noErr(t, g.Nack(1))
	next(1, 2)
	// Retention deletes the segments after it.
	publish(30 * int(_retSeg/_retRecord))
	waitFor(t, "retention to delete the first segments", func() bool { return s.Stats().DiskBytes <= 4*_retSeg })
	// Fresh deliveries go on to the last record, in the segment being
	// written, which retention never deletes.
	last := s.NextSeq() - 1
	for m := next(0, 1); m.Seq < last; {
		m = next(0, 1)
	}
	skipped := g.Stats().Skipped
	noErr(t, g.Nack(last))
	next(last, 2)
	if gs := g.Stats(); gs.Skipped != skipped {
		t.Errorf("Skipped = %d after the redelivery, want %d as before", gs.Skipped, skipped)
	}
}
