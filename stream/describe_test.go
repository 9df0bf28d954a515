package stream

import (
	"slices"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestDescribeStreamDeletedMeanwhile: a stream deleted by the store's
// owner between Describe's listing of the streams and its reading of the
// stream's configuration is left out, as a stream deleted before the
// listing is. Describe failed, calling the missing stream.json a bad
// metadata file (a damaged store), which `appendlog stat` on a live broker
// said whenever a Delete ran at the same time.
func TestDescribeStreamDeletedMeanwhile(t *testing.T) {
	mem := vfs.NewMem()
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: mem})
	noErr(t, err)
	for _, n := range []string{"a", "b", "c"} {
		_, err := st.Create(n, nil)
		noErr(t, err)
	}
	// The owner deletes b as Describe is about to read its stream.json:
	// the rename of a Delete.
	fsys := vfs.WithFaults(mem, func(op vfs.Op, name string, _ int64, n int) (int, error) {
		if op == vfs.OpOpen && name == "/st/streams/b/stream.json" {
			noErr(t, mem.Rename("/st/streams/b", "/st/streams/"+_delPrefix+"b"))
		}
		return n, nil
	})
	infos, err := describe(fsys, "/st")
	if err != nil {
		t.Fatalf("Describe with a stream deleted meanwhile: %v", err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) {
		t.Fatalf("Describe = %v, want [a c]", names)
	}
	noErr(t, st.Close())
}
