package metrics_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/appendlog/appendlog/metrics"
	"github.com/appendlog/appendlog/writer"
)

// A service logs through a Ring and serves its metrics on /metrics. (A
// real service registers with prometheus.MustRegister and serves
// promhttp.Handler() with http.ListenAndServe; the test server here only
// lets the example scrape itself.)
func Example() {
	ring, err := writer.NewRing(io.Discard, nil) // writer.OpenFile("/var/log/app.log", nil) in a service
	if err != nil {
		log.Fatal(err)
	}
	logger := log.New(ring, "", 0)
	for i := range 3 {
		logger.Printf("request %d served", i)
	}
	ring.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewRingCollector(ring, prometheus.Labels{"log": "app"}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "appendlog_writer_records_total") ||
			strings.HasPrefix(line, "appendlog_writer_written_bytes_total") ||
			strings.HasPrefix(line, "appendlog_writer_failed") {
			fmt.Println(line)
		}
	}
	// Output:
	// appendlog_writer_failed{log="app"} 0
	// appendlog_writer_records_total{log="app"} 3
	// appendlog_writer_written_bytes_total{log="app"} 51
}
