package bench

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// WriteTable writes the report as text: the machine, regime and ceiling,
// then one aligned table per record size, each followed by its
// recommendations.
func (r *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m := r.Machine
	ok, failed, skipped := 0, 0, 0
	for _, res := range r.Results {
		switch res.Status {
		case StatusOK:
			ok++
		case StatusFailed:
			failed++
		default:
			skipped++
		}
	}
	fmt.Fprintf(bw, "appendlog bench: %d %s × %d record %s × %d writer %s, %d measured runs per case after a warm-up; %d ok, %d failed, %d skipped; took %s\n",
		len(r.Strategies), plural(len(r.Strategies), "strategy", "strategies"),
		len(r.Sizes), plural(len(r.Sizes), "size", "sizes"),
		len(r.Writers), plural(len(r.Writers), "count", "counts"),
		r.Runs, ok, failed, skipped, r.Elapsed.Round(100*time.Millisecond))
	mem := ""
	if m.MemoryBytes > 0 {
		mem = fmt.Sprintf(", %.1f GiB RAM", float64(m.MemoryBytes)/(1<<30))
	}
	kernel := ""
	if m.Kernel != "" {
		kernel = ", kernel " + m.Kernel
	}
	fmt.Fprintf(bw, "machine:  %s, %d cores, GOMAXPROCS %d%s, %s/%s%s, %s; one clock read costs %.0f ns\n",
		m.CPU, m.Cores, m.GOMAXPROCS, mem, m.OS, m.Arch, kernel, m.GoVersion, m.ClockReadNs)
	dev := ""
	if m.Device != "" {
		dev = " on " + m.Device
	}
	fmt.Fprintf(bw, "dir:      %s (%s%s), removed afterwards\n", m.Dir, m.FS, dev)
	fmt.Fprintf(bw, "regime:   %s\n", r.Regime)
	c := r.Ceiling
	direct := "O_DIRECT not measured: " + c.DirectSkipped
	if c.DirectSkipped == "" {
		direct = fmt.Sprintf("O_DIRECT %s MB/s [%s – %s]", num(c.Direct.Median), num(c.Direct.Min), num(c.Direct.Max))
	}
	fmt.Fprintf(bw, "ceiling:  %s writes of new bytes (a double buffer, one half refilled while the other is written), %.0f MB per run, median [min – max] of %d runs, half before the cases and half after: buffered %s MB/s [%s – %s], %s\n",
		formatSize(c.WriteSize), float64(c.Bytes)/1e6, c.Runs, num(c.Buffered.Median), num(c.Buffered.Min), num(c.Buffered.Max), direct)
	if c.Failure != "" {
		fmt.Fprintf(bw, "          ceiling failed: %s\n", c.Failure)
	}
	fmt.Fprintf(bw, "units:    %s\n", unitsText)
	fmt.Fprintf(bw, "timing:   %s\n", timingText)
	for _, n := range r.Notes {
		fmt.Fprintf(bw, "note:     %s\n", n)
	}

	header := []string{"writers", "strategy", "ns/op", "[min – max]", "MB/s", "records/s", "allocs/op", "p50", "p99", "p99.9", "ceiling", "verified"}
	right := []bool{true, false, true, false, true, true, true, true, true, true, true, false}
	for _, size := range r.Sizes {
		var rows [][]string
		var checked string
		for _, res := range r.Results {
			if res.RecordSize != size {
				continue
			}
			if checked == "" && res.Checked != "" {
				checked = res.Checked
			}
			rows = append(rows, tableRow(res))
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(bw, "\n%s records", formatSize(size))
		if checked != "" {
			fmt.Fprintf(bw, " (verified: %s)", checked)
		}
		fmt.Fprintln(bw)
		writeAligned(bw, header, right, rows)
		for _, rec := range r.Recommendations {
			if rec.RecordSize == size {
				fmt.Fprintf(bw, "  → %s\n", rec.Text)
			}
		}
	}
	return bw.Flush()
}

// tableRow returns the cells of one result; a failed or skipped result has
// three cells, the last one its reason, which spans the rest of the row.
func tableRow(r Result) []string {
	w := fmt.Sprint(r.Writers)
	switch r.Status {
	case StatusSkipped:
		return []string{w, r.Strategy, "skipped: " + r.Reason}
	case StatusFailed:
		return []string{w, r.Strategy, "FAILED: " + r.Reason}
	}
	lat := func(ns int64) string {
		if ns == 0 {
			return "-"
		}
		return formatNs(ns)
	}
	return []string{
		w, r.Strategy,
		num(r.NsPerOp.Median), fmt.Sprintf("[%s – %s]", num(r.NsPerOp.Min), num(r.NsPerOp.Max)),
		num(r.MBPerSec.Median), si(r.RecordsPerSec.Median),
		fmt.Sprintf("%.2f", r.AllocsPerOp),
		lat(r.P50Ns), lat(r.P99Ns), lat(r.P999Ns),
		formatPct(r.PctOfCeiling),
		"ok",
	}
}

// writeAligned writes header and rows as columns separated by two spaces.
// Rows shorter than the header end with a cell that spans the rest.
func writeAligned(w io.Writer, header []string, right []bool, rows [][]string) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, row := range rows {
		if len(row) < len(header) {
			for i := 0; i < len(row)-1; i++ {
				width[i] = max(width[i], utf8.RuneCountInString(row[i]))
			}
			continue
		}
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", max(0, width[i]-utf8.RuneCountInString(c)))
			switch {
			case len(cells) < len(header) && i == len(cells)-1:
				b.WriteString(c) // spanning cell
			case right[i]:
				b.WriteString(pad + c)
			default:
				b.WriteString(c + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(header)
	for _, row := range rows {
		line(row)
	}
}

// num formats a measurement with three or four significant digits.
func num(x float64) string {
	switch {
	case x >= 1000:
		return fmt.Sprintf("%.0f", x)
	case x >= 100:
		return fmt.Sprintf("%.1f", x)
	case x >= 10:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3f", x)
	}
}

// si formats a rate with a k, M or G suffix.
func si(x float64) string {
	switch {
	case x >= 1e9:
		return fmt.Sprintf("%.2fG", x/1e9)
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}

// formatNs formats a latency: "850ns", "1.2µs", "15µs", "3.4ms".
func formatNs(ns int64) string {
	d := float64(ns)
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 10_000:
		return fmt.Sprintf("%.1fµs", d/1e3)
	case ns < 1_000_000:
		return fmt.Sprintf("%.0fµs", d/1e3)
	case ns < 10_000_000:
		return fmt.Sprintf("%.1fms", d/1e6)
	case ns < 1_000_000_000:
		return fmt.Sprintf("%.0fms", d/1e6)
	default:
		return fmt.Sprintf("%.1fs", d/1e9)
	}
}
