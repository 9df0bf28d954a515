//go:build !linux

package sys

import (
	"os"
	"time"
)

type timer struct {
	t      *time.Timer
	closed bool
}

func (t *timer) open() error { return nil }

func (t *timer) sleep(d time.Duration) error {
	if t.closed {
		return os.ErrClosed
	}
	if t.t == nil {
		t.t = time.NewTimer(d)
	} else {
		t.t.Reset(d)
	}
	<-t.t.C
	return nil
}

func (t *timer) close() error {
	if t.closed {
		return os.ErrClosed
	}
	t.closed = true
	if t.t != nil {
		t.t.Stop()
	}
	return nil
}
