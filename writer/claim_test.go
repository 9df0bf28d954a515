package writer

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestBlockTimeoutWaits: with BlockTimeout, a Write on a full ring waits
// until the timeout on the Ring's clock, not less, then drops the record;
// both alone and when it carries a drop marker (both take the one claim in
// Ring.Write). The marker then reports both drops. The clock is fake: the
// test sees the Write's timer armed and advances time to it.
func TestBlockTimeoutWaits(t *testing.T) {
	const (
		size    = 64 << 10
		recLen  = 1000
		timeout = 20 * time.Millisecond
	)
	clk := newFakeClock()
	g := &gateWriter{open: make(chan struct{})}
	r, err := NewRing(g, &RingOptions{Size: size, BlockTimeout: timeout, DropMarkers: true, clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		select {
		case <-g.open:
		default:
			close(g.open) // let Close finish after a failure
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	rec := func(i int) []byte { return fmt.Appendf(nil, "%0*d\n", recLen-1, i) }
	var want bytes.Buffer
	// The sink never returns while the gate is shut, so nothing is
	// released: the ring holds size/recLen records, and the next waits.
	fits := size / recLen
	for i := range fits {
		mustWrite(t, r, rec(i))
		want.Write(rec(i))
	}
	for i, path := range []string{"plain", "with a marker"} {
		deadline := clk.Now().Add(timeout)
		done := make(chan error, 1)
		go func() {
			_, err := r.Write(rec(fits + i))
			done <- err
		}()
		waitFor(t, path+": the Write's timer", func() bool {
			select {
			case err := <-done:
				t.Fatalf("%s: Write returned (%v) without waiting for its BlockTimeout", path, err)
			default:
			}
			return slices.Contains(clk.Deadlines(), deadline)
		})
		clk.Advance(timeout - time.Nanosecond)
		if !slices.Contains(clk.Deadlines(), deadline) {
			t.Fatalf("%s: the Write's timer fired before its BlockTimeout", path)
		}
		clk.Advance(time.Nanosecond)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: Write = %v; a record dropped after a BlockTimeout is not an error", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Write did not return in 10s after its BlockTimeout", path)
		}
		if d := r.Stats().DroppedRecords; d != uint64(i+1) {
			t.Errorf("%s: %d records dropped, want %d", path, d, i+1)
		}
	}
	close(g.open)
	mustWrite(t, r, rec(fits+2))
	want.WriteString("appendlog: 2 records dropped\n")
	want.Write(rec(fits + 2))
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := g.bytes(); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("output: %d bytes, want %d; first difference at %d", len(got), want.Len(), firstDiff(got, want.Bytes()))
	}
}

// TestMarkerWaitsForRoom: a record as large as the ring takes leaves no
// room for a pending drop marker in its claim; it is written alone, and the
// marker goes ahead of the next record.
func TestMarkerWaitsForRoom(t *testing.T) {
	const size, recLen = 64 << 10, 1000
	g := &gateWriter{open: make(chan struct{})}
	r, err := NewRing(g, &RingOptions{Size: size, Full: Drop, DropMarkers: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(i int) []byte { return fmt.Appendf(nil, "%0*d\n", recLen-1, i) }
	var want bytes.Buffer
	for i := range size/recLen + 1 { // the last one does not fit: dropped
		mustWrite(t, r, rec(i))
		if i < size/recLen {
			want.Write(rec(i))
		}
	}
	if d := r.Stats().DroppedRecords; d != 1 {
		t.Fatalf("%d records dropped, want 1", d)
	}
	close(g.open)
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("b"), r.MaxRecord())
	big[len(big)-1] = '\n'
	mustWrite(t, r, big)
	mustWrite(t, r, []byte("small\n"))
	want.Write(big)
	want.WriteString("appendlog: 1 records dropped\nsmall\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := g.bytes(); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("output: %d bytes, want %d; first difference at %d", len(got), want.Len(), firstDiff(got, want.Bytes()))
	}
	if s := r.Stats(); s.Markers != 1 || s.WrittenRecords != size/recLen+2 {
		t.Errorf("stats: %d markers, %d records written; want 1, %d", s.Markers, s.WrittenRecords, size/recLen+2)
	}
}
