package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/wal"
)

// TestLargeRecords: the reading commands read a log whose writer allowed
// records longer than the package default (2 MiB), as a stream may, where
// the defaults refused them as too large.
func TestLargeRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	l, err := wal.Open(dir, &wal.Options{BufferSize: 16 << 20, MaxRecordSize: 4 << 20, SegmentSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 3<<20)
	for _, p := range [][]byte{[]byte("small"), big, []byte("after")} {
		if _, err := l.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := l.Cursor("c")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, cli(t, "verify", dir), exitOK, "3 records")
	expect(t, cli(t, "dump", dir, "--count"), exitOK, "3")
	r := cli(t, "dump", dir, "--from", "2")
	expect(t, r, exitOK, "3\tafter")
	if !strings.Contains(r.stdout, "2\t"+string(big[:64])) {
		t.Fatalf("dump --from 2 does not print the large record")
	}
	expect(t, cli(t, "tail", dir, "--from", "3"), exitOK, "3\tafter")
	expect(t, cli(t, "stat", dir), exitOK, "cursor c: committed 1, lag 3 records")
	expect(t, cli(t, "repair", dir), exitOK)
}

// TestShipLargeRecord: ship reads a log whose records are longer than
// wal's default bound, and stops at one too large for Kafka with its own
// error (ship.ErrRecordTooLarge), the records before it shipped.
func TestShipLargeRecord(t *testing.T) {
	addr := kafkaCluster(t, "big")
	dir := filepath.Join(t.TempDir(), "log")
	l, err := wal.Open(dir, &wal.Options{BufferSize: 16 << 20, MaxRecordSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]byte{[]byte("small"), bytes.Repeat([]byte("x"), 3<<20)} {
		if _, err := l.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := runInProcess("ship", "--dir", dir, "--brokers", addr, "--topic", "big")
	expect(t, r, exitFailure, "record too large for Kafka", "record 2")
	if n := topicRecords(t, addr, "big"); n != 1 {
		t.Fatalf("topic holds %d records, want the 1 before the large one", n)
	}
}
