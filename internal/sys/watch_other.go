//go:build !linux

package sys

import "time"

func watchDir(*Watcher) error { return nil }

// watchWait has no events to wait for: it waits out the timeout, the
// caller's poll interval.
func watchWait(_ *Watcher, timeout time.Duration) (bool, error) {
	time.Sleep(timeout)
	return false, nil
}

func watchClose(*Watcher) error { return nil }
