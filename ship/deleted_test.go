package ship

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/wal"
)

// TestShipRecordsDeletedBeforeShipped: Kafka's last record of the source
// is record 100, and the log no longer holds the records after it that
// were never shipped (its cursor was deleted, and TruncateFront then
// deleted them). A shipper with a new cursor starts at the log's first
// record: it must stop saying which records were lost, not ship from
// there as if the topic were whole.
func TestShipRecordsDeletedBeforeShipped(t *testing.T) {
	c := cluster(t, 1)
	l, err := wal.Open(t.TempDir(), &wal.Options{SegmentSize: 64 << 10})
	noErr(t, err)
	t.Cleanup(func() { l.Close() })
	appendN(t, l, 100)
	noErr(t, ToKafka(context.Background(), l, opts(c)))
	noErr(t, l.DeleteCursor(DefaultCursor))
	appendN(t, l, 20000)
	noErr(t, l.Sync(context.Background()))
	noErr(t, l.TruncateFront(15000))
	first := l.FirstSeq()
	if first <= 101 {
		t.Fatalf("TruncateFront(15000) left the log starting at %d", first)
	}
	s, err := NewKafka(l, opts(c))
	noErr(t, err)
	defer s.Close()
	err = s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("records 101 to %d", first-1)) || !strings.Contains(err.Error(), "is record 100 (t/0, offset 99)") || !errors.Is(err, wal.ErrTruncated) {
		t.Fatalf("Run on a log that deleted records 101 to %d before they were shipped: %v (%+v)", first-1, err, s.Stats())
	}
	if st := s.Stats(); st.Shipped != 0 {
		t.Fatalf("Run shipped %d records after the deleted ones", st.Shipped)
	}
}

// TestShipRecordsDeletedUnderCursor: retention that ignores cursors
// deleted records the shipper's cursor had not passed. Run stops with a
// *wal.TruncatedError naming the first record left, and ships nothing
// after the deleted ones.
func TestShipRecordsDeletedUnderCursor(t *testing.T) {
	c := cluster(t, 1)
	l, err := wal.Open(t.TempDir(), &wal.Options{SegmentSize: 64 << 10, Retention: wal.Retention{IgnoreCursors: true}})
	noErr(t, err)
	t.Cleanup(func() { l.Close() })
	appendN(t, l, 100)
	noErr(t, ToKafka(context.Background(), l, opts(c)))
	appendN(t, l, 20000)
	noErr(t, l.Sync(context.Background()))
	noErr(t, l.TruncateFront(15000))
	s, err := NewKafka(l, opts(c))
	noErr(t, err)
	defer s.Close()
	err = s.Run(context.Background())
	if te, ok := errors.AsType[*wal.TruncatedError](err); !ok || te.First != l.FirstSeq() {
		t.Fatalf("Run after records below its cursor were deleted: %v", err)
	}
	if st := s.Stats(); st.Shipped != 0 || st.Committed != 101 {
		t.Fatalf("Run after records below its cursor were deleted: %+v", st)
	}
}
