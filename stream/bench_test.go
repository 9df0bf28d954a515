package stream

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkOpen1000: Open and Close of a store of 1,000 streams, each
// written a little and with a group checkpointed on it: what a broker
// restarting warm pays before it serves.
func BenchmarkOpen1000(b *testing.B) {
	const streams = 1000
	dir := b.TempDir()
	st := mustOpen(b, dir, nil)
	for i := range streams {
		s, err := st.Create(fmt.Sprintf("s%04d", i), nil)
		noErr(b, err)
		seq, err := s.Publish([]byte("a record"))
		noErr(b, err)
		g, err := s.Group("g", nil)
		noErr(b, err)
		m, err := g.Next(context.Background(), nil)
		noErr(b, err)
		noErr(b, g.Ack(m.Seq))
		noErr(b, s.WaitDurable(context.Background(), seq))
		noErr(b, g.Close())
	}
	noErr(b, st.Close())
	for b.Loop() {
		st := mustOpen(b, dir, nil)
		if n := len(st.List()); n != streams {
			b.Fatalf("%d streams after Open, want %d", n, streams)
		}
		noErr(b, st.Close())
	}
}

// BenchmarkNextNack: one member taking a record and nacking it, over and
// over: a redelivery each time, read again from the stream.
func BenchmarkNextNack(b *testing.B) {
	st := mustOpen(b, b.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(b, err)
	g, err := s.Group("g", &GroupOptions{AckWait: time.Hour})
	noErr(b, err)
	defer g.Close()
	_, err = s.Publish(make([]byte, 128))
	noErr(b, err)
	ctx := context.Background()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		m, err := g.Next(ctx, buf)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Nack(m.Seq); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextAck is a group member's loop: Next, then Ack, over records
// published before the timer starts. It checks every record's sequence
// number and length.
func BenchmarkNextAck(b *testing.B) {
	st := mustOpen(b, b.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(b, err)
	g, err := s.Group("g", &GroupOptions{AckWait: time.Hour})
	noErr(b, err)
	defer g.Close()
	rec := make([]byte, 128)
	for range b.N {
		_, err := s.Publish(rec)
		noErr(b, err)
	}
	ctx := context.Background()
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m, err := g.Next(ctx, buf)
		if err != nil {
			b.Fatal(err)
		}
		if m.Seq != uint64(i)+1 || len(m.Data) != len(rec) {
			b.Fatalf("record %d: seq %d, %d bytes", i+1, m.Seq, len(m.Data))
		}
		if err := g.Ack(m.Seq); err != nil {
			b.Fatal(err)
		}
		buf = m.Data[:0]
	}
}
