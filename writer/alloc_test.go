package writer

import (
	"io"
	"testing"
	"time"
)

// TestZeroAllocs pins the zero-allocation Write paths. AllocsPerRun counts
// allocations of every goroutine, the flusher's included.
func TestZeroAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	rec := make([]byte, 128)
	rec[127] = '\n'
	check := func(name string, w Writer) {
		t.Helper()
		mustWrite(t, w, rec) // warm up
		var werr error
		if n := testing.AllocsPerRun(5000, func() { _, werr = w.Write(rec) }); n != 0 {
			t.Errorf("%s: %v allocs per Write", name, n)
		}
		if werr != nil {
			t.Errorf("%s: write: %v", name, werr)
		}
		if err := w.Close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
	mustRing := func(r *Ring, err error) *Ring {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	check("ring/discard", mustRing(NewRing(io.Discard, nil)))
	check("ring/discard-drop-markers", mustRing(NewRing(io.Discard, &RingOptions{Full: Drop, DropMarkers: true})))
	check("ring/discard-timeout", mustRing(NewRing(io.Discard, &RingOptions{BlockTimeout: time.Second})))
	r, _ := openRingFile(t, nil)
	check("ring/file", r)
	// With rotation the producer leaves a mark every 4 KiB; the files
	// are large enough that none rotates here (a rotation allocates, on
	// the flusher).
	r, _ = openRingFile(t, &RingOptions{Rotate: &Rotate{MaxBytes: 64 << 20}})
	check("ring/file-rotate", r)
	r, _ = openRingFile(t, &RingOptions{Direct: true})
	check("ring/direct", r)

	// A full ring in Drop mode: every Write is dropped (and re-counted for
	// the marker) without allocating.
	g := &gateWriter{open: make(chan struct{})}
	full := mustRing(NewRing(g, &RingOptions{Size: 64 << 10, Full: Drop, DropMarkers: true}))
	for full.Stats().DroppedRecords == 0 {
		mustWrite(t, full, rec)
	}
	var werr error
	if n := testing.AllocsPerRun(5000, func() { _, werr = full.Write(rec) }); n != 0 {
		t.Errorf("ring/dropping: %v allocs per Write", n)
	}
	if werr != nil {
		t.Errorf("ring/dropping: write: %v", werr)
	}
	close(g.open)
	if err := full.Close(); err != nil {
		t.Errorf("ring/dropping: close: %v", err)
	}

	check("direct/discard", NewDirect(io.Discard))
	check("buffered/discard", NewBuffered(io.Discard, 0))
	s, err := NewSlab(io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("slab/discard", s)
	m, err := OpenMmap(t.TempDir()+"/m.log", nil)
	if err != nil {
		t.Fatal(err)
	}
	check("mmap/file", m)
}
