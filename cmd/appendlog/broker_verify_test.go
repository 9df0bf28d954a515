package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
// runs, as a store that lost its last checkpoint would: the resumed run
// delivers again records an earlier run acked and left behind its
// checkpoint. Each delivery is of a record published once, in order, and
// the counts add up, but the run does not verify: it resumed the group
// below where the earlier run left it. The floor it records for the runs
// after it stays where the earlier run left the group.
func TestBrokerResumeMovedCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	first := brokerJSON(t, exitOK, "--dir", dir, "--streams", "1", "--publishers", "1", "--consumers", "1", "--records", "1000", "--size", "64")
	if !first.Verified {
		t.Fatalf("first run %+v", first)
	}
	at := moveBack(t, dir, 500)

	// In process, to read what the resumed run recorded before it
	// consumed anything.
	b, out := brokerInProcess(t, &brokerFlags{dir: dir, resume: true, records: 100, drainTimeout: 30 * time.Second})
	var floor groupMarks
	b.atPublishEnd = func() {
		buf, err := os.ReadFile(filepath.Join(dir, _groupMarks))
		if err == nil {
			err = json.Unmarshal(buf, &floor)
		}
		if err != nil {
			t.Error(err)
		}
	}
	if err := b.report(b.run(context.Background())); err == nil || b.res.Verified || b.res.ResumedFrom["s00000/g000"] != at-500 {
		t.Fatalf("a group resumed 500 records below %d, where the first run left it: %v %+v\n%s", at, err, b.res, out)
	}
	if p, want := strings.Join(b.res.Problems, "\n"), fmt.Sprintf("resumed from %d, below %d", at-500, at); !strings.Contains(p, want) {
		t.Fatalf("problems %q do not say %q", b.res.Problems, want)
	}
	if floor.Exact || floor.Committed["s00000/g000"] != at {
		t.Fatalf("while it ran, the resumed run recorded %+v, want a floor of %d", floor, at)
	}

	// The same through the command, after the run above closed the store.
	at = moveBack(t, dir, 500)
	res := brokerJSON(t, exitFailure, "--dir", dir, "--resume", "--records", "100")
	if want := fmt.Sprintf("resumed from %d, below %d", at-500, at); res.Verified || !strings.Contains(strings.Join(res.Problems, "\n"), want) {
		t.Fatalf("a group resumed 500 records below %d, where the run before left it: %+v", at, res)
	}
}

// moveBack moves the checkpoint of group g000 of the only stream of the
// broker store in dir back by n records, and returns where it was.
func moveBack(t *testing.T, dir string, n uint64) (at uint64) {
	t.Helper()
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
	at = c.Committed()
	if at <= n {
		t.Errorf("the run before left the group at %d: nothing to move %d records back", at, n)
	}
	err = c.Seek(at - n)
	if err := errors.Join(err, c.Close(), l.Close()); err != nil {
		t.Fatal(err)
	}
	return at
}
