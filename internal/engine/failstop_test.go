package engine

import (
	"context"
	"errors"
	"testing"
)

// TestNoSyncAfterAFailedWrite: once a Sink.Write fails, the engine makes
// no more calls to the sink, not even the sync that the pass which failed
// was about to make. It used to go on to Sync (or PrepareSync) the bytes
// the writes before the failed one had handed over, in the same pass: a
// broken sink got another call, and a file whose write failed half way
// was fsynced with the torn bytes.
func TestNoSyncAfterAFailedWrite(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		name := "sink"
		if pipelined {
			name = "pipelined"
		}
		t.Run(name, func(t *testing.T) {
			fs := &failSecondWrite{memSink: memSink{t: t}}
			var sink Sink = fs
			if pipelined {
				sink = pipelinedFailSecondWrite{fs}
			}
			// MaxWrite 1024: the record takes three writes, the second fails.
			e, err := New(Config{Size: MinSize, BlockSize: 1024, MaxWrite: 1024}, sink)
			if err != nil {
				t.Fatal(err)
			}
			commitN(t, e, 3000)
			if err := e.Sync(context.Background()); !errors.Is(err, errSecondWrite) {
				t.Fatalf("Sync: %v, want the write's error", err)
			}
			if err := e.Close(); !errors.Is(err, errSecondWrite) {
				t.Fatalf("Close: %v, want the write's error", err)
			}
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if len(fs.after) > 0 {
				t.Fatalf("after the failed write the sink got %v", fs.after)
			}
		})
	}
}

var errSecondWrite = errors.New("second write failed")

// failSecondWrite is a memSink whose second write fails; it records the
// calls made after that.
type failSecondWrite struct {
	memSink
	writes int
	failed bool
	after  []string
}

func (s *failSecondWrite) Write(pos uint64, a, b []byte) error {
	s.mu.Lock()
	s.writes++
	if s.failed {
		s.after = append(s.after, "Write")
	}
	if s.writes == 2 {
		s.failed = true
		s.mu.Unlock()
		return errSecondWrite
	}
	s.mu.Unlock()
	return s.memSink.Write(pos, a, b)
}

func (s *failSecondWrite) Sync() error {
	s.mu.Lock()
	if s.failed {
		s.after = append(s.after, "Sync")
	}
	s.mu.Unlock()
	return s.memSink.Sync()
}

// pipelinedFailSecondWrite is failSecondWrite as a PipelinedSink.
type pipelinedFailSecondWrite struct{ *failSecondWrite }

func (s pipelinedFailSecondWrite) PrepareSync() func() error {
	s.mu.Lock()
	if s.failed {
		s.after = append(s.after, "PrepareSync")
	}
	s.mu.Unlock()
	return s.memSink.Sync
}
