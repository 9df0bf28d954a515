package wal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestRemovedSpareStaysRemoved: a power cut during a rotation's seal
// kept the new segment under spareName (its header and records) but took
// the sealed segment's last record and its footer. Open does not adopt
// the new segment (its records followed the record lost) and removes it;
// appends then go on in the old segment, and a record of the same size
// fills it to the same boundary, so its footer names the same next
// record as the new segment's header. A second power cut while that seal
// is under way (the footer durable, the directory not yet synced) must
// not bring back the removed file for the next Open to adopt: its records
// would follow a record they never followed.
func TestRemovedSpareStaysRemoved(t *testing.T) {
	mem := vfs.NewMem()
	sealing := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	var armed atomic.Bool
	inj := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSync && armed.Load() && strings.HasSuffix(name, segSuffix) {
			once.Do(func() { close(sealing) })
			<-release
		}
		return n, nil
	}
	const dir = "/log"
	opts := Options{SegmentSize: 64 << 10, BufferSize: 64 << 10, Sync: SyncNever}
	o1 := opts
	o1.fsys = vfs.WithFaults(mem, inj)
	l := mustOpen(t, dir, &o1)
	armed.Store(true)
	ctx := context.Background()
	i := 0
	appendFlush := func(l *Log, g int) uint64 {
		t.Helper()
		seq, err := l.Append(testPayload(g, i, 200))
		noErr(t, err)
		noErr(t, l.Flush(ctx))
		i++
		return seq
	}
	for l.Stats().SegmentsCreated == 0 {
		appendFlush(l, 1)
	}
	<-sealing
	var last uint64
	for range 5 {
		last = appendFlush(l, 1)
	}
	next := last - 4 // the new segment's first record
	cut1 := killCopy(t, mem, dir)
	close(release)
	noErr(t, l.Close())
	if _, err := cut1.Stat(filepath.Join(dir, spareName)); err != nil {
		t.Fatalf("the new segment is not under %s: %v", spareName, err)
	}

	// The first power cut took record next-1 and the footer after it.
	r, err := OpenReader(dir, next-1, &Options{fsys: cut1})
	noErr(t, err)
	if !r.Next() || r.Seq() != next-1 {
		t.Fatalf("record %d not found: %v", next-1, r.Err())
	}
	seg, off := r.Position()
	noErr(t, r.Close())
	f, err := cut1.OpenRegular(filepath.Join(dir, seg), os.O_RDWR, 0)
	noErr(t, err)
	noErr(t, f.Truncate(off))
	noErr(t, f.Sync())
	noErr(t, f.Close())

	// The next Open goes on in that segment; the second power cut comes
	// as the seal of its next rotation syncs the directory.
	var armed2 atomic.Bool
	var cut2 *vfs.MemFS
	cutDone := make(chan struct{})
	inj2 := func(op vfs.Op, name string, off int64, n int) (int, error) {
		if op == vfs.OpSyncDir && armed2.CompareAndSwap(true, false) {
			cut2 = cut1.Crash(nil)
			close(cutDone)
		}
		return n, nil
	}
	o2 := opts
	o2.fsys = vfs.WithFaults(cut1, inj2)
	l2 := mustOpen(t, dir, &o2)
	if got := l2.NextSeq(); got != next-1 {
		t.Fatalf("after the first cut the log ends before %d, want %d", got, next-1)
	}
	armed2.Store(true)
	if seq := appendFlush(l2, 2); seq != next-1 {
		t.Fatalf("appended %d, want %d", seq, next-1)
	}
	<-cutDone
	l2.Close() // on a file system the power cut stopped

	o3 := opts
	o3.fsys = cut2
	l3, err := Open(dir, &o3)
	if err != nil {
		t.Fatalf("Open after the second cut: %v", err)
	}
	noErr(t, l3.Close())
	for seq, p := range readAll(t, cut2, dir) {
		if g, _, err := parsePayload(p); err == nil && g == 1 && seq >= next-1 {
			t.Fatalf("record %d is one the first process wrote after the record the first power cut took: %s came back and was adopted", seq, spareName)
		}
	}
}
