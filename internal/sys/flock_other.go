//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package sys

import (
	"os"
	"path/filepath"
	"sync"
)

// Without flock(2), locks are process-local: a table from absolute path to
// the *os.File holding it. This excludes a second open in the same process
// (the common mistake) but not other processes. Closing a file does not
// release its entry; call Unlock first. The table is process-global state on
// purpose: it stands in for the kernel's lock table.
var _locks struct {
	sync.Mutex
	held map[string]*os.File // Protected by the mutex.
}

func lockKey(f *os.File) (string, error) {
	return filepath.Abs(f.Name())
}

func tryLock(f *os.File) error {
	key, err := lockKey(f)
	if err != nil {
		return err
	}
	_locks.Lock()
	defer _locks.Unlock()
	if h, ok := _locks.held[key]; ok && h != f {
		return ErrLocked
	}
	if _locks.held == nil {
		_locks.held = make(map[string]*os.File)
	}
	_locks.held[key] = f
	return nil
}

func unlock(f *os.File) error {
	key, err := lockKey(f)
	if err != nil {
		return err
	}
	_locks.Lock()
	defer _locks.Unlock()
	if _locks.held[key] == f {
		delete(_locks.held, key)
	}
	return nil
}
