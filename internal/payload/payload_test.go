package payload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestDocExample(t *testing.T) {
	p := make([]byte, 40)
	if err := Encode(p, 3, 42); err != nil {
		t.Fatal(err)
	}
	if want := "0003 00000000002a yzABCDEFGHIJ 374b21da\n"; string(p) != want {
		t.Fatalf("record %q, the package doc shows %q", p, want)
	}
}

func TestHex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []uint32{0, 1, 9, 10, 15, 16, 0xabcdef01, 0x12345678, 0xffffffff, 0x0000ffff, 0x80000000}
	for range 10000 {
		vals = append(vals, rng.Uint32())
	}
	for _, v := range vals {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], hex8(v))
		if want := fmt.Sprintf("%08x", v); string(b[:]) != want {
			t.Fatalf("hex8(%#x) = %q, want %q", v, b[:], want)
		}
		got, ok := unhex8(binary.LittleEndian.Uint64(b[:]))
		if !ok || got != v {
			t.Fatalf("unhex8(%q) = %#x, %v", b[:], got, ok)
		}
	}
	// Every byte that is not a lowercase hex digit is refused, in every
	// position.
	for i := range 8 {
		for c := range 256 {
			b := []byte("0123abcd")
			b[i] = byte(c)
			_, ok := unhex8(binary.LittleEndian.Uint64(b))
			isHex := c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
			if ok != isHex {
				t.Fatalf("unhex8(%q) ok = %v", b, ok)
			}
		}
	}
}

var _sizes = []int{MinSize, MinSize + 1, 28, 29, 40, 64, 65, 100, 127, 128, 129, 4096, 4099, 2*_chunk + 77}

func TestRoundTrip(t *testing.T) {
	type wc struct {
		w int
		c uint64
	}
	cases := []wc{{0, 0}, {1, 0}, {0, 1}, {7, 123456}, {MaxWriters - 1, MaxCounter}, {0xabcd, 0xfedcba987654}}
	for _, size := range _sizes {
		for _, tc := range cases {
			p := make([]byte, size)
			if err := Encode(p, tc.w, tc.c); err != nil {
				t.Fatal(err)
			}
			w, c, err := Decode(p)
			if err != nil || w != tc.w || c != tc.c {
				t.Fatalf("size %d: Decode(Encode(%d, %d)) = %d, %d, %v", size, tc.w, tc.c, w, c, err)
			}
			// A record is one printable line.
			if i := bytes.IndexByte(p, '\n'); i != size-1 {
				t.Fatalf("size %d: newline at %d", size, i)
			}
			for i, b := range p[:size-1] {
				if b < ' ' || b > '~' {
					t.Fatalf("size %d: byte %d is %#x, not printable", size, i, b)
				}
			}
			// Stamp over another writer's and counter's record and
			// Append give the same bytes.
			q := make([]byte, size)
			if err := Encode(q, tc.w^1, tc.c^1); err != nil {
				t.Fatal(err)
			}
			if err := Stamp(q, tc.w, tc.c); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p, q) {
				t.Fatalf("size %d: Stamp gives %q, Encode %q", size, q, p)
			}
			a, err := Append([]byte("prefix"), tc.w, tc.c, size)
			if err != nil || string(a[:6]) != "prefix" || !bytes.Equal(a[6:], p) {
				t.Fatalf("size %d: Append = %q, %v", size, a, err)
			}
		}
	}
}

func TestRecordsDiffer(t *testing.T) {
	// Two (writer, counter) pairs never share a head, and so never a
	// record: a record cannot pass for another's.
	seen := map[string][2]int{}
	for w := range 8 {
		for c := range 64 {
			p := make([]byte, 30)
			if err := Encode(p, w, uint64(c)); err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen[string(p)]; ok {
				t.Fatalf("writer %d counter %d is the record of %v", w, c, prev)
			}
			seen[string(p)] = [2]int{w, c}
		}
	}
}

