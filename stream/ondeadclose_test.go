package stream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/appendlog/appendlog/internal/vfs"
)

// deadGroup opens a store with a group whose OnDead, called from its
// timer for the one record it delivers and nobody acks, signals entered
// and then runs then (if set) after release is closed.
func deadGroup(t *testing.T, then func(st *Store, g *Group)) (st *Store, g *Group, entered, release chan struct{}) {
	t.Helper()
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: vfs.NewMem()})
	noErr(t, err)
	s, err := st.Create("s", nil)
	noErr(t, err)
	entered, release = make(chan struct{}), make(chan struct{})
	g, err = s.Group("g", &GroupOptions{AckWait: 4 * time.Millisecond, MaxDeliver: 1, OnDead: func(uint64, int) {
		close(entered)
		<-release
		if then != nil {
			then(st, g)
		}
	}})
	noErr(t, err)
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	_, err = g.Next(context.Background(), nil) // never acked: dead after AckWait
	noErr(t, err)
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("OnDead was not called")
	}
	return st, g, entered, release
}

// TestCloseJoinsOnDead: a Close from another goroutine while the group's
// timer is calling OnDead waits for OnDead to return and the timer to
// exit, whether it closes the group, the store, or the store after a
// Delete of the stream closed the group (Delete itself does not wait). A
// Close that returned with the timer still in OnDead left a goroutine
// running user code after it.
func TestCloseJoinsOnDead(t *testing.T) {
	for _, tc := range []string{"group", "store", "delete"} {
		t.Run(tc, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			st, g, _, release := deadGroup(t, nil)
			if tc == "delete" {
				noErr(t, st.Delete("s"))
			}
			closed := make(chan error, 1)
			go func() {
				if tc == "group" {
					closed <- errors.Join(g.Close(), st.Close())
					return
				}
				closed <- st.Close()
			}()
			select {
			case err := <-closed:
				noErr(t, err)
				leaked := goleak.Find(ignore)
				close(release)
				t.Fatalf("Close returned while the timer was still calling OnDead: %v", leaked)
			case <-time.After(200 * time.Millisecond):
			}
			close(release)
			noErr(t, <-closed)
			if err := goleak.Find(ignore); err != nil {
				t.Fatalf("after Close: %v", err)
			}
		})
	}
}

// TestCloseFromOnDeadWhileClosing: OnDead, called while another goroutine's
// Close waits for it, may close its group or the store, the close in
// progress included: nothing waits for ever.
func TestCloseFromOnDeadWhileClosing(t *testing.T) {
	for _, tc := range []struct{ outer, inner string }{
		{"group", "group"}, {"group", "store"}, {"store", "group"}, {"store", "store"},
	} {
		t.Run(tc.outer+"/"+tc.inner, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			inner := make(chan error, 1)
			st, g, _, release := deadGroup(t, func(st *Store, g *Group) {
				if tc.inner == "group" {
					inner <- g.Close()
					return
				}
				inner <- st.Close()
			})
			closed := make(chan error, 1)
			go func() {
				if tc.outer == "group" {
					closed <- g.Close()
					return
				}
				closed <- st.Close()
			}()
			time.Sleep(50 * time.Millisecond) // the outer Close waits for OnDead
			close(release)
			for _, c := range []chan error{inner, closed} {
				select {
				case err := <-c:
					noErr(t, err)
				case <-time.After(20 * time.Second):
					t.Fatal("a Close from OnDead, while another goroutine's Close waits for it, did not return")
				}
			}
			noErr(t, st.Close())
			if err := goleak.Find(ignore); err != nil {
				t.Fatalf("after Close: %v", err)
			}
		})
	}
}

// TestGoid: goid reads an id that is the same for every call of one
// goroutine and differs between goroutines.
func TestGoid(t *testing.T) {
	me := goid()
	if me == _unknownG || me != goid() {
		t.Fatalf("goid = %d, then %d: want one readable id", me, goid())
	}
	other := make(chan uint64)
	go func() { other <- goid() }()
	if o := <-other; o == me || o == _unknownG {
		t.Fatalf("goid of another goroutine = %d, this one's %d", o, me)
	}
}

// TestCloseFromOnDeadOfAnother: two groups' timers call OnDead at once, and
// each OnDead closes the other group, or its own and the other, or the
// store (a consumer giving up on any dead record). A Close made from an
// OnDead call does not wait for another group's OnDead, which may be
// waiting for it: none waits for ever.
func TestCloseFromOnDeadOfAnother(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b func(st *Store, a, b *Group) error // OnDead of a, of b
	}{
		{"each-closes-both",
			func(_ *Store, a, b *Group) error { return errors.Join(a.Close(), b.Close()) },
			func(_ *Store, a, b *Group) error { return errors.Join(a.Close(), b.Close()) }},
		{"each-closes-the-other",
			func(_ *Store, _, b *Group) error { return b.Close() },
			func(_ *Store, a, _ *Group) error { return a.Close() }},
		{"store-and-other-group",
			func(st *Store, _, _ *Group) error { return st.Close() },
			func(_ *Store, a, _ *Group) error { return a.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			st, err := Open("/st", &Options{IdleTimeout: -1, fsys: vfs.NewMem()})
			noErr(t, err)
			s, err := st.Create("s", nil)
			noErr(t, err)
			var a, b *Group
			var entered sync.WaitGroup
			entered.Add(2)
			closed := make(chan error, 2)
			onDead := func(fn func(st *Store, a, b *Group) error) func(uint64, int) {
				return func(uint64, int) {
					entered.Done()
					entered.Wait() // both timers are in OnDead
					closed <- fn(st, a, b)
				}
			}
			a, err = s.Group("a", &GroupOptions{AckWait: 4 * time.Millisecond, MaxDeliver: 1, OnDead: onDead(tc.a)})
			noErr(t, err)
			b, err = s.Group("b", &GroupOptions{AckWait: 4 * time.Millisecond, MaxDeliver: 1, OnDead: onDead(tc.b)})
			noErr(t, err)
			_, err = s.Publish([]byte("x"))
			noErr(t, err)
			for _, g := range []*Group{a, b} {
				_, err = g.Next(context.Background(), nil) // never acked: dead after AckWait
				noErr(t, err)
			}
			for range 2 {
				select {
				case err := <-closed:
					noErr(t, err)
				case <-time.After(20 * time.Second):
					t.Fatal("a Close from one group's OnDead, of a group whose timer was in OnDead, did not return")
				}
			}
			noErr(t, st.Close())
			if err := goleak.Find(ignore); err != nil {
				t.Fatalf("after Close: %v", err)
			}
		})
	}
}
