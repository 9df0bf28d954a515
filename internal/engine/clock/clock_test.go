package clock

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Unix(1e9, 0)

// fired reports whether tm has a fire waiting, and its time.
func fired(tm Timer) (time.Time, bool) {
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimersFireInDeadlineOrder(t *testing.T) {
	f := NewFake(t0)
	late, early := f.NewTimer(20*time.Millisecond), f.NewTimer(10*time.Millisecond)
	if got := f.Deadlines(); len(got) != 2 || !got[0].Equal(t0.Add(10*time.Millisecond)) || !got[1].Equal(t0.Add(20*time.Millisecond)) {
		t.Fatalf("deadlines %v", got)
	}
	if at, ok := f.Next(); !ok || !at.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("Next = %v, %v", at, ok)
	}
	f.Advance(10*time.Millisecond - 1)
	if _, ok := fired(early); ok {
		t.Fatal("fired before its deadline")
	}
	f.Advance(1)
	if at, ok := fired(early); !ok || !at.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("early timer: %v, %v", at, ok)
	}
	if _, ok := fired(late); ok {
		t.Fatal("late timer fired early")
	}
	if n := f.Timers(); n != 1 {
		t.Fatalf("%d timers armed, want 1", n)
	}
	f.Advance(time.Hour)
	if _, ok := fired(late); !ok {
		t.Fatal("late timer did not fire")
	}
	if _, ok := f.Next(); ok || f.Timers() != 0 {
		t.Fatal("a fired timer is still armed")
	}
}

// TestFakeResetDiscardsStaleFire: as time.Timer since Go 1.23, no fire from
// before Reset or Stop is received after it.
func TestFakeResetDiscardsStaleFire(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Millisecond)
	f.Advance(time.Millisecond) // fires, not received
	if tm.Reset(time.Second) {
		t.Error("Reset of a fired timer reports it armed")
	}
	if _, ok := fired(tm); ok {
		t.Fatal("stale fire received after Reset")
	}
	if !tm.Stop() {
		t.Error("Stop of an armed timer reports it not armed")
	}
	f.Advance(time.Hour)
	if _, ok := fired(tm); ok {
		t.Fatal("stopped timer fired")
	}
	tm.Reset(0)
	if _, ok := fired(tm); !ok {
		t.Fatal("Reset(0) did not fire at once")
	}
	if _, ok := fired(f.NewTimer(-time.Second)); !ok {
		t.Fatal("NewTimer(<0) did not fire at once")
	}
	if f.Timers() != 0 {
		t.Fatal("timers that fired at once are armed")
	}
}

func TestFakeWaitTimers(t *testing.T) {
	f := NewFake(t0)
	armed := make(chan Timer)
	go func() { armed <- f.NewTimer(time.Second) }()
	if err := f.WaitTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	tm := <-armed
	tm.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.WaitTimers(ctx, 1); err != context.Canceled {
		t.Fatalf("WaitTimers with no timer and a cancelled context: %v", err)
	}
}

// TestReal: the system clock's timers fire and stop.
func TestReal(t *testing.T) {
	c := Real()
	if d := time.Since(c.Now()); d < 0 || d > time.Minute {
		t.Fatalf("Real().Now() is %v from time.Now", d)
	}
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reports it not armed")
	}
	tm.Reset(time.Microsecond)
	<-tm.C()
}
