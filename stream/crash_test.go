package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/wal"
)

// powerCut is a MemFS behind an injector that cuts the power before the
// k-th operation after arm: the MemFS is crashed (that operation and every
// later one fail) and what a power cut leaves of it is kept to reopen.
type powerCut struct {
	mem  *vfs.MemFS
	fsys vfs.FS
	k    int64
	seed uint64

	// mu makes counting an operation and disarming one step: a
	// background operation (the flusher's, the sealer's) that raced the
	// end of op would otherwise cut the power after run had reported
	// that op finished first.
	mu    sync.Mutex
	armed bool
	ops   int64
	after *vfs.MemFS // nil until the cut
}

func newPowerCut(k int64, seed uint64) *powerCut {
	p := &powerCut{mem: vfs.NewMem(), k: k, seed: seed}
	p.fsys = vfs.WithFaults(p.mem, func(op vfs.Op, name string, off int64, n int) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.armed {
			return n, nil
		}
		if p.ops++; p.ops == p.k {
			var rng *rand.Rand
			if p.seed != 0 { // unsynced writes may survive, or be torn
				rng = rand.New(rand.NewPCG(p.seed, uint64(p.k)))
			}
			p.after = p.mem.Crash(rng)
		}
		return n, nil
	})
	return p
}

// run arms the cut, runs op and disarms it. It returns the file system
// the power cut left, or nil if op finished before the k-th operation.
func (p *powerCut) run(op func()) *vfs.MemFS {
	p.mu.Lock()
	p.armed = true
	p.mu.Unlock()
	op()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	return p.after
}

// crashScenario is one operation cut at each of its steps in turn.
type crashScenario struct {
	name string
	// setup prepares the store before the operation; the power stays on.
	setup func(t *testing.T, st *Store)
	// op is the operation the power cut interrupts; its error is ignored
	// (it fails once the power is gone).
	op func(st *Store)
	// check inspects the store reopened after the cut. cut is false for
	// the run in which the operation finished.
	check func(t *testing.T, st *Store, cut bool)
}

// runCrash cuts the power before each operation of sc.op in turn (and,
// for half of the cuts, lets unsynced writes survive, whole or torn),
// reopens the store each power cut leaves and checks it.
func runCrash(t *testing.T, sc crashScenario) {
	const dir = "/store"
	opts := func(fsys vfs.FS) *Options {
		return &Options{IdleTimeout: -1, fsys: fsys}
	}
	cuts := 0
	for k := int64(1); ; k++ {
		for _, seed := range []uint64{0, 1 + uint64(k)} {
			p := newPowerCut(k, seed)
			st, err := Open(dir, opts(p.fsys))
			noErr(t, err)
			sc.setup(t, st)
			after := p.run(func() { sc.op(st) })
			_ = st.Close() // fails once the power is gone; its goroutines end all the same
			if after == nil {
				if cuts == 0 {
					t.Fatal("the operation did nothing the cut could interrupt")
				}
				// The operation finished: its result is checked too.
				st, err := Open(dir, opts(p.mem))
				noErr(t, err)
				sc.check(t, st, false)
				noErr(t, st.Close())
				t.Logf("%s: cut before each of its %d operations, two outcomes each", sc.name, cuts/2)
				return
			}
			cuts++
			st, err = Open(dir, opts(after))
			if err != nil {
				t.Fatalf("cut before operation %d (seed %d): reopen: %v", k, seed, err)
			}
			t.Run(fmt.Sprintf("cut=%d/seed=%d", k, seed), func(t *testing.T) {
				sc.check(t, st, true)
				names, err := after.List(dir + "/" + _streamsDir)
				noErr(t, err)
				for _, n := range names {
					if strings.HasPrefix(n, _newPrefix) || strings.HasPrefix(n, _delPrefix) {
						t.Errorf("Open left %s behind", n)
					}
				}
			})
			noErr(t, st.Close())
			if t.Failed() {
				t.FailNow()
			}
		}
	}
}

var _crashCfg = &Config{SegmentSize: 64 << 10, Sync: wal.SyncBatch, Retention: Retention{MaxAge: time.Hour}}

