package shipmetrics

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/appendlog/appendlog/ship"
	"github.com/appendlog/appendlog/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCollector ships a log to an in-process Kafka, then gathers a
// registry holding the shipper's collector and checks every metric's
// name, type and value against its Stats.
func TestCollector(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.1:0")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := wal.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 500 {
		if _, err := l.Append(fmt.Appendf(nil, "event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ship.NewKafka(l, &ship.KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(s, prometheus.Labels{"log": "events"}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Shipped != 500 || st.Committed != 501 || st.LastAck.IsZero() {
		t.Fatalf("the shipper did not ship the log: %+v", st)
	}
	got := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		got[f.GetName()] = f
	}
	C, G := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	for _, w := range []struct {
		name string
		typ  dto.MetricType
		want float64
	}{
		{"appendlog_ship_shipped_records_total", C, float64(st.Shipped)},
		{"appendlog_ship_shipped_bytes_total", C, float64(st.Bytes)},
		{"appendlog_ship_skipped_records_total", C, float64(st.Skipped)},
		{"appendlog_ship_in_flight_records", G, float64(st.InFlight)},
		{"appendlog_ship_committed_seq", G, float64(st.Committed)},
		{"appendlog_ship_lag_records", G, float64(st.LagRecords)},
		{"appendlog_ship_lag_bytes", G, float64(st.LagBytes)},
		{"appendlog_ship_oldest_in_flight_seconds", G, st.OldestInFlight.Seconds()},
		{"appendlog_ship_oldest_unshipped_seconds", G, st.OldestUnshipped.Seconds()},
		{"appendlog_ship_connect_errors_total", C, float64(st.ConnectErrors)},
		{"appendlog_ship_produce_errors_total", C, float64(st.ProduceErrors)},
		{"appendlog_ship_last_ack_timestamp_seconds", G, float64(st.LastAck.UnixNano()) / 1e9},
	} {
		f, ok := got[w.name]
		if !ok {
			t.Errorf("no metric %s", w.name)
			continue
		}
		if f.GetType() != w.typ || len(f.Metric) != 1 {
			t.Errorf("%s: a %v with %d samples, want one %v", w.name, f.GetType(), len(f.Metric), w.typ)
			continue
		}
		m := f.Metric[0]
		if len(m.Label) != 1 || m.Label[0].GetName() != "log" || m.Label[0].GetValue() != "events" {
			t.Errorf("%s labels %v", w.name, m.Label)
		}
		v := m.GetGauge().GetValue()
		if w.typ == C {
			v = m.GetCounter().GetValue()
		}
		if v != w.want {
			t.Errorf("%s = %v, want %v", w.name, v, w.want)
		}
	}
}
