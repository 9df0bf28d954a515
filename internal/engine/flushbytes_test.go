package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
)

// TestFullRingWrittenWhateverFlushBytes: a producer that never waits
// (TryClaim, as Drop mode does) fills the ring; its commits past half a
// ring kick the flusher, which must then write, whatever FlushBytes says.
// With FlushBytes above half a ring the kicked pass found fewer claimed
// bytes than FlushBytes unwritten, wrote nothing, and the ring stayed full
// (every record dropped) until FlushInterval, here never on a fake clock.
func TestFullRingWrittenWhateverFlushBytes(t *testing.T) {
	for _, fb := range []int{MinSize / 2, MinSize, 4 * MinSize} {
		t.Run(fmt.Sprintf("flushbytes=%d", fb), func(t *testing.T) { testFullRingWritten(t, fb) })
	}
}

func testFullRingWritten(t *testing.T, flushBytes int) {
	sink := &memSink{t: t}
	clk := clock.NewFake(time.Unix(0, 0))
	e, err := New(Config{Size: MinSize, BlockSize: 1024, FlushBytes: flushBytes, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rec := make([]byte, 1000)
	for {
		c, ok, err := e.TryClaim(len(rec), 1)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		e.Put(c, 0, rec)
		e.Commit(c)
	}
	full, _ := e.Tail()
	waitUntil(t, e, "the full ring written", func() bool { return e.Written() == full })
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDroppedLargeRecordFlushes: a record larger than the free space of a
// ring less than half full is refused by TryClaim (Drop mode drops it).
// No commit kicked the flusher (the ring is not past half), and its timer
// waits FlushInterval (here never, on a fake clock): the refusal itself
// must get the unwritten bytes written, or every such record is dropped
// until the timer.
func TestDroppedLargeRecordFlushes(t *testing.T) {
	sink := &memSink{t: t}
	clk := clock.NewFake(time.Unix(0, 0))
	e, err := New(Config{Size: MinSize, BlockSize: 1024, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	small := make([]byte, 2048) // more than a block: a claim of MaxClaim no longer fits
	c, ok, err := e.TryClaim(len(small), 1)
	if err != nil || !ok {
		t.Fatalf("TryClaim of a small record: %v %v", ok, err)
	}
	e.Put(c, 0, small)
	e.Commit(c)
	big := make([]byte, e.MaxClaim())
	if c, ok, err := e.TryClaim(len(big), 1); err != nil || ok {
		if ok {
			e.Put(c, 0, big)
			e.Commit(c) // or Close would wait for it
		}
		t.Fatalf("TryClaim of %d bytes with %d unwritten in a ring of %d: ok %v, %v; want refused", len(big), len(small), MinSize, ok, err)
	}
	waitUntil(t, e, "the small record written after the large one was refused", func() bool { return e.Written() == uint64(len(small)) })
	waitUntil(t, e, "room for the large record", func() bool {
		c, ok, err := e.TryClaim(len(big), 1)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			e.Put(c, 0, big)
			e.Commit(c)
		}
		return ok
	})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	got := len(sink.data)
	sink.mu.Unlock()
	if got != len(small)+len(big) {
		t.Fatalf("the sink holds %d bytes, want %d", got, len(small)+len(big))
	}
}
