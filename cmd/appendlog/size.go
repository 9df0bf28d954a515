package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// _sizeHelp is what the help of every command with size flags says about
// units.
const _sizeHelp = `Sizes are bytes, or take a unit: KiB = 1024 bytes, MiB, GiB, TiB (K, M, G,
T mean the same); KB = 1000 bytes, MB, GB, TB. Case is ignored.`

// _units maps a lower-cased unit suffix to its multiplier. The binary units
// (KiB, and K as bench has always read it) are powers of 1024; KB, MB, GB and
// TB are powers of 1000, as the CLI's reports define MB.
var _units = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pi": 1 << 50, "pib": 1 << 50, "pb": 1e15,
	"e": 1 << 60, "ei": 1 << 60, "eib": 1 << 60, "eb": 1e18,
}

// errSizeSyntax is the hint every parse error carries.
var errSizeSyntax = errors.New("want a whole number of bytes, optionally with a unit, e.g. 128, 64KiB, 32MiB, 1GB")

// parseSize parses a byte count: a whole decimal number followed by an
// optional unit (see _units; case is ignored, a space may separate them).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := _units[unit]
	if num == "" || !ok {
		if strings.HasPrefix(t, "-") {
			return 0, fmt.Errorf("negative size %q: %w", s, errSizeSyntax)
		}
		return 0, fmt.Errorf("bad size %q: %w", s, errSizeSyntax)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q too large (at most %d bytes): %w", s, int64(math.MaxInt64), errSizeSyntax)
	}
	return n * mult, nil
}

// parseSizeInt is parseSize for an int.
func parseSizeInt(s string) (int, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt {
		return 0, fmt.Errorf("size %q too large (at most %d bytes): %w", s, math.MaxInt, errSizeSyntax)
	}
	return int(n), nil
}

// sizeValue is a pflag.Value for a byte count given as parseSize reads it.
// On a bad value pflag's error names the flag and the value, and root turns
// it into a usage error.
type sizeValue[T int | int64] struct{ p *T }

var _ pflag.Value = sizeValue[int]{}

func (v sizeValue[T]) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v sizeValue[T]) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if int64(T(n)) != n {
		return fmt.Errorf("size %q too large (at most %d bytes): %w", s, math.MaxInt, errSizeSyntax)
	}
	*v.p = T(n)
	return nil
}

func (v sizeValue[T]) Type() string { return "size" }

// sizeVar defines a size flag on fs, as fs.IntVar or fs.Int64Var would
// define a number flag.
func sizeVar[T int | int64](fs *pflag.FlagSet, p *T, name string, value T, usage string) {
	*p = value
	fs.Var(sizeValue[T]{p}, name, usage)
}

// humanBytes formats n bytes in the largest binary unit that keeps the
// number at least 1: "1023 B", "1.5 KiB", "465.7 GiB".
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	const units = "KMGTPE"
	f := float64(n) / 1024
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, units[i])
}
