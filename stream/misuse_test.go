package stream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
