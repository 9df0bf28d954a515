package bench

import (
	"strings"
	"testing"
)

func TestRecommendNamesAShortTail(t *testing.T) {
	res := func(name string, mbps float64, p999 int64) Result {
		return Result{Strategy: name, RecordSize: 128, Writers: 8, Status: StatusOK,
			MBPerSec: Stat{Median: mbps, Min: mbps, Max: mbps}, P999Ns: p999}
	}
	for _, tc := range []struct {
		name    string
		results []Result
		want    string // ShortTail, "" for none
	}{
		{"faster-but-stalls", []Result{res("write", 300, 3000), res("writev", 2200, 31000), res("ring", 1900, 2300), res("slow-but-smooth", 500, 400)}, "ring"},
		{"best-already-has-short-tail", []Result{res("write", 300, 3000), res("ring", 2000, 2300), res("writev", 1900, 31000)}, ""},
		{"short-tail-too-slow", []Result{res("write", 300, 3000), res("writev", 2200, 31000), res("mmap", 1000, 900)}, ""},
		{"no-latency-samples", []Result{res("write", 300, 0), res("writev", 2200, 0), res("ring", 1900, 0)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := recommend(tc.results)
			if len(recs) != 1 {
				t.Fatalf("%d recommendations", len(recs))
			}
			r := recs[0]
			if r.ShortTail != tc.want {
				t.Fatalf("ShortTail %q, want %q (%s)", r.ShortTail, tc.want, r.Text)
			}
			if tc.want != "" && !strings.Contains(r.Text, "where a Write must not stall, use "+tc.want) {
				t.Fatalf("text does not name it: %s", r.Text)
			}
			if tc.want == "" && strings.Contains(r.Text, "must not stall") {
				t.Fatalf("text names a short tail: %s", r.Text)
			}
		})
	}
}
