package stream

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// TestDeleteGroup: a group nobody consumes with holds a stream kept
// UntilAcked until DeleteGroup drops it; an open group, a position another
// process holds, a missing group and a bad name are refused; the name then
// makes a new group at the first record left.
func TestDeleteGroup(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	s, err := st.Create("orders", &Config{SegmentSize: 64 << 10, Retention: Retention{UntilAcked: true}})
	noErr(t, err)
	typo, err := s.Group("biling", nil)
	noErr(t, err)
	noErr(t, typo.Close())
	g, err := s.Group("billing", &GroupOptions{CheckpointEvery: time.Hour})
	noErr(t, err)
	const n = 2000
	for range n {
		_, err := s.Publish(make([]byte, 200))
		noErr(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf []byte
	for range n {
		m, err := g.Next(ctx, buf)
		noErr(t, err)
		buf = m.Data
		noErr(t, g.Ack(m.Seq))
	}
	noErr(t, g.Checkpoint())
	if first := s.Stats().FirstSeq; first != 1 {
		t.Fatalf("the stream starts at %d while group biling has consumed nothing", first)
	}

	if err := s.DeleteGroup("billing"); !errors.Is(err, ErrGroupOpen) {
		t.Fatalf("DeleteGroup of an open group: %v", err)
	}
	if err := s.DeleteGroup("nope"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("DeleteGroup of a missing group: %v", err)
	}
	for _, name := range []string{"", "../x", ".", "a/b"} {
		if err := s.DeleteGroup(name); !errors.Is(err, ErrName) {
			t.Fatalf("DeleteGroup(%q): %v", name, err)
		}
	}

	noErr(t, s.DeleteGroup("biling"))
	if _, err := os.Stat(filepath.Join(dir, "streams", "orders", "groups", "biling.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("groups/biling.json after DeleteGroup: %v", err)
	}
	if first := s.Stats().FirstSeq; first == 1 {
		t.Fatal("DeleteGroup left the records the deleted group held")
	}
	if err := s.DeleteGroup("biling"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("DeleteGroup twice: %v", err)
	}
	again, err := s.Group("biling", nil)
	noErr(t, err)
	if got, want := again.Committed(), s.Stats().FirstSeq; got != want {
		t.Fatalf("the name reopened at %d, want a new group at the first record %d", got, want)
	}
	noErr(t, again.Close())
	noErr(t, s.DeleteGroup("biling"))

	// A position another process holds (a shipper beside the store) is
	// refused while held, and deleted once released.
	infos, err := Describe(dir)
	noErr(t, err)
	oc, err := wal.OpenCursor(infos[0].LogDir, "shipper", nil, nil)
	noErr(t, err)
	if err := s.DeleteGroup("shipper"); !errors.Is(err, ErrGroupOpen) {
		t.Fatalf("DeleteGroup of a cursor OpenCursor holds: %v", err)
	}
	noErr(t, oc.Close())
	noErr(t, s.DeleteGroup("shipper"))
	noErr(t, g.Close())
	noErr(t, st.Close())
}

// TestDeleteLastGroupKeepsRecords: in a stream kept UntilAcked, deleting
// its only group leaves a stream with no group, which keeps everything:
// DeleteGroup deleted every record but the active segment's, consumed by
// no one.
func TestDeleteLastGroupKeepsRecords(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("q", &Config{SegmentSize: 64 << 10, Retention: Retention{UntilAcked: true}})
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	var last uint64
	for range 2000 {
		last, err = s.Publish(make([]byte, 200))
		noErr(t, err)
	}
	noErr(t, s.WaitDurable(context.Background(), last))
	m, err := g.Next(context.Background(), nil)
	noErr(t, err)
	noErr(t, g.Ack(m.Seq))
	noErr(t, g.Close())
	if first := s.Stats().FirstSeq; first != 1 {
		t.Fatalf("FirstSeq %d before DeleteGroup", first)
	}
	noErr(t, s.DeleteGroup("g"))
	if first := s.Stats().FirstSeq; first != 1 {
		t.Fatalf("DeleteGroup of the stream's only group deleted records 1 to %d, which no group consumed", first-1)
	}
}

// TestGroupNameHeldElsewhere: creating a group under the name of a
// position another process holds fails, naming the stream, the group and
// the holder, and leaves no group; once released, the name makes a group.
func TestGroupNameHeldElsewhere(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	defer st.Close()
	s, err := st.Create("orders", nil)
	noErr(t, err)
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	infos, err := Describe(dir)
	noErr(t, err)
	oc, err := wal.OpenCursor(infos[0].LogDir, "shipper", nil, nil)
	noErr(t, err)
	_, err = s.Group("shipper", nil)
	if !errors.Is(err, wal.ErrCursorOpen) || !strings.Contains(err.Error(), `stream "orders": group "shipper"`) {
		t.Fatalf("Group under a name another process holds: %v", err)
	}
	if names, err := s.Groups(); err != nil || len(names) != 0 {
		t.Fatalf("Groups() = %q, %v after a refused Group, want none", names, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "streams", "orders", "groups", "shipper.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("groups/shipper.json after a refused Group: %v", err)
	}
	noErr(t, oc.Close())
	g, err := s.Group("shipper", nil)
	noErr(t, err)
	noErr(t, g.Close())
	if names, err := s.Groups(); err != nil || !slices.Equal(names, []string{"shipper"}) {
		t.Fatalf("Groups() = %q, %v, want [shipper]", names, err)
	}
}

// TestGroupWithoutPosition: a group whose file is there and whose position
// is not (what a power cut leaves in the middle of creating or deleting
// it) opens as a new group would: at the StartAt it was created with,
// which options given later do not change.
func TestGroupWithoutPosition(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("orders", nil)
	noErr(t, err)
	for range 5 {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	g, err := s.Group("g", &GroupOptions{StartAt: 3})
	noErr(t, err)
	noErr(t, g.Close())
	g, err = s.Group("g", &GroupOptions{AckWait: time.Minute}) // replaces the options, not the start
	noErr(t, err)
	noErr(t, g.Close())
	l, err := s.log()
	noErr(t, err)
	noErr(t, l.DeleteCursor("g")) // DeleteGroup cut after its first step
	if names, err := s.Groups(); err != nil || !slices.Equal(names, []string{"g"}) {
		t.Fatalf("Groups() = %q, %v, want [g]", names, err)
	}
	g, err = s.Group("g", nil)
	noErr(t, err)
	defer g.Close()
	if g.opts.AckWait != time.Minute {
		t.Fatalf("AckWait %v, want the options given last", g.opts.AckWait)
	}
	m, err := g.Next(context.Background(), nil)
	noErr(t, err)
	if m.Seq != 3 {
		t.Fatalf("the group without a position starts at %d, want its StartAt 3", m.Seq)
	}
}
