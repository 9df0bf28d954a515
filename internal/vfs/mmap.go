package vfs

import "github.com/appendlog/appendlog/internal/sys"

// Mapper is implemented by Files whose bytes can be mapped into memory
// read-only. The OS file system's files implement it; the in-memory one's
// do not, and callers fall back to ReadAt.
type Mapper interface {
	// MapRead maps bytes [0, n) of the file read-only and shared, and
	// returns the mapping and the function that releases it. The mapping
	// outlives the file being closed. n may exceed the file's size:
	// touching a page wholly past the end of the file then raises SIGBUS,
	// so a caller touches only bytes it knows the file holds, and the file
	// must never be truncated below them while mapped.
	MapRead(n int) (b []byte, unmap func() error, err error)
}

var _ Mapper = (*osFile)(nil)

// MapRead implements Mapper with sys.Mmap.
func (o *osFile) MapRead(n int) ([]byte, func() error, error) {
	b, err := sys.Mmap(o.f, 0, n, false)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return sys.Munmap(b) }, nil
}
