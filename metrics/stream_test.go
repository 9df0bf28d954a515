package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/appendlog/appendlog/stream"
)

// sample returns the value of the sample of family name whose labels are
// exactly want, checking the family's type.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	if f.GetType() != typ {
		t.Fatalf("%s is a %v, want %v", name, f.GetType(), typ)
	}
next:
	for _, m := range f.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		for _, l := range m.Label {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		if typ == dto.MetricType_COUNTER {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s has no sample labelled %v", name, want)
	return 0
}

// TestStoreCollector publishes to two streams, consumes and acks part of
// one through a group, and checks every stream and group metric of a
// scrape against the Stats.
func TestStoreCollector(t *testing.T) {
	st, err := stream.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	orders, err := st.Create("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create("idle", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := orders.Publish(fmt.Appendf(nil, "order %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := orders.WaitDurable(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	// A short CheckpointEvery makes the group's timer (which checks ack
	// deadlines, and from whose first pass after a delivery OldestUnacked
	// counts) run every 20 ms.
	g, err := orders.Group("billing", &stream.GroupOptions{CheckpointEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for i := range 30 {
		m, err := g.Next(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i < 20 {
			if err := g.Ack(m.Seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	for start := time.Now(); g.Stats().OldestUnacked == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("OldestUnacked still 0 with 10 records pending")
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewStoreCollector(st, prometheus.Labels{"store": "main"}))
	fams := scrape(t, reg)
	C, G := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	for _, name := range []string{"orders", "idle"} {
		s, err := st.Stream(name)
		if err != nil {
			t.Fatal(err)
		}
		ss := s.Stats()
		lv := map[string]string{"store": "main", "stream": name}
		for _, w := range []metricWant{
			{"appendlog_stream_first_seq", G, float64(ss.FirstSeq)},
			{"appendlog_stream_next_seq", G, float64(ss.NextSeq)},
			{"appendlog_stream_durable_seq", G, float64(ss.DurableSeq)},
			{"appendlog_stream_published_records_total", C, float64(ss.Published)},
			{"appendlog_stream_published_bytes_total", C, float64(ss.PublishedBytes)},
			{"appendlog_stream_disk_bytes", G, float64(ss.DiskBytes)},
			{"appendlog_stream_groups", G, float64(ss.Groups)},
		} {
			if got := sample(t, fams, w.name, w.typ, lv); got != w.want {
				t.Errorf("%s{stream=%q} = %v, want %v", w.name, name, got, w.want)
			}
		}
	}
	lv := map[string]string{"store": "main", "stream": "orders"}
	if sample(t, fams, "appendlog_stream_published_records_total", C, lv) != 100 || sample(t, fams, "appendlog_stream_open", G, lv) != 1 ||
		sample(t, fams, "appendlog_stream_groups", G, lv) != 1 || sample(t, fams, "appendlog_stream_disk_bytes", G, lv) == 0 {
		t.Error("orders: want 100 published, open, one group, bytes on disk")
	}
	gs := g.Stats()
	glv := map[string]string{"store": "main", "stream": "orders", "group": "billing"}
	for _, w := range []metricWant{
		{"appendlog_stream_group_committed_seq", G, float64(gs.Committed)},
		{"appendlog_stream_group_delivered_total", C, float64(gs.Delivered)},
		{"appendlog_stream_group_redelivered_total", C, float64(gs.Redelivered)},
		{"appendlog_stream_group_acked_total", C, float64(gs.Acked)},
		{"appendlog_stream_group_nacked_total", C, float64(gs.Nacked)},
		{"appendlog_stream_group_dead_total", C, float64(gs.Dead)},
		{"appendlog_stream_group_skipped_total", C, float64(gs.Skipped)},
		{"appendlog_stream_group_pending", G, float64(gs.Pending)},
		{"appendlog_stream_group_lag_records", G, float64(gs.LagRecords)},
		{"appendlog_stream_group_lag_bytes", G, float64(gs.LagBytes)},
	} {
		if got := sample(t, fams, w.name, w.typ, glv); got != w.want {
			t.Errorf("%s = %v, want %v", w.name, got, w.want)
		}
	}
	if gs.Delivered != 30 || gs.Acked != 20 || gs.Pending != 10 || gs.Committed != 21 || gs.LagRecords != 70 {
		t.Errorf("the group's Stats after 30 deliveries and 20 acks: %+v", gs)
	}
	if w := sample(t, fams, "appendlog_stream_group_oldest_unacked_seconds", G, glv); w <= 0 {
		t.Errorf("oldest_unacked_seconds %v with 10 records pending", w)
	}
}
