package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine"
)

// markedDropsIn sums the counts of the drop markers in out.
func markedDropsIn(t *testing.T, out []byte) uint64 {
	t.Helper()
	var n uint64
	for _, line := range bytes.Split(out, []byte("\n")) {
		var k uint64
		if _, err := fmt.Sscanf(string(line), "appendlog: %d records dropped", &k); err == nil {
			n += k
		}
	}
	return n
}

// TestPendingDropsMarkedAtClose: a Write that has taken the report of
// earlier drops (to put their marker ahead of its record) and is still
// waiting for room when Close begins must not take that report with it.
// Close found no drops pending and wrote no final marker; the Write's
// claim then failed with ErrClosed: the drops were counted in Stats but
// never reported in the stream, though they happened long before Close.
func TestPendingDropsMarkedAtClose(t *testing.T) {
	clk := newFakeClock()
	g := &gateWriter{open: make(chan struct{})}
	r, err := NewRing(g, &RingOptions{Size: 64 << 10, BlockTimeout: time.Second, DropMarkers: true, clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rec := append(bytes.Repeat([]byte("r"), 999), '\n')
	filled := make(chan struct{})
	go func() {
		defer close(filled)
		for r.Stats().DroppedRecords == 0 {
			if _, err := r.Write(rec); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// The sink is stuck: the ring fills and a Write times out (fake time).
	advanceUntil(t, clk, "drop", func() bool { return r.Stats().DroppedRecords > 0 })
	<-filled
	// A Write takes the pending report and waits for room (the fake
	// clock stands still, so its BlockTimeout never passes).
	wrote := make(chan error, 1)
	go func() {
		_, err := r.Write(rec)
		wrote <- err
	}()
	for r.pending.Load() != 0 {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	for !r.closed.Load() {
		runtime.Gosched()
	}
	// Let Close go as far as it goes while the sink is stuck.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		if errors.Is(r.e.Flush(cancelled), engine.ErrClosed) {
			break // the engine is closed: the waiting Write's claim fails
		}
		time.Sleep(time.Millisecond)
	}
	close(g.open)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	werr := <-wrote
	st := r.Stats()
	if got := markedDropsIn(t, g.bytes()); got != st.DroppedRecords {
		t.Errorf("markers report %d drops, Stats counts %d (the waiting Write returned %v)", got, st.DroppedRecords, werr)
	}
	if st.Records != st.WrittenRecords+st.DroppedRecords {
		t.Errorf("stats: %d accepted, %d written, %d dropped", st.Records, st.WrittenRecords, st.DroppedRecords)
	}
}
