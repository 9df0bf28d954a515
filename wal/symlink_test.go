//go:build unix

package wal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// linkOut moves the file or directory at path (or, when it does not exist,
// a new file holding "user data") to a place outside the log directory
// and puts a symbolic link to it at path. It returns where the link
// points.
func linkOut(t *testing.T, path string) string {
	t.Helper()
	outside := filepath.Join(t.TempDir(), "user-"+filepath.Base(path))
	if err := os.Rename(path, outside); os.IsNotExist(err) {
		noErr(t, os.WriteFile(outside, []byte("user data"), 0o644))
	} else {
		noErr(t, err)
	}
	noErr(t, os.Symlink(outside, path))
	return outside
}

// snapshot returns the content of the file at path, or of the files in
// the directory at path, to check that nothing wrote through a link.
func snapshot(t *testing.T, path string) []byte {
	t.Helper()
	st, err := os.Stat(path)
	noErr(t, err)
	if !st.IsDir() {
		b, err := os.ReadFile(path)
		noErr(t, err)
		return b
	}
	var all []byte
	entries, err := os.ReadDir(path)
	noErr(t, err)
	for _, e := range entries {
		all = append(all, e.Name()+"\n"...)
		all = append(all, snapshot(t, filepath.Join(path, e.Name()))...)
	}
	return all
}

// wantLinkErr checks that err names path and says it is a symbolic link.
func wantLinkErr(t *testing.T, what string, err error, path string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("%s: %v, want an error saying %s is a symbolic link", what, err, path)
	}
}

// ackThrough acks every record from c's committed position to seq.
func ackThrough(t *testing.T, c *Cursor, seq uint64) {
	t.Helper()
	for s := c.Committed(); s <= seq; s++ {
		noErr(t, c.Ack(s))
	}
}

// everyEntry runs Open, Verify, Repair (plain and forced), OpenReader and
// ReadCursors on the log in dir, each of which must refuse the symbolic
// link at link.
func everyEntry(t *testing.T, dir, link string) {
	t.Helper()
	l, err := Open(dir, nil)
	if err == nil {
		l.Close()
	}
	wantLinkErr(t, "Open", err, link)
	_, err = Verify(dir, nil)
	wantLinkErr(t, "Verify", err, link)
	_, err = Repair(dir, false, nil)
	wantLinkErr(t, "Repair", err, link)
	_, err = Repair(dir, true, nil)
	wantLinkErr(t, "forced Repair", err, link)
	r, err := OpenReader(dir, 0, nil)
	if err == nil {
		for r.Next() {
		}
		err = r.Err()
		r.Close()
	}
	wantLinkErr(t, "OpenReader", err, link)
	_, err = ReadCursors(dir, nil)
	wantLinkErr(t, "ReadCursors", err, link)
}

// TestSymlinkNamedLikeLogFile: a symbolic link in the place of a segment
// (the tail, whose torn end recovery cuts, or a sealed one), an index
// file, the LOCK file, a spare or repair side file or the cursors
// directory is refused by Open, Verify, Repair, OpenReader and
// ReadCursors with an error naming it, and nothing is written through it.
// They followed such links: recovery cut the tail of the file a link named
// like the tail segment pointed at, and sealing wrote an index over the
// file a link named like its index pointed at.
func TestSymlinkNamedLikeLogFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(segs []string) string
	}{
		{"tail segment", func(segs []string) string { return segs[len(segs)-1] }},
		{"sealed segment", func(segs []string) string { return segs[0] }},
		{"index", func(segs []string) string { return segs[0] + idxSuffix }},
		{"index of the tail", func(segs []string) string { return segs[len(segs)-1] + idxSuffix }},
		{"LOCK", func([]string) string { return lockName }},
		{"spare segment", func([]string) string { return spareName }},
		{"repair file", func([]string) string { return repairTmp }},
		{"cut file", func(segs []string) string { return segs[0] + cutSuffix + "-4096" }},
		{"cursors", func([]string) string { return cursorDir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := buildLog(t, dir, 1000)
			if len(segs) < 2 {
				t.Fatalf("want several segments, have %v", segs)
			}
			if tc.name == "cursors" {
				l := mustOpen(t, dir, nil)
				c, err := l.Cursor("ship")
				noErr(t, err)
				ackThrough(t, c, 10)
				noErr(t, c.Commit(context.Background()))
				noErr(t, c.Close())
				noErr(t, l.Close())
			}
			link := filepath.Join(dir, tc.path(segs))
			if tc.name == "tail segment" {
				// A torn tail: garbage after the last durable record,
				// which recovery cuts.
				f, err := os.OpenFile(filepath.Join(dir, segs[len(segs)-1]), os.O_RDWR, 0)
				noErr(t, err)
				st, err := f.Stat()
				noErr(t, err)
				_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, 100), st.Size())
				noErr(t, err)
				noErr(t, f.Close())
			}
			outside := linkOut(t, link)
			before := snapshot(t, outside)
			everyEntry(t, dir, link)
			if after := snapshot(t, outside); !bytes.Equal(after, before) {
				t.Fatalf("%s, outside the log, changed through the link", outside)
			}
		})
	}
}

// TestSymlinkNamedLikeCursorFile: a symbolic link in the place of a
// cursor file, its lock file or its checkpoint's temporary file is
// refused with an error naming it, and nothing is written through it. A
// checkpoint truncated and overwrote the file its temporary file's link
// pointed at.
func TestSymlinkNamedLikeCursorFile(t *testing.T) {
	for _, kind := range []string{"cursor", "lock", "tmp"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			buildLog(t, dir, 10)
			l := mustOpen(t, dir, nil)
			defer l.Close()
			c, err := l.Cursor("ship")
			noErr(t, err)
			ackThrough(t, c, 3)
			noErr(t, c.Commit(context.Background()))
			noErr(t, c.Close())
			name := "ship"
			if kind != "cursor" {
				name = cursorAux("ship", kind)
			}
			link := filepath.Join(dir, cursorDir, name)
			outside := linkOut(t, link)
			before := snapshot(t, outside)
			c, err = l.Cursor("ship")
			if kind == "tmp" {
				noErr(t, err)
				ackThrough(t, c, 5)
				err = c.Commit(context.Background())
				c.Close()
			} else if err == nil {
				c.Close()
			}
			wantLinkErr(t, "Cursor and Commit", err, link)
			if kind == "cursor" {
				infos, err := ReadCursors(dir, nil)
				if err == nil && len(infos) == 1 {
					err = infos[0].Err
				}
				wantLinkErr(t, "ReadCursors", err, link)
			}
			if after := snapshot(t, outside); !bytes.Equal(after, before) {
				t.Fatalf("%s, outside the log, changed through the link", outside)
			}
		})
	}
}
