package wal

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// logIDOpts makes a log of several segments from a few thousand records.
var logIDOpts = &Options{SegmentSize: 64 << 10, BufferSize: 128 << 10}

// makeIDLog creates a log in dir with n records and a cursor "c" committed
// after record acked, and returns the log's ID.
func makeIDLog(t *testing.T, dir string, n int, acked uint64) frame.LogID {
	t.Helper()
	l := mustOpen(t, dir, logIDOpts)
	appendN(t, l, n)
	c, err := l.Cursor("c")
	noErr(t, err)
	for seq := uint64(1); seq <= acked; seq++ {
		noErr(t, c.Ack(seq))
	}
	noErr(t, c.Commit(context.Background()))
	noErr(t, c.Close())
	id := l.w.id
	noErr(t, l.Close())
	return id
}

// segmentIDs returns the log ID in the header of each segment in dir.
func segmentIDs(t *testing.T, dir string) map[string]frame.LogID {
	t.Helper()
	segs, _, _, err := listSegments(vfs.OS(), dir)
	noErr(t, err)
	out := map[string]frame.LogID{}
	for _, s := range segs {
		f, err := vfs.OS().OpenRegular(filepath.Join(dir, s.name), os.O_RDONLY, 0)
		noErr(t, err)
		h, _, err := readHeader(f)
		f.Close()
		noErr(t, err)
		out[s.name] = h.Log
	}
	return out
}

// TestLogIDs: a new log chooses an ID and writes it into every segment it
// creates and every cursor checkpoint; a reopen keeps it.
func TestLogIDs(t *testing.T) {
	dir := t.TempDir()
	id := makeIDLog(t, dir, 6000, 100)
	if id.IsZero() {
		t.Fatal("a new log has no ID")
	}
	ids := segmentIDs(t, dir)
	if len(ids) < 3 {
		t.Fatalf("%d segments, want several", len(ids))
	}
	for name, got := range ids {
		if got != id {
			t.Fatalf("segment %s has log id %v, want %v", name, got, id)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, cursorDir, "c"))
	noErr(t, err)
	if _, committed, got, problem := decodeCursor(b); problem != "" || got != id || committed != 101 {
		t.Fatalf("cursor file: committed %d, log id %v, %s; want 101, %v", committed, got, problem, id)
	}
	l := mustOpen(t, dir, logIDOpts)
	defer l.Close()
	if l.w.id != id {
		t.Fatalf("reopened with log id %v, want %v", l.w.id, id)
	}
	other := t.TempDir()
	if makeIDLog(t, other, 10, 1) == id {
		t.Fatal("two logs chose the same ID")
	}
}

// TestForeignSegment: a segment copied from another log, over a segment of
// the same name (the same sequence numbers), is refused by Open,
// OpenReader, Verify and Repair, with an error naming the file and both
// IDs, and Repair leaves every file as it was (but LOCK, which names its
// holder).
func TestForeignSegment(t *testing.T) {
	for _, which := range []string{"sealed", "tail"} {
		t.Run(which, func(t *testing.T) {
			a, b := t.TempDir(), t.TempDir()
			idA := makeIDLog(t, a, 6000, 1)
			idB := makeIDLog(t, b, 6000, 1)
			segs, _, _, err := listSegments(vfs.OS(), b)
			noErr(t, err)
			victim := segs[0].name
			if which == "tail" {
				victim = segs[len(segs)-1].name
			}
			foreign, err := os.ReadFile(filepath.Join(a, victim))
			noErr(t, err)
			own, err := os.ReadFile(filepath.Join(b, victim))
			noErr(t, err)
			path := filepath.Join(b, victim)
			noErr(t, os.WriteFile(path, foreign, 0o644))
			before := fileContents(t, b)

			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrForeign) {
					t.Fatalf("%s: %v, want ErrForeign", what, err)
				}
				for _, want := range []string{path, idA.String(), idB.String()} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("%s: %q does not name %s", what, err, want)
					}
				}
			}
			_, err = Open(b, logIDOpts)
			check("Open", err)
			_, err = Verify(b, logIDOpts)
			check("Verify", err)
			r, err := OpenReader(b, 0, logIDOpts)
			if err == nil {
				for r.Next() {
				}
				err = r.Err()
				r.Close()
			}
			check("OpenReader", err)
			for _, force := range []bool{false, true} {
				_, err = Repair(b, force, logIDOpts)
				check("Repair", err)
			}
			delete(before, filepath.Join(b, lockName))
			after := fileContents(t, b)
			delete(after, filepath.Join(b, lockName))
			if !maps.EqualFunc(before, after, bytes.Equal) {
				for k := range after {
					if !bytes.Equal(before[k], after[k]) {
						t.Logf("changed: %s (%d -> %d bytes)", k, len(before[k]), len(after[k]))
					}
				}
				for k := range before {
					if _, ok := after[k]; !ok {
						t.Logf("removed: %s", k)
					}
				}
				t.Fatal("a refused Repair changed the log's files")
			}
			// Put the log's own segment back: it opens, every record there.
			noErr(t, os.WriteFile(path, own, 0o644))
			l := mustOpen(t, b, logIDOpts)
			defer l.Close()
			if n := l.NextSeq(); n != 6001 {
				t.Fatalf("NextSeq %d after the segment was put back, want 6001", n)
			}
		})
	}
}

