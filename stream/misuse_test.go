package stream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// TestRecordSizeFixedAtCreate: the largest record a stream accepts is
// fixed when it is created, so a record published while the store held
// few streams stays readable once it holds many (the default buffers then
// shrink) and after a reopen; a larger one is refused, naming the bound.
func TestRecordSizeFixedAtCreate(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	s, err := st.Create("big", nil)
	noErr(t, err)
	max := s.Config().MaxRecordSize
	if max != DefaultMaxRecordSize {
		t.Fatalf("Config().MaxRecordSize = %d, want the default %d", max, DefaultMaxRecordSize)
	}
	if _, err := s.Publish(make([]byte, max+1)); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("Publish of MaxRecordSize+1 bytes = %v, want ErrTooLarge", err)
	}
	seq, err := s.Publish(make([]byte, max))
	noErr(t, err)
	noErr(t, s.WaitDurable(context.Background(), seq))
	huge, err := st.Create("huge", &Config{MaxRecordSize: 1 << 20})
	noErr(t, err)
	seq, err = huge.Publish(make([]byte, 1<<20))
	noErr(t, err)
	noErr(t, huge.WaitDurable(context.Background(), seq))
	// A stream created before the bound was recorded in stream.json took
	// records up to a quarter of the default buffer.
	old, err := st.Create("old", &Config{MaxRecordSize: _legacyMaxRecord})
	noErr(t, err)
	seq, err = old.Publish(make([]byte, _legacyMaxRecord))
	noErr(t, err)
	noErr(t, old.WaitDurable(context.Background(), seq))
	noErr(t, os.WriteFile(filepath.Join(dir, _streamsDir, "old", _streamFile), []byte(`{"version":1,"name":"old"}`), 0o644))
	// 600 streams make the default buffers 64 KiB.
	for i := range 600 {
		_, err := st.Create(fmt.Sprintf("s%d", i), nil)
		noErr(t, err)
	}
	noErr(t, st.Close())
	st = mustOpen(t, dir, nil)
	defer st.Close()
	for name, size := range map[string]int{"big": max, "huge": 1 << 20, "old": _legacyMaxRecord} {
		s, err := st.Stream(name)
		noErr(t, err)
		if got := s.Config().MaxRecordSize; got != size {
			t.Errorf("stream %s reopened: MaxRecordSize %d, want %d", name, got, size)
		}
		n := 0
		err = s.Scan(0, func(seq uint64, rec []byte) error {
			if len(rec) != size {
				return fmt.Errorf("record %d has %d bytes, want %d", seq, len(rec), size)
			}
			n++
			return nil
		})
		if err != nil || n != 1 {
			t.Errorf("stream %s in a store of 603 streams: read %d records, %v; want its 1 record", name, n, err)
		}
	}
}

// TestGroupNameLength: the longest group name the store accepts works
// (its options file and that file's temporary name fit in a directory
// entry); one byte more is ErrName, and nothing is left behind.
func TestGroupNameLength(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	long := strings.Repeat("g", MaxGroupName)
	g, err := s.Group(long, &GroupOptions{AckWait: time.Minute})
	noErr(t, err)
	noErr(t, g.Close())
	g, err = s.Group(long, nil) // its options, read back
	noErr(t, err)
	if g.opts.AckWait != time.Minute {
		t.Errorf("group %d bytes long reopened with AckWait %v, want 1m", len(long), g.opts.AckWait)
	}
	noErr(t, g.Close())
	tooLong := strings.Repeat("h", MaxGroupName+1)
	if _, err := s.Group(tooLong, nil); !errors.Is(err, ErrName) {
		t.Fatalf("Group with a %d-byte name = %v, want ErrName", len(tooLong), err)
	}
	if _, err := os.Stat(filepath.Join(dir, _streamsDir, "s", _logDir, "cursors", tooLong)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused group name left a cursor: %v", err)
	}
}

// TestAckAfterGroupClose: an ack that a closed group cannot record is
// ErrClosed, not a silent nil (the record comes again to the group opened
// after); acks of records below the committed position stay nil.
func TestAckAfterGroupClose(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	for range 2 {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	g, err := s.Group("g", nil)
	noErr(t, err)
	ctx := context.Background()
	m1, err := g.Next(ctx, nil)
	noErr(t, err)
	m2, err := g.Next(ctx, nil)
	noErr(t, err)
	noErr(t, g.Ack(m1.Seq))
	noErr(t, g.Close())
	if err := g.Ack(m2.Seq); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack of a delivered record after Close = %v, want ErrClosed", err)
	}
	if err := g.Nack(m2.Seq); !errors.Is(err, ErrClosed) {
		t.Fatalf("Nack after Close = %v, want ErrClosed", err)
	}
	if err := g.Ack(m1.Seq); err != nil {
		t.Fatalf("Ack of a record acked before Close = %v, want nil", err)
	}
	g2, err := s.Group("g", nil)
	noErr(t, err)
	defer g2.Close()
	m, err := g2.Next(ctx, nil)
	noErr(t, err)
	if m.Seq != m2.Seq {
		t.Fatalf("reopened group delivered %d first, want %d (acked only by the closed group)", m.Seq, m2.Seq)
	}

	// The same once the store closed the group.
	g3, err := s.Group("g3", nil)
	noErr(t, err)
	m, err = g3.Next(ctx, nil)
	noErr(t, err)
	noErr(t, st.Close())
	if err := g3.Ack(m.Seq); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack after Store.Close = %v, want ErrClosed", err)
	}
}

// TestDeleteVanishedStream: a stream whose directory was removed outside
// the store can still be deleted (Delete does not leave it listed and
// unusable), and created again.
func TestDeleteVanishedStream(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	noErr(t, os.RemoveAll(filepath.Join(dir, _streamsDir, "s")))
	noErr(t, st.Delete("s"))
	if got := st.List(); len(got) != 0 {
		t.Fatalf("List after Delete = %q, want none", got)
	}
	if _, err := s.Publish([]byte("y")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Publish on the deleted stream = %v, want ErrNotFound", err)
	}
	s, err = st.Create("s", nil)
	noErr(t, err)
	seq, err := s.Publish([]byte("z"))
	if err != nil || seq != 1 {
		t.Fatalf("Publish on the stream created again = %d, %v; want 1", seq, err)
	}
}

// TestTimerPeriodFloor: a group's timer never runs more often than every
// millisecond, whatever CheckpointEvery and AckWait say (a CheckpointEvery
// of 1, meant as seconds, is a nanosecond).
func TestTimerPeriodFloor(t *testing.T) {
	for _, c := range []struct {
		ackWait, ckpt, want time.Duration
	}{
		{DefaultAckWait, DefaultCheckpointEvery, time.Second},
		{time.Second, DefaultCheckpointEvery, 250 * time.Millisecond},
		{time.Nanosecond, DefaultCheckpointEvery, time.Millisecond},
		{DefaultAckWait, 1, time.Millisecond},
		{DefaultAckWait, 100 * time.Microsecond, time.Millisecond},
		{DefaultAckWait, 20 * time.Millisecond, 20 * time.Millisecond},
	} {
		o := GroupOptions{AckWait: c.ackWait, CheckpointEvery: c.ckpt}
		if got := timerPeriod(&o); got != c.want {
			t.Errorf("AckWait %v, CheckpointEvery %v: timer period %v, want %v", c.ackWait, c.ckpt, got, c.want)
		}
	}
}
