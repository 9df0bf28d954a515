package stream

import (
	"context"
	"fmt"
	"testing"
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
