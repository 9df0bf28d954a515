package sys

// FreeSpace returns the bytes available to an unprivileged user on the file
// system holding path (statfs(2): f_bavail blocks of f_frsize bytes). On
// platforms without statfs it returns an error wrapping
// errors.ErrUnsupported; errors are *fs.PathError with Op "statfs".
func FreeSpace(path string) (int64, error) {
	return freeSpace(path)
}
