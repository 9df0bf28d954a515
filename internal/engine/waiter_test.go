package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaiter checks a Broadcaster's Waiter: an armed Waiter is woken by the
// next Broadcast and disarmed by it, a wake-up of an earlier round is
// dropped by Arm, Release disarms, and a wait cycle does not allocate.
func TestWaiter(t *testing.T) {
	var b Broadcaster
	w1, w2 := b.Waiter(), b.Waiter()
	w1.Arm()
	w2.Arm()
	b.Broadcast()
	for i, w := range []*Waiter{w1, w2} {
		select {
		case <-w.C():
		default:
			t.Fatalf("waiter %d not woken", i)
		}
	}
	b.Broadcast() // nobody armed: no token
	select {
	case <-w1.C():
		t.Fatal("a disarmed waiter was woken")
	default:
	}
	w1.Arm()
	b.Broadcast()
	w1.Arm() // the token of the round before is dropped
	select {
	case <-w1.C():
		t.Fatal("Arm kept the wake-up of an earlier round")
	default:
	}
	w1.Release() // armed: removed
	w2.Release()
	if len(b.ws) != 0 {
		t.Fatalf("%d waiters left armed", len(b.ws))
	}
	w := b.Waiter()
	w.Release()
	if a := testing.AllocsPerRun(1000, func() {
		w := b.Waiter()
		w.Arm()
		b.Broadcast()
		<-w.C()
		w.Release()
	}); a != 0 {
		t.Errorf("%v allocs per wait cycle", a)
	}
}

// TestWaiterNoLostWakeup: goroutines wait with Waiters for a counter that
// other goroutines advance, broadcasting after each step, under -race; a
// lost wake-up leaves a waiter blocked until the deadline. With several
// broadcasters, Broadcasts overlap (each sends outside the lock, and the
// spare slice passes between them), and waiters that take a new Waiter
// from the pool for each wait get tokens a Broadcast sent to its last
// owner: spurious wake-ups, never lost ones.
func TestWaiterNoLostWakeup(t *testing.T) {
	for _, tc := range []struct {
		name         string
		broadcasters int
		fresh        bool // a new Waiter from the pool for every wait
	}{
		{"one broadcaster", 1, false},
		{"three broadcasters, pooled waiters", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				b Broadcaster
				v atomic.Uint64
			)
			const steps = 20000
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Go(func() {
					w := b.Waiter()
					defer func() { w.Release() }()
					for seen := uint64(0); seen < steps; {
						if tc.fresh {
							w.Release()
							w = b.Waiter()
						}
						w.Arm()
						if n := v.Load(); n > seen {
							seen = n
							continue
						}
						select {
						case <-w.C():
						case <-ctx.Done():
							errs <- ctx.Err()
							return
						}
					}
				})
			}
			var bw sync.WaitGroup
			for k := range tc.broadcasters {
				bw.Go(func() {
					for i := k; i < steps; i += tc.broadcasters {
						v.Add(1)
						b.Broadcast()
					}
				})
			}
			bw.Wait()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("a waiter missed the last wake-up: %v", err)
			}
		})
	}
}

// TestWaiterWokenPath pins the cheap path of a wait that ends with the
// wake-up it waited for: Release of a Waiter that a Broadcast disarmed does
// not take the Broadcaster's lock: with many waiters, every wait would
// otherwise queue on it once more and scan the armed list.
func TestWaiterWokenPath(t *testing.T) {
	var b Broadcaster
	w := b.Waiter()
	w.Arm()
	b.Broadcast()
	<-w.C()
	released := make(chan struct{})
	b.mu.Lock()
	go func() {
		w.Release()
		close(released)
	}()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("Release of a disarmed Waiter waited for the Broadcaster's lock")
	}
	b.mu.Unlock()

	// An armed Waiter still takes the lock and leaves the list.
	w = b.Waiter()
	w.Arm()
	b.mu.Lock()
	released = make(chan struct{})
	go func() {
		w.Release()
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("Release of an armed Waiter did not take the lock")
	case <-time.After(20 * time.Millisecond):
	}
	b.mu.Unlock()
	<-released
	if len(b.ws) != 0 {
		t.Fatalf("%d waiters left armed", len(b.ws))
	}

}
