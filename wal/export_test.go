package wal

import (
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// WithFS returns o with its file system set to fsys, for the external tests
// (the field is unexported: its type lives in an internal package).
func WithFS(o Options, fsys vfs.FS) Options {
	o.fsys = fsys
	return o
}

// WithMarkEvery returns o with the durable mark's write interval set to d
// (see _markEvery).
func WithMarkEvery(o Options, d time.Duration) Options {
	o.markEvery = d
	return o
}