// TestForeignCursor: a checkpoint copied from another log's cursors
// directory is refused by Cursor and OpenCursor, and listed with its error
// by Cursors and ReadCursors; the checkpoint is left as it was.
func TestForeignCursor(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	idA := makeIDLog(t, a, 100, 50)
	makeIDLog(t, b, 100, 1)
	path := filepath.Join(b, cursorDir, "c")
	foreign, err := os.ReadFile(filepath.Join(a, cursorDir, "c"))
	noErr(t, err)
	noErr(t, os.WriteFile(path, foreign, 0o644))
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrForeign) || !errors.Is(err, ErrBadCursorFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), idA.String()) {
			t.Fatalf("%s: %v, want ErrForeign naming %s and %v", what, err, path, idA)
		}
	}
	l := mustOpen(t, b, logIDOpts)
	_, err = l.Cursor("c")
	check("Cursor", err)
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 1 {
		t.Fatalf("Cursors = %+v", infos)
	}
	check("Cursors", infos[0].Err)
	infos, err = ReadCursors(b, logIDOpts)
	noErr(t, err)
	if len(infos) != 1 {
		t.Fatalf("ReadCursors = %+v", infos)
	}
	check("ReadCursors", infos[0].Err)
	noErr(t, l.Close())
	_, err = OpenCursor(b, "c", logIDOpts, nil)
	check("OpenCursor", err)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, foreign) {
		t.Fatal("the refused checkpoint was changed")
	}
}

// TestLegacyLogID: a log written before log IDs (no ID in its segment
// headers, version 1 cursor files) opens and resumes its cursors, and stays
// without an ID: the segments it adds have none either, so that its files
// are all judged alike.
func TestLegacyLogID(t *testing.T) {
	dir := t.TempDir()
	makeIDLog(t, dir, 6000, 200)
	before := len(segmentIDs(t, dir))
	// Make it a log of before: clear the ID and its CRC in every header,
	// and write the checkpoint in version 1.
	for name := range segmentIDs(t, dir) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		noErr(t, err)
		_, err = f.WriteAt(make([]byte, 20), 28)
		noErr(t, err)
		noErr(t, f.Close())
	}
	noErr(t, os.WriteFile(filepath.Join(dir, cursorDir, "c"), encodeCursorV1("c", 201), 0o644))

	l := mustOpen(t, dir, logIDOpts)
	if !l.w.id.IsZero() {
		t.Fatalf("a log without IDs was given %v", l.w.id)
	}
	c, err := l.Cursor("c")
	noErr(t, err)
	if c.Committed() != 201 {
		t.Fatalf("cursor resumed at %d, want 201", c.Committed())
	}
	noErr(t, c.Close())
	appendN(t, l, 6000) // new segments
	noErr(t, l.Close())
	ids := segmentIDs(t, dir)
	if len(ids) <= before {
		t.Fatalf("%d segments after the appends", len(ids))
	}
	for name, id := range ids {
		if !id.IsZero() {
			t.Fatalf("segment %s of a log without IDs has log id %v", name, id)
		}
	}
}

// fileContents returns every regular file under dir with its content.
func fileContents(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = b
		return err
	})
	noErr(t, err)
	return out
}
