package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/appendlog/appendlog/internal/vfs"
)

// Store layout. A store directory holds:
//
//	STORE                     marker: {"format":"appendlog-stream","version":1}
//	LOCK                      held by the open Store (one per directory)
//	streams/NAME/stream.json  the stream's Config
//	streams/NAME/log/         the stream's wal.Log (its cursors are the groups' positions)
//	streams/NAME/groups/G.json a group's options and start; written before its position
//
// Every JSON file is replaced atomically: written to a temporary file in
// the same directory, fdatasynced, renamed over the old one, and the
// directory fsynced. A stream is created in streams/.new-NAME and renamed
// into place once whole; it is deleted by a rename to streams/.del-NAME
// before its files are removed. Open removes what such a crash leaves
// behind, so a stream is always whole or absent.
const (
	_storeFile   = "STORE"
	_lockFile    = "LOCK"
	_streamsDir  = "streams"
	_streamFile  = "stream.json"
	_logDir      = "log"
	_groupsDir   = "groups"
	_newPrefix   = ".new-"
	_delPrefix   = ".del-"
	_tmpSuffix   = ".tmp"
	_storeFormat = "appendlog-stream"
	_storeVer    = 1
	// _maxMeta bounds a metadata file's size: anything larger is not ours.
	_maxMeta = 64 << 10
)

// Name length bounds, in bytes.
const (
	// MaxName bounds the length of a stream name: a directory entry.
	MaxName = 255
	// MaxGroupName bounds the length of a group name: its options file
	// NAME.json, and that file's temporary name NAME.json.tmp, are
	// directory entries too.
	MaxGroupName = MaxName - len(".json"+_tmpSuffix)
)

// checkName reports why name cannot name a stream or a group, or nil. A
// valid name is 1 to MaxName (a stream) or MaxGroupName (a group) bytes of
// ASCII letters, digits, '.', '_' and '-', not "." or "..", and not
// starting with '.' (names starting with '.' are the store's own
// temporary entries): it can never reach a path outside its directory.
func checkName(kind, name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s %q: %s", ErrName, kind, name, why) }
	limit := MaxName
	if kind == "group" {
		limit = MaxGroupName
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > limit:
		return bad(fmt.Sprintf("%d bytes (max %d)", len(name), limit))
	case name[0] == '.':
		return bad("starts with '.'")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return bad(fmt.Sprintf("byte %d is 0x%02x (want ASCII letters, digits, '.', '_' or '-')", i, c))
		}
	}
	return nil
}

// storeMarker is the content of the STORE file.
type storeMarker struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// MetaError reports a metadata file of the store that cannot be used: Path
// is the file, Problem what is wrong with it. errors.Is(err, ErrBadMeta)
// matches it.
type MetaError struct {
	Path    string
	Problem string
}

func (e *MetaError) Error() string {
	return fmt.Sprintf("stream: bad metadata file %s: %s", e.Path, e.Problem)
}

// Is reports whether target is ErrBadMeta.
func (e *MetaError) Is(target error) bool { return target == ErrBadMeta }

// writeJSON replaces path with v encoded as JSON, atomically: a temporary
// file beside it, fdatasync, rename, directory fsync.
func writeJSON(fsys vfs.FS, path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("stream: encode %s: %w", path, err)
	}
	b = append(b, '\n')
	tmp := path + _tmpSuffix
	// A regular file only: a symbolic link there would have the write go
	// to a file outside the store, and the rename put the link in place.
	f, err := fsys.OpenRegular(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("stream: write %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return fmt.Errorf("stream: write %s: %w", tmp, err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return fmt.Errorf("stream: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("stream: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("stream: close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("stream: write %s: %w", path, err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("stream: write %s: sync directory: %w", path, err)
	}
	return nil
}

// readJSON decodes the JSON file path into v, strictly: unknown fields,
// trailing data and a file too large to be ours are a *MetaError naming
// the file. A missing file wraps fs.ErrNotExist; anything but a regular
// file (a named pipe would block the open for ever) is an error naming it.
func readJSON(fsys vfs.FS, path string, v any) error {
	f, err := fsys.OpenRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("stream: read %s: %w", path, err)
	}
	if size > _maxMeta {
		return &MetaError{Path: path, Problem: fmt.Sprintf("%d bytes, a metadata file has at most %d", size, _maxMeta)}
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("stream: read %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &MetaError{Path: path, Problem: describeJSONError(b, err)}
	}
	if dec.More() {
		return &MetaError{Path: path, Problem: fmt.Sprintf("trailing data at byte %d", dec.InputOffset())}
	}
	return nil
}

// describeJSONError says where in b a decoding error is.
func describeJSONError(b []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(b) == 0:
		return "empty file"
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q at byte %d: %v", te.Field, te.Offset, err)
	}
	return err.Error()
}

// removeAll removes path and everything below it, following no symbolic
// link: a link is removed, never what it points to (outside the store,
// perhaps). A missing path is no error.
func removeAll(fsys vfs.FS, path string) error {
	err := fsys.Remove(path) // a file, a link or an empty directory
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ents, lerr := fsys.ReadDir(path)
	if errors.Is(lerr, fs.ErrNotExist) {
		return nil
	}
	if lerr != nil {
		return err // not a directory that can be listed: Remove's error
	}
	for _, e := range ents {
		p := filepath.Join(path, e.Name())
		if e.IsDir() { // the entry's own type: a link is not a directory
			if err := removeAll(fsys, p); err != nil {
				return err
			}
		} else if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
