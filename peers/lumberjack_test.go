package peers

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/appendlog/appendlog/writer"
)

// TestRingOverLumberjack: a Ring from writer.NewRing over a lumberjack
// Logger that rotates every MiB. lumberjack rotates between two Write
// calls, so a Ring that cut a record between calls would leave its halves
// in two files. Every file holds whole lines, and every record is in
// exactly one, in per-producer order across the files. With SplitWrites
// (bytes cut anywhere) some line is split: the check can fail.
func TestRingOverLumberjack(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("SplitWrites=%v", split), func(t *testing.T) {
			dir := t.TempDir()
			lj := &lumberjack.Logger{Filename: filepath.Join(dir, "app.log"), MaxSize: 1}
			// lumberjack names a backup by the millisecond, and a second
			// rotation within one overwrites the first backup (its records
			// are lost): pace the writes so that rotations are apart.
			r, err := writer.NewRing(pacedWriter{lj}, &writer.RingOptions{Size: 1 << 20, SplitWrites: split})
			if err != nil {
				t.Fatal(err)
			}
			const producers, n = 8, 12_000 // about 12 MiB: a dozen rotations
			var wg sync.WaitGroup
			for id := range producers {
				wg.Go(func() {
					var b []byte
					for ctr := range n {
						b = fmt.Appendf(b[:0], "p%02d %08d %s.\n", id, ctr, strings.Repeat("x", 40+(id*7+ctr*13)%200))
						if _, err := r.Write(b); err != nil {
							panic(err)
						}
					}
				})
			}
			wg.Wait()
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := lj.Close(); err != nil {
				t.Fatal(err)
			}
			names, err := filepath.Glob(filepath.Join(dir, "app*.log"))
			if err != nil {
				t.Fatal(err)
			}
			// Backups (app-TIMESTAMP.log) sort in rotation order; the
			// current file comes last.
			slices.SortFunc(names, func(a, b string) int {
				if filepath.Base(a) == "app.log" {
					return 1
				}
				if filepath.Base(b) == "app.log" {
					return -1
				}
				return strings.Compare(a, b)
			})
			next := make([]int, producers)
			split1 := ""
			for _, name := range names {
				data, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				for line := range bytes.Lines(data) {
					var id, ctr int
					var fill string
					if k, err := fmt.Sscanf(string(line), "p%02d %08d %s\n", &id, &ctr, &fill); k != 3 || err != nil || id < 0 || id >= producers ||
						!strings.HasSuffix(string(line), ".\n") || len(fill) != 41+(id*7+ctr*13)%200 {
						if split1 == "" {
							split1 = fmt.Sprintf("%s: %q", filepath.Base(name), line)
						}
						if split {
							return // what the test shows it can tell
						}
						continue
					}
					if ctr != next[id] {
						t.Fatalf("%s: producer %d record %d, want %d", filepath.Base(name), id, ctr, next[id])
					}
					next[id]++
				}
			}
			if split {
				if split1 == "" {
					t.Fatalf("with SplitWrites no line was split over %d files: the check cannot tell", len(names))
				}
				return
			}
			if split1 != "" {
				t.Fatalf("a line split across lumberjack's files: %s", split1)
			}
			for id, k := range next {
				if k != n {
					t.Fatalf("producer %d: %d of %d records", id, k, n)
				}
			}
			t.Logf("%d files, every line whole", len(names))
		})
	}
}

// pacedWriter is lumberjack with at least 2 ms between writes.
type pacedWriter struct{ lj *lumberjack.Logger }

func (p pacedWriter) Write(b []byte) (int, error) {
	n, err := p.lj.Write(b)
	time.Sleep(2 * time.Millisecond)
	return n, err
}
