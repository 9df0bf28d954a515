package writer

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
)

// boundaryWriter is an io.Writer that checks every Write it gets holds
// whole records only: it starts at a record's first byte (after the
// previous call's last newline) and ends with a newline, and each line
// decodes as a record or is a drop marker. It keeps what it was given.
type boundaryWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	calls   int
	partial string // the first violation, "" if none
	delay   time.Duration
}

func (w *boundaryWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.partial == "" {
		switch {
		case len(p) == 0:
			w.partial = fmt.Sprintf("call %d: an empty write", w.calls)
		case p[len(p)-1] != '\n':
			w.partial = fmt.Sprintf("call %d at byte %d: %d bytes ending inside a record (%q)", w.calls, w.buf.Len(), len(p), clip(p[max(len(p)-80, 0):]))
		default:
			for line := range bytes.Lines(p) {
				if bytes.HasPrefix(line, []byte("appendlog: ")) {
					continue
				}
				if _, _, err := payload.Decode(line); err != nil {
					w.partial = fmt.Sprintf("call %d at byte %d: not a whole record: %v (%q)", w.calls, w.buf.Len(), err, clip(line))
					break
				}
			}
		}
	}
	w.buf.Write(p)
	if w.delay > 0 {
		time.Sleep(w.delay)
	}
	return len(p), nil
}

func (w *boundaryWriter) check(t *testing.T) []byte {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.partial != "" {
		t.Fatalf("the writer got a partial record: %s", w.partial)
	}
	return bytes.Clone(w.buf.Bytes())
}

// TestNewRingWritesWholeRecords: a Ring over an io.Writer hands it whole
// records only, with 8 and 64 producers on the smallest ring (cuts at
// block boundaries and wraps all the time), records from 60 bytes to
// several KiB and some of 20 KiB (longer than a block, crossing marks),
// lossless and in Drop mode with markers. Every record arrives once, in
// per-producer order.
func TestNewRingWritesWholeRecords(t *testing.T) {
	for _, tc := range []struct {
		producers int
		full      FullPolicy
	}{{8, Block}, {64, Block}, {8, Drop}} {
		t.Run(fmt.Sprintf("producers=%d/%v", tc.producers, tc.full), func(t *testing.T) {
			w := &boundaryWriter{}
			if tc.full == Drop {
				w.delay = 20 * time.Microsecond // a slow writer: drops happen
			}
			r, err := NewRing(w, &RingOptions{Size: 64 << 10, Full: tc.full, DropMarkers: tc.full == Drop, FlushInterval: 100 * time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			n := 3000
			if testing.Short() {
				n = 600
			}
			want := make([]int, tc.producers)
			var wg sync.WaitGroup
			for id := range tc.producers {
				wg.Go(func() {
					var b []byte
					for ctr := range n {
						size := recordSize(id, ctr)
						if ctr%211 == 210 {
							size = 20 << 10
						}
						var err error
						if b, err = payload.Append(b[:0], id, uint64(ctr), size); err != nil {
							panic(err)
						}
						if _, err := r.Write(b); err != nil {
							panic(err)
						}
					}
				})
				want[id] = n
			}
			wg.Wait()
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			out := w.check(t)
			res := verifyRecords(t, out, tc.producers, tc.full == Block, tc.full == Drop, want)
			st := r.Stats()
			if uint64(res.records) != st.WrittenRecords || tc.full == Drop && res.markedDrops != st.DroppedRecords {
				t.Fatalf("%d records, %d marked drops; Stats %+v", res.records, res.markedDrops, st)
			}
			t.Logf("%d records in %d writes, %d dropped", res.records, w.calls, st.DroppedRecords)
		})
	}
}

// TestNewRingFlushWithCarry: records another goroutine keeps writing make
// flushes end inside records; a record written before Flush is in the
// writer's output, whole, when Flush returns, every time.
func TestNewRingFlushWithCarry(t *testing.T) {
	w := &boundaryWriter{}
	r, err := NewRing(w, &RingOptions{Size: 64 << 10, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for id := 1; id <= 3; id++ {
		wg.Go(func() {
			var b []byte
			for ctr := 0; !stop.Load(); ctr++ {
				b, _ = payload.Append(b[:0], id, uint64(ctr), 500+ctr%3000)
				if _, err := r.Write(b); err != nil {
					panic(err)
				}
				if ctr%16 == 15 {
					time.Sleep(50 * time.Microsecond)
				}
			}
		})
	}
	ctx := context.Background()
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for ctr := range rounds {
		rec, _ := payload.Append(nil, 0, uint64(ctr), 100+ctr*37%5000)
		w.mu.Lock()
		from := max(w.buf.Len()-r.MaxRecord(), 0) // the record lands after what was written, less a carry
		w.mu.Unlock()
		mustWrite(t, r, rec)
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		ok := bytes.Contains(w.buf.Bytes()[from:], rec)
		w.mu.Unlock()
		if !ok {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("round %d: Flush returned before the writer got the record written before it", ctr)
		}
	}
	stop.Store(true)
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w.check(t)
}

// TestNewRingSplitWrites: with SplitWrites the writer may get a record in
// pieces (which is what the default prevents); every byte still arrives,
// in order.
func TestNewRingSplitWrites(t *testing.T) {
	w := &boundaryWriter{}
	r, err := NewRing(w, &RingOptions{Size: 64 << 10, SplitWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for id := range 8 {
		wg.Go(func() {
			var b []byte
			for ctr := range 3000 {
				b = appendRecord(b[:0], id, ctr)
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
	w.mu.Lock()
	partial, out := w.partial, bytes.Clone(w.buf.Bytes())
	w.mu.Unlock()
	if partial == "" {
		t.Fatal("24,000 records through a 64 KiB ring in whole-record writes only: SplitWrites changed nothing")
	}
	verifyRecords(t, out, 8, true, false, []int{3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000})
}
