package bench

import (
	"context"
	"path/filepath"

	"github.com/appendlog/appendlog/wal"
)

// walSink appends every record to a wal.Log. Without sync it is SyncNever
// and the clock stops after Flush; with sync it is SyncBatch (group
// commit) and the clock stops after Sync.
type walSink struct {
	nopDone
	l    *wal.Log
	sync bool
}

func openWAL(sync bool) func(context.Context, string, runCase) (sink, error) {
	return func(_ context.Context, dir string, _ runCase) (sink, error) {
		mode := wal.SyncNever
		if sync {
			mode = wal.SyncBatch
		}
		l, err := wal.Open(filepath.Join(dir, "wal"), &wal.Options{Sync: mode})
		if err != nil {
			return nil, err
		}
		return &walSink{l: l, sync: sync}, nil
	}
}

func (s *walSink) producer(int) (producer, error) { return s, nil }

func (s *walSink) write(rec []byte) error {
	_, err := s.l.Append(rec)
	return err
}

func (s *walSink) finish(ctx context.Context) error {
	if s.sync {
		return s.l.Sync(ctx)
	}
	return s.l.Flush(ctx)
}

func (s *walSink) close() error { return s.l.Close() }

func (s *walSink) output() output  { return output{path: s.l.Dir(), wal: true} }
func (s *walSink) dropped() uint64 { return 0 }
