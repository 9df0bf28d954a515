package wal

import (
	"context"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// hideFS is a file system whose next hide listings of a directory leave
// out the entry named name, as a listing that is not a snapshot does for a
// file renamed into place while it runs (ext4 returns entries in hash
// order).
type hideFS struct {
	vfs.FS
	name string
	hide int
}

func (h *hideFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	es, err := h.FS.ReadDir(dir)
	if err != nil || h.hide == 0 {
		return es, err
	}
	h.hide--
	return slices.DeleteFunc(es, func(e fs.DirEntry) bool { return e.Name() == h.name }), nil
}

// TestFollowerListingMissedSegment: a following Reader whose listing
// missed a segment (so that its table has the segment before it ending
// where the one after it starts) reads to the footer of the segment it is
// in, takes the footer's word for where the segment ends, lists again
// (twice, when a listing misses it again while showing a later one), and
// goes on through the segment the listings missed: every record once, in
// order, and no *CorruptionError.
func TestFollowerListingMissedSegment(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "/log"
	opts := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, fsys: mem}
	rec := func(seq uint64) []byte { return payloadOf(seq, 1000) }
	l := mustOpen(t, dir, &opts)
	for i := range 10 {
		_, err := l.Append(rec(uint64(i + 1)))
		noErr(t, err)
	}
	noErr(t, l.Close())

	hide := &hideFS{FS: mem}
	ropts := opts
	ropts.fsys = hide
	r, err := OpenReader(dir, 1, &ropts)
	noErr(t, err)
	defer r.Close()
	want := uint64(1)
	for r.Next() {
		if r.Seq() != want || string(r.Record()) != string(rec(want)) {
			t.Fatalf("record %d, want %d", r.Seq(), want)
		}
		want++
	}
	noErr(t, r.Err())

	// The writer goes on through three segments; the follower's next two
	// listings miss the second: the one that gives the first segment an
	// end, and the one at its footer.
	l = mustOpen(t, dir, &opts)
	for i := 10; i < 180; i++ {
		_, err := l.Append(rec(uint64(i + 1)))
		noErr(t, err)
	}
	noErr(t, l.Close())
	segs, _, _, err := listSegments(mem, dir)
	noErr(t, err)
	if len(segs) < 3 {
		t.Fatalf("want at least 3 segments, have %v", segs)
	}
	hide.name, hide.hide = segs[1].name, 2

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for want <= 180 {
		noErr(t, r.Wait(ctx))
		for r.Next() {
			if r.Seq() != want || string(r.Record()) != string(rec(want)) {
				t.Fatalf("record %d, want %d", r.Seq(), want)
			}
			want++
		}
		if err := r.Err(); err != nil {
			t.Fatalf("follower at %d (segments %v, listing missed %s): %v", want, segs, segs[1].name, err)
		}
	}
}
