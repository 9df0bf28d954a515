package wal

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestOpenCursorCheckpointNamesDurable: a cursor from OpenCursor whose
// records lie in a segment the writer renamed into place but has not
// fsynced the directory for yet (see rotate: the sealer renames the spare
// segment, then fsyncs the directory) makes that name durable before it
// checkpoints past them: a power cut would otherwise bring the file back
// under the spare's name, which recovery removes, and leave the
// checkpoint past the log's end.
func TestOpenCursorCheckpointNamesDurable(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/log"
	o := &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, fsys: mem}
	l := mustOpen(t, dir, o)
	for l.Stats().SegmentsCreated < 2 {
		appendN(t, l, 100)
		noErr(t, l.Flush(context.Background()))
	}
	noErr(t, l.Close())
	segs, _, _, err := listSegments(mem, dir)
	noErr(t, err)
	last := segs[len(segs)-1]
	// The last segment as the sealer leaves it between its rename and
	// the directory fsync: durable under the spare's name only.
	noErr(t, mem.Rename(filepath.Join(dir, last.name), filepath.Join(dir, spareName)))
	noErr(t, mem.SyncDir(dir))
	// The cursor opens meanwhile (OpenCursor makes the directory's
	// entries durable, the spare's included), then the rename.
	c, err := OpenCursor(dir, "c", &Options{fsys: mem}, nil)
	noErr(t, err)
	noErr(t, mem.Rename(filepath.Join(dir, spareName), filepath.Join(dir, last.name)))
	var end uint64
	for {
		seq, _, ok, err := c.Poll()
		noErr(t, err)
		if !ok {
			break
		}
		noErr(t, c.Ack(seq))
		end = seq + 1
	}
	if end <= last.firstSeq {
		t.Fatalf("read up to %d, want past %d", end, last.firstSeq)
	}
	noErr(t, c.Commit(context.Background()))
	crashed := mem.Crash(nil)
	_ = c.Close() // its file system crashed

	l2 := mustOpen(t, dir, &Options{fsys: crashed})
	defer l2.Close()
	c2, err := l2.Cursor("c")
	noErr(t, err)
	defer c2.Close()
	if from, clamped := c2.Clamped(); clamped {
		t.Fatalf("after the power cut the checkpoint %d is past the log's end %d", from, l2.NextSeq())
	}
	if c2.Committed() != end {
		t.Fatalf("resumed at %d, want %d", c2.Committed(), end)
	}
}
