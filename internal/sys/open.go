package sys

import "os"

// OpenNoFollow opens name as os.OpenFile does, except that it does not
// follow a symbolic link at name (its last component: the open fails, with
// ELOOP on Linux) and does not block opening a named pipe or a device
// (O_NOFOLLOW|O_NONBLOCK). The file opened may be of any type; a caller
// that wants a regular file checks with Stat on the returned file, which
// describes what was opened, not what name points at now. O_NONBLOCK stays
// set on the returned file; reads and writes of regular files ignore it.
//
// On platforms without O_NOFOLLOW it checks with os.Lstat first and opens
// after, which a file swapped in between can defeat.
func OpenNoFollow(name string, flag int, perm os.FileMode) (*os.File, error) {
	return openNoFollow(name, flag, perm)
}
