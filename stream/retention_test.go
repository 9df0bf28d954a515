package stream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

const (
	_retSeg     = 64 << 10
	_retRecord  = 1000
	_retRecords = 4000 // about 4 MiB: 60 segments
)

func retRecord(i int) []byte {
	b := make([]byte, _retRecord)
	copy(b, fmt.Sprintf("record %d", i))
	return b
}

// consume reads n records from g, wants them in order from first, and
// acks each.
func consume(t *testing.T, g *Group, first uint64, n int) {
	t.Helper()
	buf := make([]byte, 0, _retRecord)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := g.Next(ctx, buf)
		cancel()
		noErr(t, err)
		want := first + uint64(i)
		if m.Seq != want || string(m.Data) != string(retRecord(int(want-1))) {
			t.Fatalf("got record %d %.12q, want %d", m.Seq, m.Data, want)
		}
		noErr(t, g.Ack(m.Seq))
		buf = m.Data
	}
}

// TestRetentionMaxBytes: a stream bounded by MaxBytes stays within the
// bound while 60 segments' worth is published, and a group that keeps up
// misses nothing.
func TestRetentionMaxBytes(t *testing.T) {
	const maxBytes = 4 * _retSeg
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{SegmentSize: _retSeg, Sync: wal.SyncNever, Retention: Retention{MaxBytes: maxBytes}})
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	var peak int64
	for i := 0; i < _retRecords; i += 100 {
		for j := range 100 {
			_, err := s.Publish(retRecord(i + j))
			noErr(t, err)
		}
		consume(t, g, uint64(i+1), 100)
		peak = max(peak, s.Stats().DiskBytes)
	}
	noErr(t, g.Checkpoint())
	// The active segment is never deleted; the bound may be passed by
	// the segment being written while the sealer catches up.
	waitFor(t, "disk bytes within MaxBytes", func() bool { return s.Stats().DiskBytes <= maxBytes+_retSeg })
	stats := s.Stats()
	if stats.FirstSeq <= 1 {
		t.Fatalf("nothing deleted: FirstSeq %d", stats.FirstSeq)
	}
	if peak > maxBytes+3*_retSeg {
		t.Errorf("disk bytes peaked at %d with MaxBytes %d", peak, maxBytes)
	}
	if gs := g.Stats(); gs.Skipped != 0 || gs.Acked != _retRecords {
		t.Fatalf("group that kept up: %+v", gs)
	}
	t.Logf("first seq %d, %d bytes on disk, peak %d", stats.FirstSeq, stats.DiskBytes, peak)
}

// TestRetentionSkips: without UntilAcked, retention deletes what a group
// has not read; the group skips to the first record left and counts what
// it skipped.
func TestRetentionSkips(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{SegmentSize: _retSeg, Sync: wal.SyncNever, Retention: Retention{MaxBytes: 2 * _retSeg}})
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	for i := range _retRecords {
		_, err := s.Publish(retRecord(i))
		noErr(t, err)
	}
	noErr(t, s.WaitDurable(context.Background(), _retRecords))
	waitFor(t, "retention deletes segments", func() bool { return s.Stats().DiskBytes <= 3*_retSeg })
	first := s.Stats().FirstSeq
	m, err := g.Next(context.Background(), nil)
	noErr(t, err)
	if m.Seq < first {
		t.Fatalf("delivered %d, below the first record left %d", m.Seq, first)
	}
	if gs := g.Stats(); gs.Skipped != m.Seq-1 {
		t.Fatalf("Skipped %d, want %d (first delivered %d)", gs.Skipped, m.Seq-1, m.Seq)
	}
	noErr(t, g.Ack(m.Seq))
	consume(t, g, m.Seq+1, int(_retRecords-m.Seq))
}

