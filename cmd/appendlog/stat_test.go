package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// TestStatDirectoryKinds: stat refuses what verify refuses, with the same
// messages and exit statuses, and creates nothing.
func TestStatDirectoryKinds(t *testing.T) {
	base := t.TempDir()
	foreign := filepath.Join(base, "foreign")
	mkdir(t, foreign)
	for _, n := range []string{"passwd", "hosts", "fstab"} {
		writeFile(t, filepath.Join(foreign, n), []byte("root:x:0:0\n"))
	}
	file := filepath.Join(base, "file")
	writeFile(t, file, []byte("x"))
	empty := filepath.Join(base, "empty")
	mkdir(t, empty)
	for _, tc := range []struct {
		dir  string
		code int
		want string
	}{
		{foreign, 1, foreign + ": not an appendlog log: no segments and no appendlog LOCK file, but 3 other files (fstab, hosts, passwd)"},
		{filepath.Join(base, "missing"), 1, filepath.Join(base, "missing") + ": no such directory"},
		{file, 1, file + ": not a directory"},
		{empty, 0, "records: none (next seq 1)"},
	} {
		for _, args := range [][]string{{"stat", tc.dir}, {"stat", "--json", tc.dir}} {
			r := runInProcess(args...)
			checkNoCrash(t, r)
			want := tc.want
			if tc.code == 0 && args[1] == "--json" {
				want = `"next_seq": 1`
			}
			expect(t, r, tc.code, want)
			if strings.Contains(r.stderr, "wal:") {
				t.Fatalf("the wal package's prefix reaches the user:\n%s", r)
			}
		}
	}
	if ents, _ := os.ReadDir(foreign); len(ents) != 3 {
		t.Fatalf("stat wrote into a foreign directory: %v", ents)
	}
}

// TestStatCursors: stat lists segments and cursors with their lag, as text
// and JSON, and names a damaged cursor file.
func TestStatCursors(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 3000)
	l, err := wal.Open(d, &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Cursor("orders")
	if err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 1000; s++ {
		if err := c.Ack(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "stat", d)
	expect(t, r, 0, "records: 3000, first seq 1, last seq 3000, durable seq 3000",
		"00000000000000000001.seg  seqs 1..", "sealed", "active", "torn tail: none", "gaps: none",
		"cursor orders: committed 1001, lag 2000 records (")
	r = cli(t, "stat", "--json", d)
	expect(t, r, 0)
	var s statReport
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("stat --json: %v\n%s", err, r)
	}
	if len(s.Segments) < 2 || s.Records != 3000 || s.LastSeq != 3000 || s.DurableSeq != 3000 ||
		len(s.Cursors) != 1 || s.Cursors[0].Committed != 1001 || s.Cursors[0].Lag != 2000 || s.Cursors[0].LagBytes <= 0 {
		t.Fatalf("stat --json = %+v", s)
	}
	var bytes int64
	for i, g := range s.Segments {
		bytes += g.Bytes
		if i > 0 && g.FirstSeq != s.Segments[i-1].LastSeq+1 {
			t.Fatalf("segments do not chain: %+v", s.Segments)
		}
	}
	if bytes != s.Bytes || s.Segments[len(s.Segments)-1].Sealed || !s.Segments[0].Sealed {
		t.Fatalf("stat --json segments = %+v, total %d", s.Segments, s.Bytes)
	}

	path := filepath.Join(d, "cursors", "orders")
	writeFile(t, path, []byte("garbage, not a cursor"))
	r = cli(t, "stat", d)
	expect(t, r, exitFailure, "cursor orders: bad cursor file "+path+": not a cursor file")
}

// TestStatWhileAnotherProcessWrites runs stat on a log that appendlog load,
// another process, is writing: stat must succeed every time and see the
// log grow.
func TestStatWhileAnotherProcessWrites(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	load := exec.CommandContext(ctx, cliPath, "load", "--records", "300000", "--size", "64", "--segment-size", "64KiB", "--sync", "never", "--dir", d)
	load.Env = cliEnv()
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- load.Wait() }()
	var seen []uint64
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			running = false
		default:
		}
		if _, err := os.Stat(d); err != nil {
			continue // not created yet
		}
		r := cli(t, "stat", "--json", d)
		if r.code != 0 {
			t.Fatalf("stat of a log being written:\n%s", r)
		}
		var s statReport
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		seen = append(seen, s.Records)
	}
	t.Logf("stat saw %v records (%d runs)", seen, len(seen))
	if len(seen) < 2 || seen[len(seen)-1] != 300000 {
		t.Fatalf("stat saw %v records", seen)
	}
}

// TestMixedLogs: stat prints a log's ID; a segment copied in from another
// log with the same sequence numbers makes verify, stat, dump and repair
// exit 1 naming the file and both IDs, and repair --force changes nothing.
func TestMixedLogs(t *testing.T) {
	base := t.TempDir()
	mk := func(name string) string {
		d := filepath.Join(base, name)
		l, err := wal.Open(d, &wal.Options{SegmentSize: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4000 {
			if _, err := l.Append([]byte(strings.Repeat("x", i%40))); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := mk("a"), mk("b")
	r := runInProcess("stat", "--json", b)
	expect(t, r, 0, `"log_id"`)
	var st struct {
		LogID string `json:"log_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.LogID) != 32 {
		t.Fatalf("stat --json log_id %q (%v):\n%s", st.LogID, err, r)
	}
	ra := runInProcess("stat", a)
	expect(t, ra, 0, "log id: ")
	if strings.Contains(ra.stdout, st.LogID) {
		t.Fatalf("two logs have the same ID %s", st.LogID)
	}
	seg := "00000000000000000001.seg"
	data, err := os.ReadFile(filepath.Join(a, seg))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(b, seg), data)
	for _, args := range [][]string{{"verify", b}, {"stat", b}, {"dump", "--count", b}, {"repair", b}, {"repair", "--force", b}} {
		r := runInProcess(args...)
		checkNoCrash(t, r)
		expect(t, r, 1, filepath.Join(b, seg), st.LogID, "another log")
	}
	if got, _ := os.ReadFile(filepath.Join(b, seg)); string(got) != string(data) {
		t.Fatal("repair changed the segment of another log")
	}
}
