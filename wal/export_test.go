package wal

import "github.com/appendlog/appendlog/internal/vfs"

// WithFS returns o with its file system set to fsys, for the external tests
// (the field is unexported: its type lives in an internal package).
func WithFS(o Options, fsys vfs.FS) Options {
	o.fsys = fsys
	return o
}