func TestEncodeMisuse(t *testing.T) {
	for _, tt := range []struct {
		size int
		w    int
		c    uint64
		want error
	}{
		{MinSize - 1, 0, 0, ErrSize},
		{0, 0, 0, ErrSize},
		{64, -1, 0, ErrWriter},
		{64, MaxWriters, 0, ErrWriter},
		{64, 0, MaxCounter + 1, ErrCounter},
	} {
		p := make([]byte, tt.size)
		if err := Encode(p, tt.w, tt.c); !errors.Is(err, tt.want) {
			t.Errorf("Encode(%d bytes, %d, %d) = %v, want %v", tt.size, tt.w, tt.c, err, tt.want)
		}
		if _, err := Append(nil, tt.w, tt.c, tt.size); !errors.Is(err, tt.want) {
			t.Errorf("Append(%d bytes, %d, %d) = %v, want %v", tt.size, tt.w, tt.c, err, tt.want)
		}
	}
	for _, tt := range []struct {
		size int
		w    int
		c    uint64
		want error
	}{{5, 0, 1, ErrSize}, {64, 0, MaxCounter + 1, ErrCounter}, {64, MaxWriters, 0, ErrWriter}} {
		if err := Stamp(make([]byte, tt.size), tt.w, tt.c); !errors.Is(err, tt.want) {
			t.Errorf("Stamp(%d bytes, %d, %d) = %v, want %v", tt.size, tt.w, tt.c, err, tt.want)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	for _, size := range []int{128, 4096} {
		p := make([]byte, size)
		if err := Encode(p, 1, 0); err != nil {
			t.Fatal(err)
		}
		var c uint64
		if a := testing.AllocsPerRun(100, func() {
			c++
			if err := Stamp(p, 1, c); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("size %d: Stamp allocates %v times", size, a)
		}
		if a := testing.AllocsPerRun(100, func() {
			c++
			if err := Encode(p, 2, c); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("size %d: Encode allocates %v times", size, a)
		}
		if a := testing.AllocsPerRun(100, func() {
			if _, _, err := Decode(p); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("size %d: Decode allocates %v times", size, a)
		}
		k, err := NewChecker(Options{Size: size, Writers: 4, Gaps: true})
		if err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(100, func() {
			c++
			if err := Stamp(p, 1, c); err != nil {
				t.Fatal(err)
			}
			if pr := k.Check(p, -1, 0); pr != nil {
				t.Fatal(pr)
			}
		}); a != 0 {
			t.Errorf("size %d: Checker.Check allocates %v times", size, a)
		}
	}
}

// TestDetectsEveryBitFlip flips every bit of records of several sizes:
// Decode must refuse each.
func TestDetectsEveryBitFlip(t *testing.T) {
	for _, size := range []int{MinSize, 28, 37, 100} {
		p := make([]byte, size)
		if err := Encode(p, 0x1234, 0x56789a); err != nil {
			t.Fatal(err)
		}
		for i := range p {
			for bit := range 8 {
				q := bytes.Clone(p)
				q[i] ^= 1 << bit
				w, c, err := Decode(q)
				var pr *Problem
				if !errors.As(err, &pr) {
					t.Fatalf("size %d: bit %d of byte %d flipped: Decode = %d, %d, %v", size, bit, i, w, c, err)
				}
				if pr.Byte < -1 || pr.Byte >= size {
					t.Fatalf("size %d: problem at byte %d of %d", size, pr.Byte, size)
				}
			}
		}
	}
}

func TestDecodeNamesTheDamage(t *testing.T) {
	rec := func(w int, c uint64, n int) []byte {
		p, err := Append(nil, w, c, n)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := rec(1, 10, 64)
	b := rec(1, 11, 64)
	c := rec(2, 10, 80)
	splice := func(x, y []byte, at int) []byte { return append(bytes.Clone(x[:at]), y[at:]...) }
	for _, tt := range []struct {
		name string
		p    []byte
		kind Kind
		at   int
	}{
		{"short", a[:20], Torn, 0},
		{"cut, no newline", a[:50], Torn, 49},
		{"zeros", make([]byte, 64), Foreign, 0},
		{"text", []byte("appendlog: 12 records dropped\n"), Foreign, 1},
		{"uppercase hex", bytes.ToUpper(rec(0xab, 0xcd, 40)), Foreign, 2},
		{"head of one, tail of the next (same writer)", splice(a, b, 40), Checksum, 55},
		{"head of one, body and tail of another writer's", append(bytes.Clone(a[:18]), c[18:]...), Checksum, 71},
		{"body shifted", append(bytes.Clone(a[:18]), c[16:]...), Filler, 18},
		{"torn line followed by a record", append(bytes.Clone(a[:30]), b...), Filler, 30},
		{"filler byte", func() []byte { p := bytes.Clone(a); p[33] = 'x'; return p }(), Filler, 33},
		{"lost filler bytes", append(bytes.Clone(a[:30]), a[31:]...), Filler, 30},
		{"check", func() []byte { p := bytes.Clone(a); p[60] = "10"[min(1, int(p[60]-'0'))]; return p }(), Checksum, 55},
		{"space before check", func() []byte { p := bytes.Clone(a); p[54] = 'x'; return p }(), Torn, 54},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode(tt.p)
			var pr *Problem
			if !errors.As(err, &pr) {
				t.Fatalf("Decode(%q) = %v, want a %v", tt.p, err, tt.kind)
			}
			if pr.Kind != tt.kind || pr.Byte != tt.at {
				t.Fatalf("Decode(%q) = %v at byte %d, want %v at byte %d", tt.p, pr, pr.Byte, tt.kind, tt.at)
			}
			t.Log(pr)
		})
	}
}

func TestTags(t *testing.T) {
	for _, writers := range []int{1, 2, 7, 127, 128, 255} {
		tg, err := NewTags(writers)
		if err != nil {
			t.Fatal(err)
		}
		for w := 0; w < writers; w += 1 + writers/8 {
			for _, c := range []uint64{0, 1, 254, 255, 1 << 40} {
				p := make([]byte, 5)
				tg.Encode(p, w, c)
				gw, r, err := tg.Decode(p)
				if err != nil || gw != w || r != c%uint64(tg.Mod()) {
					t.Fatalf("writers %d: Decode(Encode(%d, %d)) = %d, %d, %v", writers, w, c, gw, r, err)
				}
				if bytes.IndexByte(p, 0) >= 0 {
					t.Fatalf("tag 0 in %x", p)
				}
			}
		}
	}
	for _, n := range []int{0, -1, 256} {
		if _, err := NewTags(n); !errors.Is(err, ErrWriters) {
			t.Errorf("NewTags(%d) = %v", n, err)
		}
	}
	var zero Tags
	if _, _, err := zero.Decode([]byte{1}); err == nil {
		t.Error("zero Tags decoded a record")
	}
}

func BenchmarkStamp(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			p := make([]byte, size)
			if err := Encode(p, 1, 0); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := uint64(0); b.Loop(); i++ {
				if err := Stamp(p, 1, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			p := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := uint64(0); b.Loop(); i++ {
				if err := Encode(p, 1, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			p := make([]byte, size)
			if err := Encode(p, 1, 7); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Decode(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
