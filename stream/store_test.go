package stream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
	"github.com/appendlog/appendlog/wal"
)

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t testing.TB, dir string, opts *Options) *Store {
	t.Helper()
	st, err := Open(dir, opts)
	noErr(t, err)
	return st
}

// TestCreateListDeleteReopen: streams and their records survive Close and
// Open; a deleted stream is gone, and calls on it say so.
func TestCreateListDeleteReopen(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	if st.fsys != vfs.OSParked() {
		t.Fatalf("a store's file system is %#v, want vfs.OSParked(): its syncs are parked", st.fsys)
	}
	direct := mustOpen(t, t.TempDir(), &Options{DirectSync: true})
	if direct.fsys != vfs.OS() {
		t.Fatalf("with DirectSync a store's file system is %#v, want vfs.OS()", direct.fsys)
	}
	noErr(t, direct.Close())
	cfg := &Config{SegmentSize: 64 << 10, Sync: wal.SyncNever, Retention: Retention{MaxBytes: 1 << 20, MaxAge: time.Hour, UntilAcked: true}, MaxRecordSize: 100 << 10}
	for _, n := range []string{"b", "a", "c.1_x-y"} {
		_, err := st.Create(n, cfg)
		noErr(t, err)
	}
	if _, err := st.Create("a", nil); !errors.Is(err, ErrExists) {
		t.Fatalf("Create of an existing stream = %v, want ErrExists", err)
	}
	if got := st.List(); !slices.Equal(got, []string{"a", "b", "c.1_x-y"}) {
		t.Fatalf("List = %q", got)
	}
	a, err := st.Stream("a")
	noErr(t, err)
	for i := range 10 {
		seq, err := a.Publish([]byte(fmt.Sprintf("r%d", i)))
		noErr(t, err)
		if seq != uint64(i+1) {
			t.Fatalf("Publish %d got seq %d", i, seq)
		}
	}
	b, _ := st.Stream("b")
	noErr(t, st.Delete("b"))
	if _, err := b.Publish([]byte("x")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Publish on a deleted stream = %v, want ErrNotFound", err)
	}
	if _, err := st.Stream("b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stream of a deleted stream = %v, want ErrNotFound", err)
	}
	if err := st.Delete("b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete twice = %v, want ErrNotFound", err)
	}
	noErr(t, st.Close())
	noErr(t, st.Close())
	if _, err := a.Publish([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close = %v, want ErrClosed", err)
	}
	if _, err := st.Create("d", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Create after Close = %v, want ErrClosed", err)
	}

	st = mustOpen(t, dir, nil)
	defer st.Close()
	if got := st.List(); !slices.Equal(got, []string{"a", "c.1_x-y"}) {
		t.Fatalf("List after reopen = %q", got)
	}
	a, err = st.Stream("a")
	noErr(t, err)
	if got := a.Config(); got != *cfg {
		t.Fatalf("Config after reopen = %+v, want %+v", got, *cfg)
	}
	g, err := a.Group("g", nil)
	noErr(t, err)
	for i := range 10 {
		m, err := g.Next(context.Background(), nil)
		noErr(t, err)
		if m.Seq != uint64(i+1) || string(m.Data) != fmt.Sprintf("r%d", i) || m.Delivery != 1 {
			t.Fatalf("record %d after reopen = %+v", i, m)
		}
		noErr(t, g.Ack(m.Seq))
	}
	if seq, err := a.Publish([]byte("after")); err != nil || seq != 11 {
		t.Fatalf("Publish after reopen = %d, %v; want 11", seq, err)
	}
}