// publishSynced publishes n records "name-i" to stream name, durably.
func publishSynced(t *testing.T, st *Store, name string, n int) {
	t.Helper()
	s, err := st.Stream(name)
	noErr(t, err)
	var last uint64
	for i := range n {
		last, err = s.Publish(fmt.Appendf(nil, "%s-%d", name, i))
		noErr(t, err)
	}
	noErr(t, s.WaitDurable(context.Background(), last))
}

// checkRecords reads stream name from its first record through a new
// group and wants exactly the n records publishSynced wrote.
func checkRecords(t *testing.T, st *Store, name string, n int) {
	t.Helper()
	s, err := st.Stream(name)
	noErr(t, err)
	g, err := s.Group("check", nil)
	noErr(t, err)
	defer g.Close()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := g.Next(ctx, nil)
		cancel()
		if err != nil {
			t.Fatalf("stream %q: record %d: %v", name, i+1, err)
		}
		if want := fmt.Sprintf("%s-%d", name, i); m.Seq != uint64(i+1) || string(m.Data) != want {
			t.Fatalf("stream %q: got record %d %q, want %d %q", name, m.Seq, m.Data, i+1, want)
		}
		noErr(t, g.Ack(m.Seq))
	}
	if st := s.Stats(); st.NextSeq != uint64(n+1) {
		t.Fatalf("stream %q: NextSeq %d after %d records", name, st.NextSeq, n)
	}
}

// TestCrashCreate: a power cut at any step of Create leaves the stream
// whole (its configuration as given, usable) or absent (and creatable).
func TestCrashCreate(t *testing.T) {
	runCrash(t, crashScenario{
		name: "create",
		setup: func(t *testing.T, st *Store) {
			_, err := st.Create("a", nil)
			noErr(t, err)
			publishSynced(t, st, "a", 5)
		},
		op: func(st *Store) { _, _ = st.Create("s", _crashCfg) },
		check: func(t *testing.T, st *Store, cut bool) {
			checkRecords(t, st, "a", 5)
			switch got := st.List(); {
			case slices.Equal(got, []string{"a", "s"}):
				s, err := st.Stream("s")
				noErr(t, err)
				if got := s.Config(); got.SegmentSize != _crashCfg.SegmentSize || got.Sync != _crashCfg.Sync || got.Retention != _crashCfg.Retention {
					t.Fatalf("config after the cut = %+v, want %+v", got, *_crashCfg)
				}
			case cut && slices.Equal(got, []string{"a"}):
				_, err := st.Create("s", _crashCfg)
				noErr(t, err)
			default:
				t.Fatalf("streams after the cut: %q", got)
			}
			publishSynced(t, st, "s", 3)
			checkRecords(t, st, "s", 3)
		},
	})
}

// TestCrashDelete: a power cut at any step of Delete leaves the stream
// whole (every record and its group's position) or absent.
func TestCrashDelete(t *testing.T) {
	runCrash(t, crashScenario{
		name: "delete",
		setup: func(t *testing.T, st *Store) {
			for _, n := range []string{"a", "b"} {
				_, err := st.Create(n, _crashCfg)
				noErr(t, err)
				publishSynced(t, st, n, 5)
			}
			s, _ := st.Stream("a")
			g, err := s.Group("g", nil)
			noErr(t, err)
			for seq := uint64(1); seq <= 2; seq++ {
				m, err := g.Next(context.Background(), nil)
				noErr(t, err)
				noErr(t, g.Ack(m.Seq))
			}
			noErr(t, g.Close())
		},
		op: func(st *Store) { _ = st.Delete("a") },
		check: func(t *testing.T, st *Store, cut bool) {
			checkRecords(t, st, "b", 5)
			switch got := st.List(); {
			case cut && slices.Equal(got, []string{"a", "b"}):
				checkRecords(t, st, "a", 5)
				s, _ := st.Stream("a")
				g, err := s.Group("g", nil)
				noErr(t, err)
				if c := g.Committed(); c != 3 {
					t.Fatalf("group committed %d after the cut, want 3", c)
				}
				noErr(t, g.Close())
			case slices.Equal(got, []string{"b"}):
				if _, err := st.Stream("a"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Stream of the deleted stream = %v", err)
				}
				_, err := st.Create("a", nil)
				noErr(t, err)
				publishSynced(t, st, "a", 1)
				checkRecords(t, st, "a", 1)
			default:
				t.Fatalf("streams after the cut: %q", got)
			}
		},
	})
}

