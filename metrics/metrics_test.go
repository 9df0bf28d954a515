package metrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/appendlog/appendlog/shmlog"
	"github.com/appendlog/appendlog/wal"
	"github.com/appendlog/appendlog/writer"
)

// scrape serves reg through promhttp, GETs it as a scraper would, and
// parses the text exposition.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the one sample of the family name, checking its type and
// its label.
// metricWant is a metric's expected type and value.
type metricWant struct {
	name string
	typ  dto.MetricType
	want float64
}

// checkValues checks each wanted metric of the sample labelled label.
func checkValues(t *testing.T, fams map[string]*dto.MetricFamily, label string, wants []metricWant) {
	t.Helper()
	for _, m := range wants {
		if got := value(t, fams, m.name, m.typ, label); got != m.want {
			t.Errorf("%s = %v, want %v", m.name, got, m.want)
		}
	}
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType, label string) float64 {
	t.Helper()
	if f, ok := fams[name]; ok && len(f.Metric) != 1 {
		t.Fatalf("%s has %d samples", name, len(f.Metric))
	}
	return sample(t, fams, name, typ, map[string]string{"log": label})
}

// TestRingCollector writes through a Ring with drops and rotation, then
// scrapes a registry holding its collector and checks every metric's name,
// type and value against the Ring's Stats.
func TestRingCollector(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := writer.OpenFile(path, &writer.RingOptions{Rotate: &writer.Rotate{MaxBytes: writer.MinRotateBytes}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		fmt.Fprintf(r, "record %d of the metrics test\n", i)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewRingCollector(r, prometheus.Labels{"log": "app"}))
	fams := scrape(t, reg)
	s := r.Stats()
	if s.Rotations == 0 || s.Flushes == 0 || s.Syncs == 0 {
		t.Fatalf("the test wrote too little: %+v", s)
	}
	C, G := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	checkValues(t, fams, "app", []metricWant{
		{"appendlog_writer_records_total", C, float64(s.Records)},
		{"appendlog_writer_bytes_total", C, float64(s.Bytes)},
		{"appendlog_writer_written_records_total", C, float64(s.WrittenRecords)},
		{"appendlog_writer_written_bytes_total", C, float64(s.WrittenBytes)},
		{"appendlog_writer_dropped_records_total", C, float64(s.DroppedRecords)},
		{"appendlog_writer_dropped_bytes_total", C, float64(s.DroppedBytes)},
		{"appendlog_writer_markers_total", C, float64(s.Markers)},
		{"appendlog_writer_queued_bytes", G, float64(s.QueuedBytes)},
		{"appendlog_writer_flushes_total", C, float64(s.Flushes)},
		{"appendlog_writer_syncs_total", C, float64(s.Syncs)},
		{"appendlog_writer_blocked_waits_total", C, float64(s.BlockedWaits)},
		{"appendlog_writer_blocked_seconds_total", C, s.Blocked.Seconds()},
		{"appendlog_writer_retries_total", C, float64(s.Retries)},
		{"appendlog_writer_rotations_total", C, float64(s.Rotations)},
		{"appendlog_writer_rotation_errors_total", C, float64(s.RotationErrors)},
		{"appendlog_writer_reopens_total", C, float64(s.Reopens)},
		{"appendlog_writer_failed", G, 0},
	})
	if value(t, fams, "appendlog_writer_records_total", C, "app") != 2000 {
		t.Error("records_total is not the 2000 records written")
	}
	checkHistogram(t, fams, "appendlog_writer_flush_duration_seconds", &s.FlushLatency)
}

// checkHistogram checks the scraped histogram name against h: count, sum
// and cumulative buckets at powers of two nanoseconds.
func checkHistogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, h0 *writer.Histogram) {
	t.Helper()
	f := fams[name]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s: %v", name, f)
	}
	h := f.Metric[0].Histogram
	if h.GetSampleCount() != h0.Count() || h.GetSampleSum() != h0.Sum.Seconds() || h.GetSampleSum() <= 0 {
		t.Errorf("%s: count %d sum %v, Stats %d and %v", name, h.GetSampleCount(), h.GetSampleSum(), h0.Count(), h0.Sum)
	}
	var cum uint64
	for i, b := range h.Bucket {
		if i == len(h.Bucket)-1 && math.IsInf(b.GetUpperBound(), 1) {
			if b.GetCumulativeCount() != h0.Count() {
				t.Errorf("%s: +Inf bucket %d, want %d", name, b.GetCumulativeCount(), h0.Count())
			}
			break
		}
		cum += h0.Buckets[i]
		bound := 0.0
		if i > 0 {
			bound = (time.Duration(1) << i).Seconds()
		}
		if b.GetUpperBound() != bound || b.GetCumulativeCount() != cum {
			t.Fatalf("%s: bucket %d: le %v count %d, want le %v count %d", name, i, b.GetUpperBound(), b.GetCumulativeCount(), bound, cum)
		}
	}
	if n := len(h.Bucket); n != writer.HistogramBuckets-1 && n != writer.HistogramBuckets {
		t.Errorf("%s: %d buckets", name, len(h.Bucket))
	}
}

