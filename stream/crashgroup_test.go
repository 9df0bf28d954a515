package stream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

var _untilAckedCfg = &Config{SegmentSize: 64 << 10, Sync: wal.SyncBatch, Retention: Retention{UntilAcked: true}}

// publishBig publishes n records of 100 bytes, "name-i" first, durably:
// several segments of _untilAckedCfg.
func publishBig(t *testing.T, st *Store, name string, n int) {
	t.Helper()
	s, err := st.Stream(name)
	noErr(t, err)
	var last uint64
	for i := range n {
		p := make([]byte, 100)
		copy(p, fmt.Sprintf("%s-%d", name, i))
		last, err = s.Publish(p)
		noErr(t, err)
	}
	noErr(t, s.WaitDurable(context.Background(), last))
}

// consumeTo delivers and acks records of group name until its committed
// position is to, then closes it (its last checkpoint).
func consumeTo(t *testing.T, s *Stream, name string, to uint64) {
	t.Helper()
	g, err := s.Group(name, &GroupOptions{CheckpointEvery: time.Hour})
	noErr(t, err)
	for g.Committed() < to {
		m, err := g.Next(context.Background(), nil)
		noErr(t, err)
		noErr(t, g.Ack(m.Seq))
	}
	noErr(t, g.Close())
}

// checkPositions checks that every cursor of stream s (every group's
// position) is within the records the stream holds, and that each record
// from the lowest of them to the end is there, whole: a record at or after
// a position was deleted, or a position points past the end.
func checkPositions(t *testing.T, s *Stream, n int) map[string]uint64 {
	t.Helper()
	l, err := s.log()
	noErr(t, err)
	cs, err := l.Cursors()
	noErr(t, err)
	first, next := l.FirstSeq(), l.NextSeq()
	if next != uint64(n+1) {
		t.Fatalf("stream %q: NextSeq %d, want %d", s.name, next, n+1)
	}
	pos := make(map[string]uint64)
	low := next
	for _, c := range cs {
		noErr(t, c.Err)
		if c.Committed < first || c.Committed > next {
			t.Fatalf("cursor %q at %d, outside the records held [%d, %d)", c.Name, c.Committed, first, next)
		}
		pos[c.Name] = c.Committed
		low = min(low, c.Committed)
	}
	want := low
	noErr(t, s.Scan(low, func(seq uint64, rec []byte) error {
		p := fmt.Sprintf("%s-%d", s.name, seq-1)
		if seq != want || len(rec) != 100 || string(rec[:len(p)]) != p {
			return fmt.Errorf("record %d %q, want %d %q", seq, rec[:min(len(rec), 16)], want, p)
		}
		want++
		return nil
	}))
	if want != next {
		t.Fatalf("scan from %d ended at %d, want %d", low, want, next)
	}
	return pos
}

// TestCrashDeleteGroup: a power cut at any step of DeleteGroup, and of the
// truncation that follows it in a stream kept UntilAcked, leaves the
// other group whole (its position and every record from it) and the
// deleted one whole, gone, or (cut between its cursor and its file)
// without a position: DeleteGroup again finishes, and opening it starts
// it at the first record held.
func TestCrashDeleteGroup(t *testing.T) {
	const n = 1500
	runCrash(t, crashScenario{
		name: "delete group",
		setup: func(t *testing.T, st *Store) {
			s, err := st.Create("a", _untilAckedCfg)
			noErr(t, err)
			publishBig(t, st, "a", n)
			consumeTo(t, s, "keep", 1001)
			consumeTo(t, s, "old", 1) // holds every record
		},
		op: func(st *Store) {
			s, _ := st.Stream("a")
			_ = s.DeleteGroup("old")
		},
		check: func(t *testing.T, st *Store, cut bool) {
			s, err := st.Stream("a")
			noErr(t, err)
			pos := checkPositions(t, s, n)
			if pos["keep"] != 1001 {
				t.Fatalf("group keep at %d after the cut, want 1001", pos["keep"])
			}
			_, kept := pos["old"]
			if kept && pos["old"] != 1 {
				t.Fatalf("group old at %d after the cut, want 1", pos["old"])
			}
			if !cut && kept {
				t.Fatal("DeleteGroup finished and left the group's position")
			}
			if err := s.DeleteGroup("old"); err != nil && !errors.Is(err, ErrNoGroup) {
				t.Fatalf("DeleteGroup again: %v", err)
			}
			if !cut && !errors.Is(s.DeleteGroup("old"), ErrNoGroup) {
				t.Fatal("the group is there after DeleteGroup finished")
			}
			g, err := s.Group("keep", nil)
			noErr(t, err)
			defer g.Close()
			for want := uint64(1001); want <= n; want++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				m, err := g.Next(ctx, nil)
				cancel()
				noErr(t, err)
				if m.Seq != want {
					t.Fatalf("group keep delivered %d, want %d", m.Seq, want)
				}
				noErr(t, g.Ack(m.Seq))
			}
		},
	})
}

