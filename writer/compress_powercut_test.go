package writer

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestPowerCutAtEveryStepOfCompression cuts the power (only synced data
// and directory entries survive) before each file-system operation in
// turn of a Ring that writes, syncs, rotates and compresses its backups,
// then opens the log again on what the cut left, as the next start of the
// service would, and closes it. The files then hold every record a Sync
// acknowledged, once and in order: no step of a rotation or of a
// compression (the temporary file, its sync and rename, the removal of
// the original) loses one or keeps two copies of one.
func TestPowerCutAtEveryStepOfCompression(t *testing.T) {
	for name, comp := range map[string]Compression{"gzip": Gzip, "zstd": Zstd} {
		t.Run(name, func(t *testing.T) {
			total := int64(-1)
			for k := int64(1); total < 0 || k <= total; k++ {
				ops := powerCutCompressionRun(t, comp, k)
				if ops < k { // the run ended before the k-th operation: no cut
					total = ops
				}
				if testing.Short() && k > 200 {
					break
				}
			}
		})
	}
}

// powerCutCompressionRun is one run of
// TestPowerCutAtEveryStepOfCompression with the power cut before the
// cut-th operation; it returns how many operations the run made.
func powerCutCompressionRun(t *testing.T, comp Compression, cut int64) int64 {
	t.Helper()
	mem := vfs.NewMem()
	if err := vfs.MkdirAllDurable(mem, "/logs"); err != nil {
		t.Fatal(err)
	}
	const path = "/logs/app.log"
	var n atomic.Int64
	var crashed atomic.Pointer[vfs.MemFS]
	fsys := vfs.WithFaults(mem, func(_ vfs.Op, _ string, _ int64, k int) (int, error) {
		if n.Add(1) == cut {
			crashed.Store(mem.Crash(nil)) // mem is dead from here on
		}
		return k, nil
	})
	opts := func(f vfs.FS) *RingOptions {
		return &RingOptions{Size: 64 << 10, Rotate: &Rotate{MaxBytes: MinRotateBytes, Compression: comp}, fsys: f, lockFile: noLock}
	}
	r, err := OpenFile(path, opts(fsys))
	if err != nil {
		if crashed.Load() == nil {
			t.Fatal(err)
		}
		return n.Load()
	}
	var acked int
	var b []byte
	for c := 0; c < 4*MinRotateBytes/100 && crashed.Load() == nil; c++ {
		b = appendRecord(b[:0], 0, c)
		if _, err := r.Write(b); err != nil {
			break
		}
		if c%100 == 99 {
			if err := r.Sync(); err != nil {
				break
			}
			acked = c + 1
		}
	}
	closeErr := r.Close()
	mc := crashed.Load()
	if mc == nil {
		if closeErr != nil {
			t.Fatal(closeErr)
		}
		return n.Load()
	}
	// Open what the power cut left, as the next start of the service
	// would: its recovery finishes or undoes what was under way.
	r, err = OpenFile(path, opts(mc))
	if err != nil {
		t.Fatalf("cut before operation %d: OpenFile after the cut: %v", cut, err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("cut before operation %d: %v", cut, err)
	}
	names, contents := rotateFiles(t, mc, path)
	// What the Sync contract promises: every acknowledged record, once,
	// in order. A power cut may take records written after the last
	// acknowledged Sync, from any file (the kernel writes files back in
	// no order), but never leaves a record twice or out of order, and
	// every file holds whole records but for a torn tail.
	next := 0 // the counter after the last record seen
	seen := 0 // acknowledged records seen
	for i, c := range contents {
		whole := wholeRecords(c)
		for line := range bytes.Lines(whole) {
			_, ctr, err := parseRecord(line)
			if err != nil {
				t.Fatal(err)
			}
			if ctr < next {
				t.Fatalf("cut before operation %d: %s: record %d after record %d (files %q)", cut, names[i], ctr, next-1, names)
			}
			if ctr < acked {
				seen++
			}
			next = ctr + 1
		}
		if torn := c[len(whole):]; len(torn) > 0 && !tornFrom(torn, next) {
			t.Fatalf("cut before operation %d: %s: %d bytes after %d bytes of whole records that are not one torn record", cut, names[i], len(torn), len(whole))
		}
	}
	if seen != acked {
		t.Fatalf("cut before operation %d: %d of the %d records a Sync acknowledged are in the files %q", cut, seen, acked, names)
	}
	return n.Load()
}

// tornFrom reports whether b is a prefix of one of the records from
// counter next on: a file's torn tail (records before it may be lost).
func tornFrom(b []byte, next int) bool {
	for c := next; c < next+1000; c++ {
		if bytes.HasPrefix(appendRecord(nil, 0, c), b) {
			return true
		}
	}
	return false
}