// TestCrashCheckpoint: a power cut at any step of a group's checkpoint
// leaves its position at the previous checkpoint or the new one, and
// delivery resumes there: nothing acked before the surviving checkpoint
// comes again, nothing unacked is lost.
func TestCrashCheckpoint(t *testing.T) {
	const n = 10
	runCrash(t, crashScenario{
		name: "checkpoint",
		setup: func(t *testing.T, st *Store) {
			s, err := st.Create("a", _crashCfg)
			noErr(t, err)
			publishSynced(t, st, "a", n)
			g, err := s.Group("g", &GroupOptions{CheckpointEvery: time.Hour})
			noErr(t, err)
			ctx := context.Background()
			for range 7 {
				m, err := g.Next(ctx, nil)
				noErr(t, err)
				noErr(t, g.Ack(m.Seq))
				if m.Seq == 3 {
					noErr(t, g.Checkpoint())
				}
			}
		},
		op: func(st *Store) {
			s, _ := st.Stream("a")
			g, _ := s.Group("g", nil)
			_ = g.Checkpoint()
		},
		check: func(t *testing.T, st *Store, cut bool) {
			s, err := st.Stream("a")
			noErr(t, err)
			g, err := s.Group("g", nil)
			noErr(t, err)
			defer g.Close()
			c := g.Committed()
			if c != 8 && (!cut || c != 4) {
				t.Fatalf("group committed %d after the cut, want 4 or 8", c)
			}
			if o := g.opts; o.CheckpointEvery != time.Hour {
				t.Fatalf("group options after the cut: %+v", o)
			}
			for want := c; want <= n; want++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				m, err := g.Next(ctx, nil)
				cancel()
				noErr(t, err)
				if m.Seq != want || string(m.Data) != fmt.Sprintf("a-%d", want-1) {
					t.Fatalf("delivered %d %q, want %d", m.Seq, m.Data, want)
				}
				noErr(t, g.Ack(m.Seq))
			}
		},
	})
}

// TestCrashGroupCreate: a power cut while a group is created leaves it
// absent or whole: reopened, it has its options and starts where asked.
func TestCrashGroupCreate(t *testing.T) {
	const n = 6
	runCrash(t, crashScenario{
		name: "group create",
		setup: func(t *testing.T, st *Store) {
			_, err := st.Create("a", _crashCfg)
			noErr(t, err)
			publishSynced(t, st, "a", n)
		},
		op: func(st *Store) {
			s, _ := st.Stream("a")
			_, _ = s.Group("g", &GroupOptions{AckWait: time.Minute, StartAt: 4})
		},
		check: func(t *testing.T, st *Store, cut bool) {
			s, err := st.Stream("a")
			noErr(t, err)
			// Reopened with the same options, as a consumer restarting would.
			g, err := s.Group("g", &GroupOptions{AckWait: time.Minute, StartAt: 4})
			noErr(t, err)
			defer g.Close()
			if g.opts.AckWait != time.Minute {
				t.Fatalf("AckWait %v", g.opts.AckWait)
			}
			m, err := g.Next(context.Background(), nil)
			noErr(t, err)
			if m.Seq != 4 {
				t.Fatalf("group starts at %d, want 4", m.Seq)
			}
		},
	})
}

// TestPowerCutAfterOpenCreatedParents cuts the power after a record was
// confirmed in a store whose directory Open created with its missing
// parents: every directory Open created must be durable, or the whole
// store is gone.
func TestPowerCutAfterOpenCreatedParents(t *testing.T) {
	mem := vfs.NewMem()
	if err := vfs.MkdirAllDurable(mem, "/data"); err != nil {
		t.Fatal(err)
	}
	const dir = "/data/brokers/b1/store"
	st, err := Open(dir, &Options{fsys: mem})
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := s.Publish([]byte("confirmed"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDurable(context.Background(), seq); err != nil {
		t.Fatal(err)
	}
	crashed := mem.Crash(nil)
	st.Close()
	st2, err := Open(dir, &Options{fsys: crashed})
	if err != nil {
		t.Fatalf("record %d was confirmed, but after the cut the store does not open: %v", seq, err)
	}
	defer st2.Close()
	if names := st2.List(); !slices.Contains(names, "orders") {
		t.Fatalf("record %d was confirmed, but after the cut the store lists %q", seq, names)
	}
}
