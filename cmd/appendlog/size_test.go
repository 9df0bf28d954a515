package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1": 1, "128": 128, "128B": 128, "128b": 128, " 8KiB ": 8192, "8 KiB": 8192,
		"4K": 4096, "4k": 4096, "4Ki": 4096, "4KiB": 4096, "4kib": 4096, "4KB": 4000, "4kB": 4000,
		"1M": 1 << 20, "1MiB": 1 << 20, "32MiB": 32 << 20, "1MB": 1e6,
		"1G": 1 << 30, "1GiB": 1 << 30, "1GB": 1e9, "2TiB": 2 << 40, "2TB": 2e12,
		"7EiB": 7 << 60,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "x", "1.5K", "-1", "-1KiB", "KiB", "4XB", "4 K iB", "1e6", "0x10",
		"9223372036854775808", "8192PiB", "10000000TB", "4KiBB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		} else if !strings.Contains(err.Error(), "128, 64KiB, 32MiB") {
			t.Errorf("parseSize(%q) error %q does not say what a size looks like", in, err)
		}
	}
}

// TestSizeFlags checks that every size flag takes unit suffixes and that a
// bad value is a usage error naming the flag and the value.
func TestSizeFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	r := runInProcess("load", "--dir", dir, "--records", "40", "--size", "1KiB", "--segment-size", "64KiB", "--json")
	checkNoCrash(t, r)
	expect(t, r, exitOK, `"size":1024`, `"segment_size":65536`, `"records":40`)
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("40 records of 1 KiB in 64 KiB segments: got %d segments, want 1", len(segs))
	}
	r = runInProcess("load", "--dir", dir, "--records", "200", "--size", "1KiB", "--segment-size", "64KiB")
	checkNoCrash(t, r)
	expect(t, r, exitOK)
	if segs := segments(t, dir); len(segs) < 4 {
		t.Fatalf("240 records of 1 KiB in 64 KiB segments: got %d segments, want at least 4", len(segs))
	}

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"load", "--size", "4x"}, []string{`"4x"`, "--size", "64KiB"}},
		{[]string{"load", "--size", "1.5KiB"}, []string{`"1.5KiB"`, "--size"}},
		{[]string{"load", "--size", "3GiB"}, []string{"--size must be at most"}},
		{[]string{"load", "--size", "16EiB"}, []string{`"16EiB"`, "--size", "too large"}},
		{[]string{"load", "--segment-size", "-5"}, []string{`"-5"`, "--segment-size", "negative"}},
		{[]string{"load", "--segment-size", "1MB2"}, []string{`"1MB2"`, "--segment-size"}},
		{[]string{"load", "--segment-size", "1KiB"}, []string{"SegmentSize 1024"}},
		{[]string{"bench", "--max-bytes", "lots"}, []string{`"lots"`, "--max-bytes", "64KiB"}},
		{[]string{"bench", "--sizes", "128,4q"}, []string{`"4q"`, "--sizes"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runInProcess(tt.args...)
			checkNoCrash(t, r)
			expect(t, r, exitUsage, append(tt.want, "--help")...)
		})
	}
}

func TestSizeFlagHelp(t *testing.T) {
	r := runInProcess("load", "--help")
	expect(t, r, exitOK, "--size size", "--segment-size size", "KiB = 1024", "KB = 1000")
	r = runInProcess("bench", "--help")
	expect(t, r, exitOK, "--max-bytes size")
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1: "1 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		8 << 20: "8.0 MiB", 500e9: "465.7 GiB", 3 << 40: "3.0 TiB", -1: "-1 B",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
