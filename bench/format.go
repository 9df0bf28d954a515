package bench

import "fmt"

// formatPct writes a percentage with two significant digits below 10%.
func formatPct(p float64) string {
	switch {
	case p >= 10:
		return fmt.Sprintf("%.0f%%", p)
	case p >= 1:
		return fmt.Sprintf("%.1f%%", p)
	default:
		return fmt.Sprintf("%.2f%%", p)
	}
}

func ceilingName(c string) string {
	if c == "direct" {
		return "O_DIRECT"
	}
	return "page-cache"
}

// formatRatio writes a speedup as "14×" or "1.3×".
func formatRatio(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.1f×", x)
}

// formatSize writes a byte count as "1 B", "128 B", "4 KiB", "1 MiB".
func formatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
