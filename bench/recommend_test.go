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
		{"faster-but-stalls", []Result{res("write", 300, 3000), res("mmap", 2200, 31000), res("ring", 1900, 2300), res("page-aligned", 500, 400)}, "ring"},
		{"best-already-has-short-tail", []Result{res("write", 300, 3000), res("ring", 2000, 2300), res("mmap", 1900, 31000)}, ""},
		{"short-tail-too-slow", []Result{res("write", 300, 3000), res("mmap", 2200, 31000), res("page-aligned", 1000, 900)}, ""},
		{"no-latency-samples", []Result{res("write", 300, 0), res("mmap", 2200, 0), res("ring", 1900, 0)}, ""},
		{"short-tail-only-a-reference", []Result{res("write", 300, 3000), res("mmap", 2200, 31000), res("writev", 2000, 900)}, ""},
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

// TestRecommendNamesWhatTheLibraryOffers checks that a recommendation names
// a strategy a program can use, with the call that gives it, and mentions a
// hand-written reference only when it was faster beyond noise.
func TestRecommendNamesWhatTheLibraryOffers(t *testing.T) {
	res := func(name string, median, lo, hi float64) Result {
		return Result{Strategy: name, RecordSize: 128, Writers: 8, Status: StatusOK,
			MBPerSec: Stat{Median: median, Min: lo, Max: hi}}
	}
	for _, tc := range []struct {
		name          string
		results       []Result
		strategy, use string
		reference     string
		text          string
	}{
		{"reference-faster", []Result{res("write", 300, 290, 310), res("writev", 3000, 2900, 3100), res("io_uring", 2500, 2400, 2600), res("ring", 1900, 1800, 2000)},
			"ring", "writer.OpenFile(path, nil)", "writev", "6.3× faster than one write per record"},
		{"reference-within-noise", []Result{res("write", 300, 290, 310), res("writev", 2000, 1850, 2100), res("ring-direct", 1900, 1800, 2050)},
			"ring-direct", "writer.OpenFile(path, &writer.RingOptions{Direct: true})", "", "faster than one write per record"},
		{"nothing-beats-write", []Result{res("write", 300, 290, 310), res("page-aligned", 150, 140, 160)},
			"write", "os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644), one Write per record", "", "nothing measured beats one write per record"},
		{"only-references", []Result{res("writev", 2000, 1900, 2100), res("direct", 1000, 900, 1100)},
			"", "", "", "no strategy the library offers ran and verified"},
		{"avoided-faster", []Result{res("write", 300, 290, 310), res("slab", 3000, 2900, 3100), res("ring", 1900, 1800, 2000)},
			"ring", "writer.OpenFile(path, nil)", "slab", "the library does not recommend it: every Write takes a mutex"},
		{"avoided-within-noise", []Result{res("write", 300, 290, 310), res("slab", 2000, 1850, 2100), res("ring", 1900, 1800, 2050)},
			"ring", "writer.OpenFile(path, nil)", "", "faster than one write per record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := recommend(tc.results)
			if len(recs) != 1 {
				t.Fatalf("%d recommendations", len(recs))
			}
			r := recs[0]
			if r.Strategy != tc.strategy || r.Use != tc.use || r.Reference != tc.reference {
				t.Fatalf("got strategy %q use %q reference %q, want %q %q %q (%s)", r.Strategy, r.Use, r.Reference, tc.strategy, tc.use, tc.reference, r.Text)
			}
			if !strings.Contains(r.Text, tc.text) || (tc.use != "" && !strings.Contains(r.Text, "use "+tc.strategy+", "+tc.use)) {
				t.Fatalf("text %q lacks %q or the call", r.Text, tc.text)
			}
			if (tc.reference != "") != (strings.Contains(r.Text, "reference") || strings.Contains(r.Text, "does not recommend")) {
				t.Fatalf("text %q and reference %q disagree", r.Text, tc.reference)
			}
		})
	}
}

// TestStrategyUses checks that every strategy a recommendation may name says
// how to get it through appendlog or the standard library, and that the
// strategies with no Use are the hand-written references.
func TestStrategyUses(t *testing.T) {
	refs := map[string]bool{"writev": true, "direct": true, "io_uring": true}
	for _, s := range Strategies() {
		switch {
		case refs[s.Name] && s.Use != "":
			t.Errorf("%s is a hand-written reference but has Use %q", s.Name, s.Use)
		case !refs[s.Name] && !strings.HasPrefix(s.Use, "writer.") && !strings.HasPrefix(s.Use, "wal.") && !strings.HasPrefix(s.Use, "bufio.") && !strings.HasPrefix(s.Use, "os."):
			t.Errorf("%s: Use %q names no appendlog or standard-library call", s.Name, s.Use)
		}
	}
}
