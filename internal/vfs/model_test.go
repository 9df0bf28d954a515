package vfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/internal/vfs"
)

// TestMemMatchesOS applies the same random writes, truncates and
// preallocations to an OS file and a MemFS file and compares them; after
// every Sync, a nil-rng crash of the MemFS must show exactly the current
// content (which checks the incremental bookkeeping of durable content).
func TestMemMatchesOS(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		osPath := filepath.Join(t.TempDir(), "f")
		of, err := vfs.OS().OpenFile(osPath, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		m := vfs.NewMem()
		mf := newDurable(t, m, "/f")
		for step := range 300 {
			var oerr, merr error
			switch op := rng.IntN(10); {
			case op < 5:
				p := make([]byte, 1+rng.IntN(3000))
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				off := rng.Int64N(20000)
				_, oerr = of.WriteAt(p, off)
				_, merr = mf.WriteAt(p, off)
			case op < 6:
				bufs := [][]byte{make([]byte, rng.IntN(600)), nil, make([]byte, rng.IntN(600))}
				for _, b := range bufs {
					for i := range b {
						b[i] = byte(rng.Uint32())
					}
				}
				off := rng.Int64N(20000)
				_, oerr = of.WritevAt(bufs, off)
				_, merr = mf.WritevAt(bufs, off)
			case op < 7:
				size := rng.Int64N(25000)
				oerr, merr = of.Truncate(size), mf.Truncate(size)
			case op < 8:
				off, n := rng.Int64N(20000), rng.Int64N(8000)
				oerr, merr = of.Preallocate(off, n), mf.Preallocate(off, n)
			default:
				oerr, merr = of.Sync(), mf.Sync()
				want := contents(t, mf)
				c := m.Crash(nil)
				if got := mustRead(t, c, "/f"); !bytes.Equal(got, want) {
					t.Fatalf("seed %d step %d: crash after Sync lost data (len %d vs %d)", seed, step, len(got), len(want))
				}
				m = c
				if mf, err = m.OpenFile("/f", os.O_RDWR, 0); err != nil {
					t.Fatal(err)
				}
			}
			if oerr != nil || merr != nil {
				t.Fatalf("seed %d step %d: os err %v, mem err %v", seed, step, oerr, merr)
			}
			if o, mm := contents(t, of), contents(t, mf); !bytes.Equal(o, mm) {
				t.Fatalf("seed %d step %d: contents differ (len %d vs %d)", seed, step, len(o), len(mm))
			}
		}
		of.Close()
	}
}