// TestRetentionUntilAcked: a stream kept UntilAcked keeps what any group
// (open or closed) has not acked, whatever MaxBytes says, and deletes
// what every group acked once they checkpoint.
func TestRetentionUntilAcked(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{SegmentSize: _retSeg, Sync: wal.SyncNever, Retention: Retention{MaxBytes: 2 * _retSeg, UntilAcked: true}})
	noErr(t, err)
	fast, err := s.Group("fast", nil)
	noErr(t, err)
	slow, err := s.Group("slow", nil)
	noErr(t, err)
	consume(t, slow, 1, 0)
	noErr(t, slow.Close()) // closed, its position still counts
	for i := range _retRecords {
		_, err := s.Publish(retRecord(i))
		noErr(t, err)
	}
	consume(t, fast, 1, _retRecords)
	noErr(t, fast.Checkpoint())
	time.Sleep(50 * time.Millisecond) // give the sealer a chance to do wrong
	if first := s.Stats().FirstSeq; first != 1 {
		t.Fatalf("FirstSeq %d while group slow has acked nothing", first)
	}

	// slow catches up halfway: records below its position may go.
	slow, err = s.Group("slow", nil)
	noErr(t, err)
	consume(t, slow, 1, _retRecords/2)
	noErr(t, slow.Checkpoint())
	waitFor(t, "acked segments deleted", func() bool { return s.Stats().FirstSeq > 1 })
	if first := s.Stats().FirstSeq; first > _retRecords/2+1 {
		t.Fatalf("FirstSeq %d past group slow's position %d", first, _retRecords/2+1)
	}
	consume(t, slow, _retRecords/2+1, _retRecords/2)
	noErr(t, slow.Checkpoint())
	waitFor(t, "every acked segment deleted", func() bool { return s.Stats().DiskBytes <= 2*_retSeg })
	if gs := slow.Stats(); gs.Skipped != 0 {
		t.Fatalf("group slow skipped %d records", gs.Skipped)
	}
}

// TestRetention60s: for a minute, a publisher writes 1,000-byte records at
// about 8 MB/s to a stream kept under MaxBytes (8 MiB, 1 MiB segments)
// while a group consumes and acks; the stream's segments stay within the
// bound all along (sampled every 20 ms), retention deletes dozens of times
// MaxBytes, and the group, which keeps up, receives every record once, in
// order, and skips none. Skipped with -short.
func TestRetention60s(t *testing.T) {
	if testing.Short() {
		t.Skip("a one-minute run")
	}
	const (
		run      = time.Minute
		seg      = 1 << 20
		maxBytes = 8 * seg
		rate     = 8000 // records a second
	)
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{SegmentSize: seg, Retention: Retention{MaxBytes: maxBytes}})
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{CheckpointEvery: 100 * time.Millisecond})
	noErr(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	published := make(chan uint64, 1) // the last seq, once publishing ends
	pubErr := make(chan error, 1)
	go func() {
		start := time.Now()
		var last uint64
		for i := 0; time.Since(start) < run; i++ {
			if d := time.Duration(i)*time.Second/rate - time.Since(start); d > time.Millisecond {
				time.Sleep(d)
			}
			seq, err := s.Publish(retRecord(i))
			if err != nil {
				pubErr <- err
				return
			}
			last = seq
		}
		published <- last
	}()
	consumed := make(chan error, 1)
	var got atomic.Uint64 // the last seq consumed
	go func() {
		buf := make([]byte, 0, _retRecord)
		for want := uint64(1); ; want++ {
			m, err := g.Next(ctx, buf)
			if err != nil {
				consumed <- err
				return
			}
			if m.Seq != want || string(m.Data) != string(retRecord(int(want-1))) {
				consumed <- fmt.Errorf("got record %d %.12q, want %d", m.Seq, m.Data, want)
				return
			}
			if err := g.Ack(m.Seq); err != nil {
				consumed <- err
				return
			}
			got.Store(m.Seq)
			buf = m.Data
		}
	}()

	var peak, samples int64
	var last uint64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for last == 0 {
		select {
		case last = <-published:
		case err := <-pubErr:
			t.Fatalf("publish: %v", err)
		case err := <-consumed:
			t.Fatalf("consume: %v", err)
		case <-tick.C:
			samples++
			peak = max(peak, s.Stats().DiskBytes)
		}
	}
	waitFor(t, "the group to consume every record", func() bool { return got.Load() == last })
	cancel()
	if err := <-consumed; !errors.Is(err, context.Canceled) {
		t.Fatalf("consume: %v", err)
	}
	stats := s.Stats()
	written := int64(last) * _retRecord
	t.Logf("%d records (%d MiB) in %v; disk bytes peaked at %d KiB over %d samples (MaxBytes %d KiB); first seq now %d",
		last, written>>20, run, peak>>10, samples, maxBytes>>10, stats.FirstSeq)
	// Retention runs as a segment is sealed: the bound may be passed by
	// the new segment until the sealer has deleted the oldest one.
	if peak > maxBytes+seg {
		t.Errorf("disk bytes peaked at %d with MaxBytes %d", peak, maxBytes)
	}
	if written < 20*maxBytes || stats.FirstSeq < last/2 {
		t.Errorf("retention did not cycle: %d bytes written, first seq %d of %d", written, stats.FirstSeq, last)
	}
	if gs := g.Stats(); gs.Skipped != 0 {
		t.Errorf("a group that kept up skipped %d records", gs.Skipped)
	}
}
