package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

// brokerInProcess sets up a --backlog broker run on a fresh store in
// process, so that a test can reach the run between publishing and
// consuming (brokerRun.atPublishEnd).
func brokerInProcess(t *testing.T, f *brokerFlags) (*brokerRun, *bytes.Buffer) {
	t.Helper()
	cmd := &cobra.Command{}
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	b, err := setupBroker(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	return b, &out
}

// TestBrokerVerifiesResumePoint: the verification holds each group to the
// range it resumed from, whatever its delivery counts add up to.
//
// "below" plays a group that resumes four records before the checkpoint it
// reports: it delivers four records it acked before, and the count of
// records from its checkpoint on is reached four records early, so that
// counting alone cannot tell the four records at the end were never
// checked. "gap" plays a group that resumes past its first records: each
// of its lanes then starts past the counter its checkpoint says.
func TestBrokerVerifiesResumePoint(t *testing.T) {
	const skew = 4
	for _, tc := range []struct {
		name string
		// tamper runs when publishing ended, before the consumers start.
		tamper func(t *testing.T, b *brokerRun)
		want   string
	}{
		{"below", func(t *testing.T, b *brokerRun) {
			b.groups[0].from += skew
		}, "below the checkpoint"},
		{"gap", func(t *testing.T, b *brokerRun) {
			gr := b.groups[0]
			for range skew {
				m, err := gr.g.Next(context.Background(), nil)
				if err != nil {
					t.Error(err)
					return
				}
				if err := gr.g.Ack(m.Seq); err != nil {
					t.Error(err)
				}
			}
			gr.from += skew // where it says it resumed: no record goes missing by the count
		}, "counter 4, want 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &brokerFlags{dir: filepath.Join(t.TempDir(), "b"), mode: "streams", streams: 1, publishers: 1,
				consumers: 1, size: 64, records: 100, sync: "batch", drainTimeout: 2 * time.Second, backlog: true}
			b, out := brokerInProcess(t, f)
			b.atPublishEnd = func() { tc.tamper(t, b) }
			err := b.report(b.run(context.Background()))
			if err == nil || b.res.Verified {
				t.Fatalf("a group delivering outside the range it resumed from verified: %+v\n%s", b.res, out)
			}
			if !strings.Contains(strings.Join(b.res.Problems, "\n"), tc.want) {
				t.Fatalf("problems %q do not say %q\n%s", b.res.Problems, tc.want, out)
			}
		})
	}
}

// TestBrokerResumeMovedCheckpoint moves a group's checkpoint back between
// two runs, as a store that lost its last checkpoint would: the resumed
// run delivers again records the first run acked and left behind its
// checkpoint. Each delivery is of a record published once, in order, and
// the counts add up, but the run does not verify: it resumed the group
// below where the first run left it.
func TestBrokerResumeMovedCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	first := brokerJSON(t, exitOK, "--dir", dir, "--streams", "1", "--publishers", "1", "--consumers", "1", "--records", "1000", "--size", "64")
	if !first.Verified {
		t.Fatalf("first run %+v", first)
	}
	infos, err := stream.Describe(filepath.Join(dir, _storeSub))
	if err != nil || len(infos) != 1 {
		t.Fatalf("describe the store: %v %+v", err, infos)
	}
	l, err := wal.Open(infos[0].LogDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.CursorWith("g000", nil)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	if c.Committed() != 1001 {
		t.Errorf("the first run left the group at %d, want 1001", c.Committed())
	}
	err = c.Seek(501)
	if err := errors.Join(err, c.Close(), l.Close()); err != nil {
		t.Fatal(err)
	}

	res := brokerJSON(t, exitFailure, "--dir", dir, "--resume", "--records", "100")
	if res.Verified || res.ResumedFrom["s00000/g000"] != 501 {
		t.Fatalf("a group resumed 500 records below where the first run left it: %+v", res)
	}
	if p := strings.Join(res.Problems, "\n"); !strings.Contains(p, "resumed from 501, below 1001") {
		t.Fatalf("problems %q do not name the move", res.Problems)
	}
}
