package wal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// TestCursorClampedCheckpointDurable: a cursor whose checkpoint lies past
// the log's end resumes at the end, but the checkpoint it writes for that
// never passes the durable records: after a power cut that takes back the
// records appended since Open (none synced), the cursor resumes within
// the log, and every record from its checkpoint on is delivered again.
func TestCursorClampedCheckpointDurable(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/log"
	o := &Options{Sync: SyncNever, fsys: mem}
	l := mustOpen(t, dir, o)
	appendN(t, l, 10)
	noErr(t, l.Close())
	noErr(t, vfs.MkdirAllDurable(mem, filepath.Join(dir, cursorDir)))
	f, err := mem.OpenFile(filepath.Join(dir, cursorDir, "c"), os.O_RDWR|os.O_CREATE, 0o644)
	noErr(t, err)
	_, err = f.WriteAt(encodeCursor("c", 500, frame.LogID{}), 0)
	noErr(t, err)
	noErr(t, f.Sync())
	noErr(t, f.Close())
	noErr(t, mem.SyncDir(filepath.Join(dir, cursorDir)))

	l = mustOpen(t, dir, o)
	appendN(t, l, 20) // 11..30, never synced
	noErr(t, l.Flush(context.Background()))
	c, err := l.Cursor("c")
	noErr(t, err)
	if from, ok := c.Clamped(); !ok || from != 500 || c.Committed() != 31 {
		t.Fatalf("Clamped = %d %v, committed %d; want clamped from 500 to 31", from, ok, c.Committed())
	}
	if got, err := readCursorFile(mem, dir, "c", frame.LogID{}); err != nil || got > l.DurableSeq()+1 {
		t.Fatalf("clamped checkpoint on disk = %d, %v; durable records end at %d", got, err, l.DurableSeq()+1)
	}
	crashed := mem.Crash(nil)
	_ = c.Close() // its file system crashed
	_ = l.Close()

	l2 := mustOpen(t, dir, &Options{fsys: crashed})
	defer l2.Close()
	c2, err := l2.Cursor("c")
	noErr(t, err)
	defer c2.Close()
	if from, ok := c2.Clamped(); ok {
		t.Fatalf("after the power cut the checkpoint %d is past the log's end %d again", from, l2.NextSeq())
	}
}