// TestNames: bad stream and group names are refused with ErrName, naming
// the name, and create nothing.
func TestNames(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	defer st.Close()
	s, err := st.Create("ok", nil)
	noErr(t, err)
	for _, n := range []string{"", ".", "..", "../x", "a/b", "/abs", ".hidden", "nul\x00", "sp ace", "é", strings.Repeat("n", MaxName+1)} {
		if _, err := st.Create(n, nil); !errors.Is(err, ErrName) || !strings.Contains(err.Error(), fmt.Sprintf("%q", n)) {
			t.Errorf("Create(%q) = %v, want ErrName quoting it", n, err)
		}
		if _, err := st.Stream(n); !errors.Is(err, ErrName) {
			t.Errorf("Stream(%q) = %v, want ErrName", n, err)
		}
		if err := st.Delete(n); !errors.Is(err, ErrName) {
			t.Errorf("Delete(%q) = %v, want ErrName", n, err)
		}
		if _, err := s.Group(n, nil); !errors.Is(err, ErrName) {
			t.Errorf("Group(%q) = %v, want ErrName", n, err)
		}
	}
	long := strings.Repeat("n", MaxName)
	_, err = st.Create(long, nil)
	noErr(t, err)
	ents, err := os.ReadDir(filepath.Join(dir, _streamsDir))
	noErr(t, err)
	if len(ents) != 2 {
		t.Fatalf("streams directory holds %d entries, want 2 (ok and the long name)", len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Fatalf("something was created beside the store: %v", ents)
	}
}

// TestOpenMisuse: a directory of unrelated files is not a store; a store
// is open once; bad options are refused.
func TestOpenMisuse(t *testing.T) {
	dir := t.TempDir()
	noErr(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644))
	if _, err := Open(dir, nil); !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("Open of a directory of other files = %v, want ErrNotStore naming notes.txt", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("Open wrote into a foreign directory: %v", ents)
	}

	// A store whose creation was killed before STORE was renamed into
	// place (TestBrokerKill found one): the lock, an empty streams
	// directory and a partial STORE.tmp. Open finishes creating it.
	dir = t.TempDir()
	noErr(t, os.WriteFile(filepath.Join(dir, _lockFile), nil, 0o644))
	noErr(t, os.Mkdir(filepath.Join(dir, _streamsDir), 0o755))
	noErr(t, os.WriteFile(filepath.Join(dir, _storeFile+_tmpSuffix), []byte(`{"for`), 0o644))
	st := mustOpen(t, dir, nil)
	noErr(t, st.Close())
	st = mustOpen(t, dir, nil) // a store now
	noErr(t, st.Close())
	if _, err := os.Stat(filepath.Join(dir, _storeFile+_tmpSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("STORE.tmp after the store was created: %v", err)
	}

	dir = t.TempDir()
	st = mustOpen(t, dir, nil)
	if _, err := Open(dir, nil); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open = %v, want ErrInUse", err)
	}
	noErr(t, st.Close())
	st = mustOpen(t, dir, nil) // released by Close
	noErr(t, st.Close())

	if _, err := Open(t.TempDir(), &Options{BufferSize: 1000}); err == nil {
		t.Fatal("Open with a BufferSize that is not a power of two succeeded")
	}
	if _, err := Open(t.TempDir(), &Options{ReaderWindow: 100}); err == nil || !strings.Contains(err.Error(), "ReaderWindow") {
		t.Fatalf("Open with a 100-byte ReaderWindow: %v", err)
	}
	st = mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	if _, err := st.Create("x", &Config{SegmentSize: 10}); err == nil {
		t.Fatal("Create with a 10-byte SegmentSize succeeded")
	}
	if _, err := st.Create("x", &Config{Retention: Retention{MaxBytes: -1}}); err == nil {
		t.Fatal("Create with negative MaxBytes succeeded")
	}
	if got := st.List(); len(got) != 0 {
		t.Fatalf("failed Creates left streams: %q", got)
	}
}

