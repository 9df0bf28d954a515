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
