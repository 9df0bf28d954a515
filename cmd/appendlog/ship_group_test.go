package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/appendlog/appendlog/stream"
)

// TestShipCLIStreamSummaryNamesGroup: ship --stream reads through the
// group --group, and its summary names that group's position, not the
// --cursor it does not use.
func TestShipCLIStreamSummaryNamesGroup(t *testing.T) {
	addr := kafkaCluster(t, "orders")
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
	r := runInProcess("ship", "--dir", d, "--stream", "orders", "--group", "to-kafka", "--brokers", addr, "--topic", "orders")
	expect(t, r, exitOK, "appendlog ship: 10 records", "group to-kafka at 11")
}
