// Package clock is the engine's source of time and timers: the system clock
// (Real), or a Fake that tests move forward by hand, so that a test of a
// timed policy (a flush interval, a batch age, a claim deadline) advances
// time instead of sleeping.
//
// Timers follow the semantics of time.Timer since Go 1.23: after Reset or
// Stop returns, a receive from C never yields a value from before the call.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed; at once when d <= 0.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer, as time.Timer.
type Timer interface {
	// C returns the channel the timer sends on when it fires.
	C() <-chan time.Time
	// Reset makes the timer fire d from now, replacing any earlier
	// setting. It reports whether the timer was armed.
	Reset(d time.Duration) bool
	// Stop disarms the timer. It reports whether the timer was armed.
	Stop() bool
}

// Real returns the system clock: time.Now and time.NewTimer.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// realTimer is pointer-shaped: storing it in a Timer does not allocate.
type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
func (t realTimer) Stop() bool                 { return t.t.Stop() }

// Fake is a Clock whose time moves only when Advance is called. Its timers
// fire inside Advance, in the order of their deadlines. It is safe for
// concurrent use.
//
// A test synchronises with the code under test through the timers: it
// waits (WaitTimers) until that code has armed the timer it expects, then
// advances the clock to its deadline (Next, Advance).
type Fake struct {
	mu      sync.Mutex
	now     time.Time     // Protected by mu.
	armed   []*fakeTimer  // Protected by mu. Armed timers, in no order.
	changed chan struct{} // Protected by mu. Closed and replaced when armed changes.
}

// NewFake returns a Fake clock that reads start until advanced.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the clock has been advanced by d
// (at once if d <= 0).
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d (not at all if d <= 0) and fires,
// in deadline order, every timer due by the new time.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d > 0 {
		f.now = f.now.Add(d)
	}
	sort.Slice(f.armed, func(i, j int) bool { return f.armed[i].at.Before(f.armed[j].at) })
	n := 0
	for n < len(f.armed) && !f.armed[n].at.After(f.now) {
		f.armed[n].fireLocked()
		n++
	}
	if n > 0 {
		f.armed = append(f.armed[:0], f.armed[n:]...)
		f.changedLocked()
	}
}

// Next returns the earliest deadline of the armed timers; ok is false when
// none is armed.
func (f *Fake) Next() (at time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, t := range f.armed {
		if i == 0 || t.at.Before(at) {
			at = t.at
		}
	}
	return at, len(f.armed) > 0
}

// Deadlines returns the deadlines of the armed timers, earliest first.
func (f *Fake) Deadlines() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := make([]time.Time, len(f.armed))
	for i, t := range f.armed {
		d[i] = t.at
	}
	sort.Slice(d, func(i, j int) bool { return d[i].Before(d[j]) })
	return d
}

// Changed returns a channel that is closed when a timer is next armed,
// reset, stopped or fired. Read it before the state it guards, then wait
// on it, and no change is missed.
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Timers returns how many timers are armed.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

// WaitTimers waits until at least n timers are armed, or ctx is done.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		ch := f.Changed()
		if f.Timers() >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) changedLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// disarmLocked removes t from armed and reports whether it was there.
func (f *Fake) disarmLocked(t *fakeTimer) bool {
	for i, a := range f.armed {
		if a == t {
			f.armed = append(f.armed[:i], f.armed[i+1:]...)
			f.changedLocked()
			return true
		}
	}
	return false
}

type fakeTimer struct {
	f  *Fake
	c  chan time.Time // capacity 1: holds a fire not yet received
	at time.Time      // Protected by f.mu.
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.disarmLocked(t)
	t.drain()
	t.at = f.now.Add(d)
	if d <= 0 {
		t.fireLocked()
		return was
	}
	f.armed = append(f.armed, t)
	f.changedLocked()
	return was
}

func (t *fakeTimer) Stop() bool {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	t.drain()
	return f.disarmLocked(t)
}

// fireLocked sends the fake time on c. REQUIRES: f.mu held, t not armed or
// about to be removed from armed, c drained since the last fire.
func (t *fakeTimer) fireLocked() {
	select {
	case t.c <- t.f.now:
	default:
	}
}

// drain discards a fire not yet received.
func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}
