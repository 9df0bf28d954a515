// Package walhook lets other packages of this module set what package wal
// keeps unexported in its Options: the file system a log uses. Package wal
// sets the hook in its init; the stream store uses it so that one file
// system (a crashable one in tests) holds both its metadata and its logs.
package walhook

import "github.com/appendlog/appendlog/internal/vfs"

// SetFS sets the file system of opts, a *wal.Options. It is set by package
// wal's init, so it is non-nil in any program that imports wal.
var SetFS func(opts any, fsys vfs.FS)
