package writer

import (
	"math"
	"testing"
)

// TestSlabAbsurdOptions: a Slab whose slabs would not fit in memory (or in
// an int) is refused with an error, not a panic or an out-of-memory crash.
func TestSlabAbsurdOptions(t *testing.T) {
	for _, o := range []SlabOptions{
		{Slabs: math.MaxInt},
		{SlabSize: math.MaxInt},
		{Slabs: 1 << 20, SlabSize: 1 << 30},
		{Slabs: 1 << 32, SlabSize: 1 << 32}, // the product overflows an int
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("NewSlab(%+v) panicked: %v", o, p)
				}
			}()
			s, err := NewSlab(&collectWriter{}, &o)
			if err == nil {
				s.Close()
				t.Errorf("NewSlab(%+v) accepted", o)
			}
		}()
	}
}