// TestCrashCheckpointTruncate: a power cut at any step of a group's
// checkpoint in a stream kept UntilAcked, and of the deletion of what it
// acked, leaves the group at the old or the new position with every
// record from it.
func TestCrashCheckpointTruncate(t *testing.T) {
	const n = 1500
	runCrash(t, crashScenario{
		name: "checkpoint and truncate",
		setup: func(t *testing.T, st *Store) {
			s, err := st.Create("a", _untilAckedCfg)
			noErr(t, err)
			publishBig(t, st, "a", n)
			consumeTo(t, s, "g", 2)
			g, err := s.Group("g", nil)
			noErr(t, err)
			for g.Committed() < 1201 {
				m, err := g.Next(context.Background(), nil)
				noErr(t, err)
				noErr(t, g.Ack(m.Seq))
			}
		},
		op: func(st *Store) {
			s, _ := st.Stream("a")
			g, _ := s.Group("g", nil)
			_ = g.Checkpoint()
		},
		check: func(t *testing.T, st *Store, cut bool) {
			s, err := st.Stream("a")
			noErr(t, err)
			pos := checkPositions(t, s, n)
			if p := pos["g"]; p != 1201 && (!cut || p != 2) {
				t.Fatalf("group at %d after the cut, want 2 or 1201", p)
			}
			if !cut && s.Stats().FirstSeq == 1 {
				t.Fatal("the checkpoint deleted nothing the group acked")
			}
		},
	})
}

// TestCrashIdleClose: a power cut at any step of the janitor's closing
// of an idle stream's log loses no record confirmed before it, and what
// survives of the others is a whole prefix.
func TestCrashIdleClose(t *testing.T) {
	const n = 1500
	runCrash(t, crashScenario{
		name: "idle close",
		setup: func(t *testing.T, st *Store) {
			_, err := st.Create("a", &Config{SegmentSize: 64 << 10, Sync: wal.SyncNever})
			noErr(t, err)
			publishBig(t, st, "a", n)
			s, _ := st.Stream("a")
			for i := range 100 { // unconfirmed
				p := make([]byte, 100)
				copy(p, fmt.Sprintf("a-%d", n+i))
				_, err := s.Publish(p)
				noErr(t, err)
			}
		},
		op: func(st *Store) {
			s, _ := st.Stream("a")
			for range 3 { // used, idle once, closed
				s.closeIdle()
			}
		},
		check: func(t *testing.T, st *Store, cut bool) {
			s, err := st.Stream("a")
			noErr(t, err)
			got := s.NextSeq() - 1
			if got < n || got > n+100 || !cut && got != n+100 {
				t.Fatalf("%d records after the cut, want %d to %d", got, n, n+100)
			}
			checkPositions(t, s, int(got))
		},
	})
}

// TestCrashGroupCreateRetention: a power cut at any step of creating a
// group, in a stream kept UntilAcked, leaves no trace of the group (no
// group file, no position holding records from retention) or a group
// that is there: its file, with the options and start it was created
// with, and a position once it is opened. A position without a group
// file would hold every record from it for ever, seen by no one.
func TestCrashGroupCreateRetention(t *testing.T) {
	const n = 1500
	const startAt = 700
	runCrash(t, crashScenario{
		name: "group create, until acked",
		setup: func(t *testing.T, st *Store) {
			s, err := st.Create("a", _untilAckedCfg)
			noErr(t, err)
			publishBig(t, st, "a", n)
			consumeTo(t, s, "keep", 1001)
			checkpointGroup(t, s, "keep")
			if first := s.Stats().FirstSeq; first <= 1 || first > startAt {
				t.Fatalf("stream starts at %d after group keep moved to 1001, want in (1, %d]", first, startAt)
			}
		},
		op: func(st *Store) {
			s, _ := st.Stream("a")
			_, _ = s.Group("g", &GroupOptions{AckWait: time.Minute, StartAt: startAt})
		},
		check: func(t *testing.T, st *Store, cut bool) {
			s, err := st.Stream("a")
			noErr(t, err)
			gdir := filepath.Join(s.dir, _groupsDir)
			entries, err := st.fsys.List(gdir)
			noErr(t, err)
			listed := false
			for _, e := range entries {
				switch e {
				case "keep.json":
				case "g.json":
					listed = true
				default:
					t.Fatalf("%s holds %s after the cut", gdir, e)
				}
			}
			names, err := s.Groups()
			noErr(t, err)
			if want := map[bool][]string{false: {"keep"}, true: {"g", "keep"}}[listed]; !slices.Equal(names, want) {
				t.Fatalf("Groups() = %q after the cut, want %q", names, want)
			}
			if !cut && !listed {
				t.Fatal("the group's file is missing after Group returned")
			}
			pos := checkPositions(t, s, n)
			if _, ok := pos["g"]; ok && !listed {
				t.Fatalf("group g has a position (%d) and no group file: it holds the stream's records from retention, unseen", pos["g"])
			}
			if listed {
				g, err := s.Group("g", nil)
				noErr(t, err)
				if g.opts.AckWait != time.Minute {
					t.Fatalf("group g reopened with AckWait %v, want %v", g.opts.AckWait, time.Minute)
				}
				want := max(uint64(startAt), s.Stats().FirstSeq)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				m, err := g.Next(ctx, nil)
				cancel()
				noErr(t, err)
				if m.Seq != want {
					t.Fatalf("group g starts at %d after the cut, want %d", m.Seq, want)
				}
				noErr(t, g.Close())
				noErr(t, s.DeleteGroup("g"))
			}
			// With g gone, the records group keep acked go at its next
			// checkpoint.
			consumeTo(t, s, "keep", 1401)
			checkpointGroup(t, s, "keep")
			pos = checkPositions(t, s, n)
			if len(pos) != 1 {
				t.Fatalf("positions %v, want only group keep's", pos)
			}
			if first := s.Stats().FirstSeq; first <= 1001 {
				t.Fatalf("the stream starts at %d with group keep at 1401 and no other group: something holds its records", first)
			}
		},
	})
}

// checkpointGroup opens group name, checkpoints it (deleting what every
// group acked, in a stream kept UntilAcked) and closes it.
func checkpointGroup(t *testing.T, s *Stream, name string) {
	t.Helper()
	g, err := s.Group(name, nil)
	noErr(t, err)
	noErr(t, g.Checkpoint())
	noErr(t, g.Close())
}