// TestBadMetadata: damaged or missing metadata files, and a stream
// directory deleted underneath, give errors naming the file; no panic.
func TestBadMetadata(t *testing.T) {
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		st := mustOpen(t, dir, nil)
		s, err := st.Create("s", nil)
		noErr(t, err)
		g, err := s.Group("g", nil)
		noErr(t, err)
		noErr(t, g.Close())
		noErr(t, st.Close())
		return dir
	}
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"store marker garbage", _storeFile, "{not json", "not valid JSON at byte"},
		{"store marker foreign", _storeFile, `{"format":"other","version":1}`, `format "other"`},
		{"store marker unknown field", _storeFile, `{"format":"appendlog-stream","version":1,"x":1}`, "unknown field"},
		{"stream config empty", "streams/s/stream.json", "", "empty file"},
		{"stream config wrong name", "streams/s/stream.json", `{"version":1,"name":"t"}`, `records stream "t"`},
		{"stream config bad sync", "streams/s/stream.json", `{"version":1,"name":"s","sync":"sometimes"}`, "sync:"},
		{"stream config version", "streams/s/stream.json", `{"version":9,"name":"s"}`, "version 9"},
		{"stream config missing", "streams/s/stream.json", "-", "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			p := filepath.Join(dir, tc.file)
			if tc.content == "-" {
				noErr(t, os.Remove(p))
			} else {
				noErr(t, os.WriteFile(p, []byte(tc.content), 0o644))
			}
			_, err := Open(dir, nil)
			if !errors.Is(err, ErrBadMeta) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v; want ErrBadMeta naming %s and saying %q", err, p, tc.want)
			}
		})
	}
	t.Run("group options damaged", func(t *testing.T) {
		dir := setup(t)
		p := filepath.Join(dir, "streams/s/groups/g.json")
		noErr(t, os.WriteFile(p, []byte(`{"version":1,"name":"g","ack_wait":"soon"}`), 0o644))
		st := mustOpen(t, dir, nil)
		defer st.Close()
		s, err := st.Stream("s")
		noErr(t, err)
		if _, err := s.Group("g", nil); !errors.Is(err, ErrBadMeta) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "ack_wait") {
			t.Fatalf("Group with damaged options = %v; want ErrBadMeta naming %s", err, p)
		}
		// Stored options out of range are the file's fault too.
		noErr(t, os.WriteFile(p, []byte(`{"version":1,"name":"g","ack_wait":"1s","checkpoint_every":"1s","max_ack_pending":99999}`), 0o644))
		if _, err := s.Group("g", nil); !errors.Is(err, ErrBadMeta) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "MaxAckPending 99999") {
			t.Fatalf("Group with stored options out of range = %v; want ErrBadMeta naming %s", err, p)
		}
		// Options given explicitly replace the damaged file.
		g, err := s.Group("g", &GroupOptions{AckWait: time.Minute})
		noErr(t, err)
		noErr(t, g.Close())
	})
	t.Run("stream directory deleted underneath", func(t *testing.T) {
		dir := setup(t)
		st := mustOpen(t, dir, nil)
		defer st.Close()
		s, err := st.Stream("s")
		noErr(t, err)
		noErr(t, os.RemoveAll(filepath.Join(dir, "streams/s")))
		_, err = s.Publish([]byte("x"))
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "streams/s")) {
			t.Fatalf("Publish into a deleted directory = %v; want an error naming it", err)
		}
	})
	t.Run("leftovers of a crashed create and delete", func(t *testing.T) {
		dir := setup(t)
		for _, n := range []string{_newPrefix + "abc", _delPrefix + "def"} {
			noErr(t, os.MkdirAll(filepath.Join(dir, _streamsDir, n, "log"), 0o755))
		}
		st := mustOpen(t, dir, nil)
		defer st.Close()
		if got := st.List(); !slices.Equal(got, []string{"s"}) {
			t.Fatalf("List = %q, want [s]", got)
		}
		ents, _ := os.ReadDir(filepath.Join(dir, _streamsDir))
		if len(ents) != 1 {
			t.Fatalf("leftovers not removed: %v", ents)
		}
	})
}

