package wal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/vfs"
)

// testPayload returns record i of writer g, of size bytes (at least
// payload.MinSize): a package payload record, which proves its writer,
// counter and every byte.
func testPayload(g, i int, size int) []byte {
	p, err := payload.Append(nil, g, uint64(i), max(size, payload.MinSize))
	if err != nil {
		panic(fmt.Sprintf("testPayload(%d, %d, %d): %v", g, i, size, err))
	}
	return p
}

// parsePayload checks a record testPayload made and returns its writer
// and counter.
func parsePayload(p []byte) (g, i int, err error) {
	w, c, err := payload.Decode(p)
	return w, int(c), err
}

// readAll reads every record and checks the log's invariants: payloads
// intact, each writer's counters strictly increasing.
func readAll(t *testing.T, fsys vfs.FS, dir string) map[uint64][]byte {
	t.Helper()
	r, err := OpenReader(dir, 0, &Options{fsys: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k, err := payload.NewChecker(payload.Options{Gaps: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]byte{}
	for r.Next() {
		if pr := k.Check(r.Record(), -1, r.Seq()); pr != nil {
			seg, off := r.Position()
			t.Fatalf("%s@%d: garbled or out-of-order record visible: %v", seg, off, pr)
		}
		out[r.Seq()] = append([]byte(nil), r.Record()...)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reader: %v", err)
	}
	return out
}

type ack struct {
	seq  uint64
	g, i int
}

func TestCrashRecoveryKeepsEveryDurableAck(t *testing.T) {
	trials := 40
	if testing.Short() {
		trials = 10
	}
	var torn, ackedTotal, cutTotal, inFlight int
	var inline uint64 // syncs a lone waiter ran on its own goroutine
	defer func() {
		t.Logf("%d trials: %d durable acks checked, %d cuts with unsynced bytes, %d torn tails cut (%d bytes), %d inline syncs", trials, ackedTotal, inFlight, torn, cutTotal, inline)
		if !t.Failed() && (torn == 0 || inFlight < trials/2 || inline == 0) {
			t.Errorf("the crash trials exercised too little: %d torn tails, %d of %d cuts with unsynced bytes (want %d), %d inline syncs", torn, inFlight, trials, trials/2, inline)
		}
	}()
	for trial := range trials {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(trial), 99))
			fsys := vfs.NewMem()
			// Slow fsyncs keep written-but-unsynced bytes in flight when the
			// power is cut, as on a real disk. pending counts, per file, the
			// bytes written since the last fsync of it began (a write racing
			// an fsync counts as pending).
			syncDelay := time.Duration(rng.IntN(2000)) * time.Microsecond
			var pmu sync.Mutex
			pending := map[string]int{}
			slow := vfs.WithFaults(fsys, func(op vfs.Op, name string, off int64, n int) (int, error) {
				switch op {
				case vfs.OpSync:
					time.Sleep(syncDelay)
					pmu.Lock()
					delete(pending, name)
					pmu.Unlock()
				case vfs.OpWrite:
					pmu.Lock()
					pending[name] += n
					pmu.Unlock()
				}
				return n, nil
			})
			opts := &Options{fsys: slow, SegmentSize: 64 << 10, BufferSize: 64 << 10, BatchAge: time.Millisecond}
			if trial%3 == 1 {
				opts.Sync = SyncNever
			}
			if trial%3 == 2 {
				opts.Sync = SyncInterval
				opts.SyncEvery = time.Millisecond
			}
			const dir = "/log"
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var acks []ack
			var wg sync.WaitGroup
			working := make(chan struct{}) // closed at the first ack
			var once sync.Once
			// One writer waits alone for each record, and syncs it on its
			// own goroutine (engine.SyncInline); eight share group commits.
			writers := 8
			if trial%2 == 1 {
				writers = 1
			}
			for g := range writers {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), uint64(trial)))
					for i := 0; ; i++ {
						seq, err := l.Append(testPayload(g, i, 24+r.IntN(400)))
						if err != nil {
							return
						}
						if g%2 == 0 || i%10 == 0 {
							if err := l.WaitDurable(context.Background(), seq); err != nil {
								return
							}
							mu.Lock()
							acks = append(acks, ack{seq, g, i})
							mu.Unlock()
							once.Do(func() { close(working) })
						}
					}
				})
			}
			// The cut comes a random time after the first durable ack, so
			// that every trial has acks to check, with appends and syncs
			// going on.
			select {
			case <-working:
			case <-time.After(10 * time.Second):
				fsys.Crash(nil) // stops the writers
				wg.Wait()
				l.Close()
				t.Fatal("no durable ack in 10s")
			}
			time.Sleep(time.Duration(rng.IntN(30_000)) * time.Microsecond)
			mu.Lock()
			acked := append([]ack(nil), acks...) // acknowledged before the cut
			mu.Unlock()
			pmu.Lock()
			unsynced := 0
			for _, n := range pending {
				unsynced += n
			}
			crashed := fsys.Crash(rng)
			pmu.Unlock()
			if unsynced > 0 {
				inFlight++
			}
			wg.Wait()
			inline += l.Stats().InlineSyncs
			if err := l.Close(); err == nil {
				t.Log("Close after crash returned nil (nothing was pending)")
			}

			l2, err := Open(dir, &Options{fsys: crashed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatalf("Open after crash: %v", err)
			}
			rec := l2.Recovery()
			ackedTotal += len(acked)
			if rec.TruncatedBytes > 0 {
				torn++
				cutTotal += int(rec.TruncatedBytes)
			}
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, crashed, dir)
			for _, a := range acked {
				p, ok := got[a.seq]
				if !ok {
					t.Fatalf("durable seq %d (writer %d #%d) lost; recovery %+v", a.seq, a.g, a.i, rec)
				}
				if g, i, err := parsePayload(p); err != nil || g != a.g || i != a.i {
					t.Fatalf("seq %d holds writer %d #%d (%v), acked writer %d #%d", a.seq, g, i, err, a.g, a.i)
				}
			}
			if uint64(len(got)) != rec.NextSeq-rec.FirstSeq {
				t.Fatalf("read %d records, recovery says [%d,%d)", len(got), rec.FirstSeq, rec.NextSeq)
			}

			// Appends after recovery must survive a second crash.
			l3, err := Open(dir, &Options{fsys: crashed, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			var after []ack
			for i := range 200 {
				seq, err := l3.Append(testPayload(100, i, 50+rng.IntN(300)))
				if err != nil {
					t.Fatal(err)
				}
				after = append(after, ack{seq, 100, i})
			}
			if err := l3.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i := 200; i < 260; i++ { // unsynced: may or may not survive
				if _, err := l3.Append(testPayload(100, i, 50)); err != nil {
					t.Fatal(err)
				}
			}
			crashed2 := crashed.Crash(rng)
			l3.Close()
			l4, err := Open(dir, &Options{fsys: crashed2, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			if err != nil {
				t.Fatalf("Open after second crash: %v", err)
			}
			l4.Close()
			got = readAll(t, crashed2, dir)
			for _, a := range append(acked, after...) {
				p, ok := got[a.seq]
				if !ok {
					t.Fatalf("after second crash: durable seq %d lost", a.seq)
				}
				if g, i, err := parsePayload(p); err != nil || g != a.g || i != a.i {
					t.Fatalf("after second crash: seq %d holds writer %d #%d (%v), want %d #%d", a.seq, g, i, err, a.g, a.i)
				}
			}
		})
	}
}
