package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCursorAckRacingClose: goroutines ack records in order while the
// cursor is closed (by Cursor.Close, or by Log.Close; or a cursor of
// OpenCursor, by its Close). An Ack that returned
// nil must count: after the log is opened again, the committed position is
// past every record whose Ack, and every Ack before it, returned nil. An
// Ack the cursor did not take returns ErrClosed. Before, an Ack that found
// the cursor open could mark its record after Close had read the position
// for its last checkpoint, and return nil for an ack that was lost.
func TestCursorAckRacingClose(t *testing.T) {
	for _, how := range []string{"cursor", "log", "opencursor"} {
		t.Run(how, func(t *testing.T) {
			for round := range 30 {
				testAckRacingClose(t, how, round)
			}
		})
	}
}

func testAckRacingClose(t *testing.T, how string, round int) {
	const n = 256
	dir := t.TempDir()
	l, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(fmt.Appendf(nil, "record %d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var c *Cursor
	if how == "opencursor" {
		c, err = OpenCursor(dir, "c", nil, nil)
	} else {
		c, err = l.Cursor("c")
	}
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, _, err := c.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var next atomic.Uint64
	next.Store(1)
	results := make([]error, n+1) // by seq; each written by the goroutine that acked it
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			<-start
			for {
				seq := next.Add(1) - 1
				if seq > n {
					return
				}
				results[seq] = c.Ack(seq)
			}
		})
	}
	close(start)
	for next.Load() < uint64(1+round*n/40) {
	}
	var closeErr error
	if how == "log" {
		closeErr = l.Close()
	} else {
		closeErr = c.Close()
	}
	wg.Wait()
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	if how == "log" {
		c.Close()
	} else if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	took := uint64(0) // every Ack of 1..took returned nil
	for seq := uint64(1); seq <= n && results[seq] == nil; seq++ {
		took = seq
	}
	for seq := uint64(1); seq <= n; seq++ {
		if err := results[seq]; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("round %d: Ack(%d) racing Close: %v, want nil or ErrClosed", round, seq, err)
		}
	}
	l, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	infos, err := l.Cursors()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Committed < took+1 {
		t.Fatalf("round %d (%s closed): committed position after reopening %+v, want at least %d: Acks of 1..%d returned nil", round, how, infos, took+1, took)
	}
}