// TestIdleClose: a stream unused for the idle timeout closes its log, and
// the next use opens it again with nothing lost; a stream with an open
// group stays open.
func TestIdleClose(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, &Options{IdleTimeout: 20 * time.Millisecond})
	defer st.Close()
	s, err := st.Create("s", &Config{Sync: wal.SyncNever})
	noErr(t, err)
	for range 5 {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	waitFor(t, "the idle stream to close", func() bool { return !s.Stats().Open })
	stats := s.Stats()
	if stats.NextSeq != 6 || stats.Published != 5 {
		t.Fatalf("Stats of the idle stream = %+v, want NextSeq 6, Published 5", stats)
	}
	seq, err := s.Publish([]byte("y"))
	if err != nil || seq != 6 {
		t.Fatalf("Publish after the idle close = %d, %v; want 6", seq, err)
	}
	noErr(t, s.WaitDurable(context.Background(), 6))
	g, err := s.Group("g", nil)
	noErr(t, err)
	for i := range 6 {
		m, err := g.Next(context.Background(), nil)
		noErr(t, err)
		if m.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, m.Seq)
		}
	}
	// With a group open the stream stays open through several periods.
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !s.Stats().Open {
			t.Fatal("a stream with an open group was closed as idle")
		}
		time.Sleep(5 * time.Millisecond)
	}
	noErr(t, g.Close())
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestScan: Scan reads the stream from any record to the last published,
// without a group; an error from fn stops it; a record below FirstSeq is a
// TruncatedError. DurableSeq confirms what WaitDurable waited for.
func TestScan(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{Sync: wal.SyncBatch})
	noErr(t, err)
	for i := range 100 {
		_, err := s.Publish([]byte(fmt.Sprint(i)))
		noErr(t, err)
	}
	var got []string
	noErr(t, s.Scan(91, func(seq uint64, rec []byte) error {
		if want := fmt.Sprint(seq - 1); string(rec) != want {
			t.Fatalf("record %d is %q, want %q", seq, rec, want)
		}
		got = append(got, string(rec))
		return nil
	}))
	if len(got) != 10 {
		t.Fatalf("Scan from 91 of 100 records read %d", len(got))
	}
	stop := errors.New("stop")
	n := 0
	if err := s.Scan(0, func(uint64, []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Scan with a failing fn = %v after %d records", err, n)
	}
	if err := s.Scan(101, func(uint64, []byte) error { return stop }); err != nil {
		t.Fatalf("Scan from the end = %v", err)
	}
	if n, st := s.NextSeq(), s.Stats().NextSeq; n != 101 || st != 101 {
		t.Fatalf("NextSeq %d, Stats().NextSeq %d after 100 records", n, st)
	}
	noErr(t, s.WaitDurable(context.Background(), 100))
	if d := s.DurableSeq(); d < 100 {
		t.Fatalf("DurableSeq %d after WaitDurable(100)", d)
	}
	// Scan moves no group: a group made after it starts at the first record.
	g, err := s.Group("g", nil)
	noErr(t, err)
	m, err := g.Next(context.Background(), nil)
	noErr(t, err)
	if m.Seq != 1 || string(m.Data) != "0" {
		t.Fatalf("a new group's first message after Scan: seq %d %q, want 1 \"0\"", m.Seq, m.Data)
	}
	noErr(t, g.Close())
}

// TestDefaultSizesFollowStreamCount: by default a stream's write buffer
// and reader window shrink as the store holds more streams, so that 1,000
// streams keep within the memory target; explicit Options win.
func TestDefaultSizesFollowStreamCount(t *testing.T) {
	st, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct {
		streams int64
		buffer  int
		window  int64
	}{
		{0, DefaultBufferSize, wal.DefaultReaderWindow},
		{20, DefaultBufferSize, wal.DefaultReaderWindow},
		{64, DefaultBufferSize, wal.DefaultReaderWindow},
		{65, DefaultBufferSize, 512 << 10},
		{256, DefaultBufferSize, 256 << 10},
		{300, 128 << 10, 128 << 10},
		{1000, 64 << 10, 64 << 10},
		{100000, 64 << 10, 64 << 10},
	} {
		st.count.Store(c.streams)
		if b, w := st.sizes(); b != c.buffer || w != c.window {
			t.Errorf("%d streams: buffer %d, window %d; want %d, %d", c.streams, b, w, c.buffer, c.window)
		}
	}
	st.opts.BufferSize, st.opts.ReaderWindow = 1<<20, 4<<20
	if b, w := st.sizes(); b != 1<<20 || w != 4<<20 {
		t.Errorf("explicit options: buffer %d, window %d", b, w)
	}
}
