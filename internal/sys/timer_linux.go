//go:build linux

package sys

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

type timer struct {
	f   *os.File // the timerfd, non-blocking, so reads park in the poller
	buf [8]byte
}

func (t *timer) open() error {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("timerfd_create: %w", err)
	}
	t.f = os.NewFile(uintptr(fd), "timerfd")
	return nil
}

func (t *timer) sleep(d time.Duration) error {
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	err := control(t.f, func(fd uintptr) error { return unix.TimerfdSettime(int(fd), 0, &its, nil) })
	if err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	// The read returns the expirations once the one-shot timer fires.
	if _, err := t.f.Read(t.buf[:]); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return os.ErrClosed
		}
		return fmt.Errorf("read timerfd: %w", err)
	}
	return nil
}

func (t *timer) close() error { return t.f.Close() }
