package engine

import (
	"context"
	"testing"
)

// BenchmarkFlushLatency: one goroutine commits a 128-byte record and waits
// for it, in a loop: Flush (handed to the sink) or Sync (through a
// Sink.Sync that returns at once). An op is the round trip through the
// flusher: the wake-up, its pass, and the broadcast back.
func BenchmarkFlushLatency(b *testing.B) {
	for _, wait := range []string{"flush", "sync"} {
		b.Run("wait="+wait, func(b *testing.B) {
			e, err := New(Config{}, nullSink{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			p := make([]byte, 128)
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c, err := e.Claim(len(p), 1)
				if err != nil {
					b.Fatal(err)
				}
				e.Put(c, 0, p)
				e.Commit(c)
				if wait == "flush" {
					err = e.Flush(ctx)
				} else {
					err = e.Sync(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
