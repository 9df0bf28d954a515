package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/stream"
)

// TestLoadAndShipRefuseStoreDir: load and ship (without --stream) refuse
// the directory of a stream store, naming its streams' logs, and leave it
// as it was. The store's LOCK file made the wal package take it for an
// empty log: load wrote a segment into the store's root (exit 0), and ship
// made a cursors directory there and shipped nothing (exit 0).
func TestLoadAndShipRefuseStoreDir(t *testing.T) {
	d := filepath.Join(t.TempDir(), "store")
	st, err := stream.Open(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := s.Publish(fmt.Appendf(nil, "order %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, d)
	logDir := filepath.Join(d, "streams", "orders", "log")
	addr := kafkaCluster(t, "t")
	for _, args := range [][]string{
		{"load", "--dir", d, "--records", "10"},
		{"ship", "--dir", d, "--brokers", addr, "--topic", "t"},
	} {
		r := runInProcess(args...)
		checkNoCrash(t, r)
		expect(t, r, exitFailure, d+": a stream store (1 stream), not a log", logDir)
	}
	if after := snapshot(t, d); after != before {
		t.Fatalf("the store changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if n := topicRecords(t, addr, "t"); n != 0 {
		t.Fatalf("%d records shipped", n)
	}
}
