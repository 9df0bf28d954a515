package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestBrokerPublishClockFlushes: with --sync never the publish clock stops
// only once every byte published was handed to the OS, so that the publish
// rate does not count bytes still in the store's buffers as written. With
// --backlog no reader makes the flusher write early: a few records sit in
// the buffer for the flush interval, far longer than publishing them takes.
// Each trial is a fresh store.
func TestBrokerPublishClockFlushes(t *testing.T) {
	for trial := range 3 {
		f := &brokerFlags{dir: filepath.Join(t.TempDir(), "b"), json: true, mode: "streams", streams: 2, publishers: 2,
			consumers: 2, size: 64, records: 200, sync: "never", drainTimeout: 30 * time.Second, backlog: true}
		cmd := &cobra.Command{}
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		b, err := setupBroker(cmd, f)
		if err != nil {
			t.Fatal(err)
		}
		var unflushed []string
		b.atPublishEnd = func() {
			for _, s := range b.streams {
				if st := s.Stats().Log; st.Written < st.Appended {
					unflushed = append(unflushed, fmt.Sprintf("stream %s: %d of %d bytes written", s.Name(), st.Written, st.Appended))
				}
			}
		}
		if err := b.report(b.run(context.Background())); err != nil {
			t.Fatalf("trial %d: %v\n%s", trial, err, &out)
		}
		if !b.res.Verified || b.res.Published != f.records {
			t.Fatalf("trial %d: %+v\n%s", trial, b.res, &out)
		}
		if len(unflushed) > 0 {
			t.Fatalf("trial %d: the publish clock stopped with bytes still in the buffer: %v", trial, unflushed)
		}
	}
}
