//go:build linux

package sys

import (
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// _watchMask is what a Watcher watches in its directory: entries created,
// renamed in or out, removed, and files written or closed after writing.
const _watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

func watchDir(w *Watcher) error {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return &fs.PathError{Op: "inotify_init1", Path: w.dir, Err: err}
	}
	if _, err := unix.InotifyAddWatch(fd, w.dir, _watchMask); err != nil {
		unix.Close(fd)
		return &fs.PathError{Op: "inotify_add_watch", Path: w.dir, Err: err}
	}
	w.fd = fd
	w.buf = make([]byte, 64<<10)
	return nil
}

func watchWait(w *Watcher, timeout time.Duration) (bool, error) {
	if w.fd < 0 {
		return false, &fs.PathError{Op: "inotify wait", Path: w.dir, Err: fs.ErrClosed}
	}
	if w.drain() {
		return true, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		// poll takes whole milliseconds: round up, or a timeout of a
		// fraction of one (or its remainder) would end early.
		ms := int((left + time.Millisecond - 1) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, &fs.PathError{Op: "poll", Path: w.dir, Err: err}
		}
		if n > 0 && w.drain() {
			return true, nil
		}
	}
}

// drain reads and discards the pending events; it reports whether there
// were any.
func (w *Watcher) drain() bool {
	any := false
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return any
		}
		any = true
	}
}

func watchClose(w *Watcher) error {
	if w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: w.dir, Err: err}
	}
	return nil
}
