package stream

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// _metaFiles are the metadata files FuzzMeta damages, by the fuzz input's
// first byte: the store marker, a stream's configuration and a group's
// options.
// _fuzzDisk is the size of FuzzMeta's disk.
const _fuzzDisk = 256 << 20

var _metaFiles = []string{_storeFile, "streams/s/" + _streamFile, "streams/s/" + _groupsDir + "/g.json"}

// metaStore makes a store with stream s and group g on a MemFS and
// returns it with the contents of its metadata files.
func metaStore(t testing.TB) (*vfs.MemFS, [][]byte) {
	mem := vfs.NewMem()
	st, err := Open("/st", &Options{IdleTimeout: -1, fsys: mem})
	noErr(t, err)
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{AckWait: time.Minute})
	noErr(t, err)
	noErr(t, g.Close())
	noErr(t, st.Close())
	var files [][]byte
	for _, name := range _metaFiles {
		f, err := mem.OpenFile(filepath.Join("/st", name), os.O_RDONLY, 0)
		noErr(t, err)
		size, err := f.Size()
		noErr(t, err)
		b := make([]byte, size)
		if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		noErr(t, f.Close())
		files = append(files, b)
	}
	return mem, files
}

// FuzzMeta replaces one metadata file of a store (the fuzz input's first
// byte picks which; the rest is its content) and opens the store, the
// stream and the group. Each either works (a record published is then
// delivered and acked) or fails with an error that names the file. No
// input panics, hangs or makes the store allocate without bound.
func FuzzMeta(f *testing.F) {
	_, files := metaStore(f)
	for i, b := range files {
		f.Add(append([]byte{byte(i)}, b...))
	}
	f.Add([]byte{0})
	f.Add([]byte("\x01{\"version\":1,\"name\":\"s\",\"segment_size\":1099511627776}"))
	f.Add([]byte("\x01{\"version\":1,\"name\":\"s\",\"max_record_size\":-1}"))
	f.Add([]byte("\x01{\"version\":1,\"name\":\"s\",\"max_age\":\"-5s\"}"))
	f.Add([]byte("\x02{\"version\":1,\"name\":\"g\",\"ack_wait\":\"1ns\",\"checkpoint_every\":\"1ns\",\"max_ack_pending\":1}"))
	f.Add([]byte("\x02{\"version\":1,\"name\":\"g\",\"start_at\":18446744073709551615}"))
	f.Add([]byte("\x02{\"version\":1,\"name\":\"h\"}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		mem, _ := metaStore(t)
		// A disk of 256 MiB: a damaged file may ask for huge segments,
		// which a real disk refuses with ENOSPC.
		fsys := vfs.WithFaults(mem, func(op vfs.Op, _ string, off int64, n int) (int, error) {
			if (op == vfs.OpWrite || op == vfs.OpPreallocate) && off+int64(n) > _fuzzDisk {
				return 0, syscall.ENOSPC
			}
			return n, nil
		})
		name := _metaFiles[int(in[0])%len(_metaFiles)]
		path := filepath.Join("/st", name)
		w, err := mem.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		noErr(t, err)
		if _, err := w.WriteAt(in[1:], 0); err != nil {
			t.Fatal(err)
		}
		noErr(t, w.Close())
		named := func(step string, err error) {
			t.Helper()
			if !strings.Contains(err.Error(), path) && !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("%s with %s damaged: %v; want an error naming the file", step, name, err)
			}
		}
		st, err := Open("/st", &Options{IdleTimeout: -1, fsys: fsys})
		if err != nil {
			named("Open", err)
			return
		}
		defer func() { noErr(t, st.Close()) }()
		s, err := st.Stream("s")
		if err != nil {
			named("Stream", err)
			return
		}
		g, err := s.Group("g", nil)
		if err != nil {
			named("Group", err)
			return
		}
		defer func() { noErr(t, g.Close()) }()
		seq, err := s.Publish([]byte("x"))
		if err != nil {
			named("Publish", err)
			return
		}
		if g.Committed() > seq {
			return // the group starts past the record (a stored StartAt)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := g.Next(ctx, nil)
		noErr(t, err)
		if m.Seq != seq || string(m.Data) != "x" {
			t.Fatalf("delivered %d %q, want %d \"x\"", m.Seq, m.Data, seq)
		}
		noErr(t, g.Ack(m.Seq))
	})
}
