package sys

import "os"

// Lock takes a lock on f, waiting as long as it takes (flock(2) LOCK_EX,
// or LOCK_SH when exclusive is false): shared locks coexist, an exclusive
// lock excludes every other. Like TryLock, the lock belongs to the open file
// description and is released by Unlock or when f is closed. Taking a lock
// of the other kind on the same f converts it (not atomically). Where
// flock(2) is missing it does nothing: see the package doc.
func Lock(f *os.File, exclusive bool) error {
	return pathErr("flock", f, lockWait(f, exclusive))
}
