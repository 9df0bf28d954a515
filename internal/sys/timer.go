package sys

import "time"

// A Timer sleeps for precise short durations. A time.Timer of less than a
// millisecond ends about a millisecond late whenever every P is idle: the
// runtime then waits for it in epoll_wait, whose timeout is whole
// milliseconds. A paced load generator that sleeps a few hundred
// microseconds at a time therefore wakes in bursts a millisecond apart.
// On Linux a Timer is a timerfd(2) whose expiry is read through Go's
// poller, so a sleep ends when it is due; elsewhere it is a time.Timer.
//
// A Timer is for one goroutine at a time.
type Timer struct {
	t timer // platform state
}

// NewTimer returns a Timer. Close it when done.
func NewTimer() (*Timer, error) {
	t := &Timer{}
	if err := t.t.open(); err != nil {
		return nil, err
	}
	return t, nil
}

// Sleep returns once d has passed (at once for d <= 0). It never returns
// early.
func (t *Timer) Sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return t.t.sleep(d)
}

// Close releases the Timer.
func (t *Timer) Close() error { return t.t.close() }