// failingWriter fails every write: a Ring over it with a retry limit fails.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// TestRingCollectorFailed: the failed gauge follows the Ring's sticky error.
func TestRingCollectorFailed(t *testing.T) {
	r, err := writer.NewRing(failingWriter{}, &writer.RingOptions{RetryLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewRingCollector(r, prometheus.Labels{"log": "net"}))
	if v := value(t, scrape(t, reg), "appendlog_writer_failed", dto.MetricType_GAUGE, "net"); v != 0 {
		t.Errorf("failed = %v before any write", v)
	}
	r.Write([]byte("x\n"))
	r.Flush(t.Context()) // fails: the Ring gave up
	if r.Err() == nil {
		t.Fatal("the Ring did not fail")
	}
	if v := value(t, scrape(t, reg), "appendlog_writer_failed", dto.MetricType_GAUGE, "net"); v != 1 {
		t.Errorf("failed = %v after the Ring failed", v)
	}
	r.Close()
}

// TestLogCollector appends to a wal.Log, syncs, and checks the scraped
// metrics against its Stats.
func TestLogCollector(t *testing.T) {
	l, err := wal.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 100 {
		if _, err := l.Append(fmt.Appendf(nil, "entry %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A lone Sync whose context cannot be cancelled may sync on this
	// goroutine (InlineSyncs); one more record for it to cover.
	if _, err := l.Append([]byte("entry 100")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewLogCollector(l, prometheus.Labels{"log": "orders"}))
	fams := scrape(t, reg)
	s := l.Stats()
	C, G := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	checkValues(t, fams, "orders", []metricWant{
		{"appendlog_wal_appended_bytes_total", C, float64(s.Appended)},
		{"appendlog_wal_written_bytes_total", C, float64(s.Written)},
		{"appendlog_wal_writes_total", C, float64(s.Writes)},
		{"appendlog_wal_syncs_total", C, float64(s.Syncs)},
		{"appendlog_wal_next_seq", G, float64(s.NextSeq)},
		{"appendlog_wal_durable_seq", G, float64(s.DurableSeq)},
		{"appendlog_wal_segments_created_total", C, float64(s.SegmentsCreated)},
		{"appendlog_wal_segments_deleted_total", C, float64(s.SegmentsDeleted)},
		{"appendlog_wal_synced_records_total", C, float64(s.SyncedRecords)},
		{"appendlog_wal_inline_syncs_total", C, float64(s.InlineSyncs)},
		{"appendlog_wal_retention_skipped_total", C, float64(s.RetentionSkipped)},
		{"appendlog_wal_failed", G, 0},
	})
	if s.Syncs == 0 || s.DurableSeq != s.NextSeq-1 || s.SyncedRecords != 101 || s.InlineSyncs > s.Syncs {
		t.Errorf("after Sync: %+v", s)
	}
	checkHistogram(t, fams, "appendlog_wal_sync_duration_seconds", &s.SyncLatency)
}

// TestShmCollector scrapes a shared-memory log's collector and checks
// names, types and values against its Stats.
func TestShmCollector(t *testing.T) {
	l, err := shmlog.Open(filepath.Join(t.TempDir(), "shm"), &shmlog.Options{MaxFileSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 300 {
		if _, err := l.Append(fmt.Appendf(nil, "entry %095d", i)); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewShmCollector(l, prometheus.Labels{"log": "shared"}))
	fams := scrape(t, reg)
	s := l.Stats()
	C, G := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	checkValues(t, fams, "shared", []metricWant{
		{"appendlog_shmlog_claims_total", C, float64(s.Claims)},
		{"appendlog_shmlog_active_file", G, float64(s.ActiveFile)},
		{"appendlog_shmlog_active_file_bytes", G, float64(s.ActiveBytes)},
		{"appendlog_shmlog_file_capacity_bytes", G, float64(s.Capacity)},
		{"appendlog_shmlog_padded_frames_total", C, 0},
	})
	if s.Claims < 300 || s.ActiveFile == 0 || s.ActiveBytes == 0 {
		t.Errorf("after 300 appends into 16 KiB files: %+v", s)
	}
}

// TestShmCollectorAfterClose scrapes a shmlog.Log's collector after the Log
// closed: shmlog.Log.Stats is then all zero, and a collector that passed it
// on would send claims_total back to 0 (a counter going backwards) and a
// capacity of 0 bytes. A closed log's metrics are left out instead.
func TestShmCollectorAfterClose(t *testing.T) {
	l, err := shmlog.Open(filepath.Join(t.TempDir(), "shm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := l.Append([]byte("entry")); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewShmCollector(l, prometheus.Labels{"log": "shared"}))
	fams := scrape(t, reg)
	if got := value(t, fams, "appendlog_shmlog_claims_total", dto.MetricType_COUNTER, "shared"); got < 10 {
		t.Fatalf("claims_total %v before Close, want at least 10", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, reg)
	for name, f := range fams {
		t.Errorf("closed log still exports %s = %v", name, f.Metric)
	}
}
