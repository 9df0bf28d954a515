package sys

import "time"

// Watcher reports changes to the entries of one directory: files created,
// renamed into it, removed, or written (inotify on Linux). Elsewhere it
// reports nothing and Wait only bounds the caller's poll. A Watcher is for
// one goroutine.
type Watcher struct {
	dir string
	fd  int // the inotify descriptor; -1 where there is none
	buf []byte
}

// WatchDir starts watching dir.
func WatchDir(dir string) (*Watcher, error) {
	w := &Watcher{dir: dir, fd: -1}
	if err := watchDir(w); err != nil {
		return nil, err
	}
	return w, nil
}

// Notifies reports whether the Watcher gets change events from the system
// (false: Wait only times out, and the caller polls).
func (w *Watcher) Notifies() bool { return w.fd >= 0 }

// Wait returns once something changed in the directory since the last
// Wait (changed true), or once timeout has passed (changed false).
// Events are discarded: the caller looks at the directory again.
func (w *Watcher) Wait(timeout time.Duration) (changed bool, err error) {
	return watchWait(w, timeout)
}

// Close stops watching.
func (w *Watcher) Close() error { return watchClose(w) }
