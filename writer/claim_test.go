package writer

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// TestBlockTimeoutWaits: with BlockTimeout, a Write on a full ring waits
// the timeout before it drops the record, both alone and when it carries a
// drop marker (both take the one claim in Ring.Write); the marker then
// reports both drops.
func TestBlockTimeoutWaits(t *testing.T) {
	const (
		size    = 64 << 10
		recLen  = 1000
		timeout = 20 * time.Millisecond
	)
	g := &gateWriter{open: make(chan struct{})}
	r, err := NewRing(g, &RingOptions{Size: size, BlockTimeout: timeout, DropMarkers: true})
	if err != nil {
		t.Fatal(err)
	}
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
		done := make(chan time.Duration)
		var werr error
		go func() {
			start := time.Now()
			_, werr = r.Write(rec(fits + i))
			done <- time.Since(start)
		}()
		var took time.Duration
		select {
		case took = <-done:
		case <-time.After(10 * time.Second):
			close(g.open)
			<-done
			r.Close()
			t.Fatalf("%s: Write on a full ring with BlockTimeout %v did not return in 10s", path, timeout)
		}
		if werr != nil {
			t.Errorf("%s: Write = %v; a record dropped after a BlockTimeout is not an error", path, werr)
		}
		if took < timeout {
			t.Errorf("%s: Write dropped after %v, before its BlockTimeout %v", path, took, timeout)
		}
		if d := r.Stats().DroppedRecords; d != uint64(i+1) {
			t.Errorf("%s: %d records dropped, want %d", path, d, i+1)
		}
	}
	close(g.open)
	mustWrite(t, r, rec(fits+2))
	want.WriteString("appendlog: 2 records dropped\n")
	want.Write(rec(fits + 2))
	if err := r.Close(); err != nil {
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
