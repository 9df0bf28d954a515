package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/wal"
)

// goodFile returns the records of writers writers with perWriter records
// each, interleaved round-robin as concurrent writers would leave them, and
// the offset of every record by (writer, counter).
func goodFile(t *testing.T, size, writers, perWriter int) ([]byte, [][]int) {
	t.Helper()
	c, err := newCodec(size, writers)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	at := make([][]int, writers)
	for n := 0; n < perWriter; n++ {
		for w := 0; w < writers; w++ {
			rec := c.template(w)
			c.encode(rec, w, uint64(n))
			at[w] = append(at[w], len(b))
			b = append(b, rec...)
		}
	}
	return b, at
}

func counts(writers, perWriter int) []uint64 {
	out := make([]uint64, writers)
	for i := range out {
		out[i] = uint64(perWriter)
	}
	return out
}

func verifyBytes(t *testing.T, b []byte, size, writers, perWriter int) *Verification {
	t.Helper()
	v, err := VerifyReader(bytes.NewReader(b), "test", size, counts(writers, perWriter))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func hasKind(v *Verification, k DamageKind) bool {
	for _, d := range v.Damage {
		if d.Kind == k {
			return true
		}
	}
	return false
}

// TestVerifierCatchesDamage feeds the verifier damaged files of framed
// records and checks that it names the damage.
func TestVerifierCatchesDamage(t *testing.T) {
	const size, writers, per = 64, 3, 50
	rec := func(at [][]int, w, n int) (int, int) { return at[w][n], at[w][n] + size }
	tests := []struct {
		name   string
		damage func(b []byte, at [][]int) []byte
		kind   DamageKind
		lost   uint64
	}{
		{"torn tail", func(b []byte, _ [][]int) []byte { return b[:len(b)-size/2] }, Torn, 1},
		{"torn splice", func(b []byte, at [][]int) []byte {
			// Record (1, 10) gets the second half of record (1, 11).
			s, e := rec(at, 1, 10)
			s2, _ := rec(at, 1, 11)
			copy(b[s+size/2:e], b[s2+size/2:s2+size])
			return b
		}, Checksum, 1},
		{"torn filler", func(b []byte, at [][]int) []byte {
			s, _ := rec(at, 2, 7)
			b[s+20] ^= 0xff
			return b
		}, Filler, 1},
		{"missing record", func(b []byte, at [][]int) []byte {
			s, e := rec(at, 0, 20)
			return slices.Delete(b, s, e)
		}, Missing, 1},
		{"missing last record", func(b []byte, at [][]int) []byte {
			s, e := rec(at, 2, per-1)
			return slices.Delete(b, s, e)
		}, Missing, 1},
		{"reordered", func(b []byte, at [][]int) []byte {
			s1, e1 := rec(at, 1, 5)
			s2, e2 := rec(at, 1, 30)
			tmp := slices.Clone(b[s1:e1])
			copy(b[s1:e1], b[s2:e2])
			copy(b[s2:e2], tmp)
			return b
		}, Reordered, 0},
		{"reordered adjacent", func(b []byte, at [][]int) []byte {
			// Swap whole records 0/4 and 0/5: file order 5 before 4.
			s1, e1 := rec(at, 0, 4)
			s2, e2 := rec(at, 0, 5)
			tmp := slices.Clone(b[s1:e1])
			copy(b[s1:e1], b[s2:e2])
			copy(b[s2:e2], tmp)
			return b
		}, Missing, 0}, // 5 where 4 was due reads as "4 missing", then 4 after 5
		{"duplicate", func(b []byte, at [][]int) []byte {
			s, e := rec(at, 0, 9)
			return slices.Insert(b, e, slices.Clone(b[s:e])...)
		}, Duplicate, 0},
		{"foreign zeros", func(b []byte, at [][]int) []byte {
			s, _ := rec(at, 1, 25)
			return slices.Insert(b, s, make([]byte, size)...)
		}, Foreign, 0},
		{"foreign garbage over a record", func(b []byte, at [][]int) []byte {
			s, e := rec(at, 2, 40)
			copy(b[s:e], strings.Repeat("garbage!", size/8))
			return b
		}, Foreign, 1},
		{"foreign writer", func(b []byte, _ [][]int) []byte {
			c, _ := newCodec(size, 9)
			r := c.template(8)
			c.encode(r, 8, 0)
			return append(b, r...)
		}, Foreign, 0},
		{"foreign short bytes", func(b []byte, at [][]int) []byte {
			s, _ := rec(at, 0, 3)
			return slices.Insert(b, s, []byte("hello")...)
		}, Foreign, 0},
	}
	good, _ := goodFile(t, size, writers, per)
	if v := verifyBytes(t, good, size, writers, per); !v.OK() || v.Intact != writers*per || v.Err() != nil {
		t.Fatalf("clean file: %+v", v)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, at := goodFile(t, size, writers, per)
			b = tt.damage(b, at)
			v := verifyBytes(t, b, size, writers, per)
			if v.OK() || v.Err() == nil {
				t.Fatalf("damage not caught: %+v", v)
			}
			if !hasKind(v, tt.kind) {
				t.Fatalf("damage %v not reported as %v: %v", v.Damage, tt.kind, v.Err())
			}
			if v.Lost < tt.lost {
				t.Fatalf("lost %d, want at least %d", v.Lost, tt.lost)
			}
			t.Log(v.Err())
		})
	}
}

// TestVerifierSmallRecords does the same for records under MinFramedSize
// bytes, which carry one tag byte instead of a head.
func TestVerifierSmallRecords(t *testing.T) {
	for _, tt := range []struct {
		name          string
		size, writers int
		damage        func(b []byte, at [][]int) []byte
		kind          DamageKind
	}{
		{"missing", 1, 8, func(b []byte, at [][]int) []byte { return slices.Delete(b, at[3][10], at[3][10]+1) }, Missing},
		{"missing last", 1, 8, func(b []byte, at [][]int) []byte { return slices.Delete(b, at[7][99], at[7][99]+1) }, Missing},
		{"reordered", 1, 8, func(b []byte, at [][]int) []byte {
			b[at[2][10]], b[at[2][11]] = b[at[2][11]], b[at[2][10]]
			return b
		}, Missing},
		{"duplicate", 1, 8, func(b []byte, at [][]int) []byte { return slices.Insert(b, at[2][10]+1, b[at[2][10]]) }, Reordered},
		{"foreign zero", 1, 8, func(b []byte, at [][]int) []byte { b[at[5][50]] = 0; return b }, Foreign},
		{"foreign tag", 1, 8, func(b []byte, _ [][]int) []byte { return append(b, 0xff) }, Foreign},
		{"torn", 4, 8, func(b []byte, at [][]int) []byte { b[at[1][5]+2] ^= 1; return b }, Torn},
		{"torn tail", 4, 8, func(b []byte, _ [][]int) []byte { return b[:len(b)-1] }, Torn},
		{"one writer missing", 1, 1, func(b []byte, _ [][]int) []byte { return slices.Delete(b, 40, 41) }, Missing},
		{"one writer swap", 1, 1, func(b []byte, _ [][]int) []byte { b[40], b[41] = b[41], b[40]; return b }, Missing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const per = 100
			good, _ := goodFile(t, tt.size, tt.writers, per)
			if v := verifyBytes(t, good, tt.size, tt.writers, per); !v.OK() {
				t.Fatalf("clean file: %v", v.Err())
			}
			b, at := goodFile(t, tt.size, tt.writers, per)
			b = tt.damage(b, at)
			v := verifyBytes(t, b, tt.size, tt.writers, per)
			if v.OK() {
				t.Fatalf("damage not caught: %+v", v)
			}
			if !hasKind(v, tt.kind) {
				t.Fatalf("damage %v not reported as %v", v.Damage, tt.kind)
			}
			t.Log(v.Err())
		})
	}
}

// TestVerifyWAL checks a wal holding the right records, one with a record
// missing, and one with a byte flipped in a segment.
func TestVerifyWAL(t *testing.T) {
	const size, writers, per = 100, 2, 300
	write := func(t *testing.T, skip int) string {
		dir := filepath.Join(t.TempDir(), "wal")
		l, err := wal.Open(dir, &wal.Options{Sync: wal.SyncNever})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := newCodec(size, writers)
		i := 0
		for n := 0; n < per; n++ {
			for w := 0; w < writers; w++ {
				r := c.template(w)
				c.encode(r, w, uint64(n))
				if i != skip {
					if _, err := l.Append(r); err != nil {
						t.Fatal(err)
					}
				}
				i++
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	ctx := context.Background()

	v, err := VerifyWAL(ctx, write(t, -1), size, counts(writers, per))
	if err != nil || !v.OK() || v.Bytes != size*writers*per {
		t.Fatalf("clean wal: %+v, %v", v, err)
	}

	v, err = VerifyWAL(ctx, write(t, 77), size, counts(writers, per))
	if err != nil || v.OK() || !hasKind(v, Missing) || v.Lost != 1 {
		t.Fatalf("wal with a record missing: %+v, %v", v, err)
	}
	if d := v.Damage[0]; d.Seq != 79 || d.Offset != -1 || !strings.Contains(v.Err().Error(), "at seq 79") {
		t.Fatalf("wal damage not located by sequence number: %+v: %v", d, v.Err())
	}

	dir := write(t, -1)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[4096+16+(size+16)*10+30] ^= 0x40 // in the payload of the 11th record
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = VerifyWAL(ctx, dir, size, counts(writers, per))
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || v.Lost == 0 {
		t.Fatalf("wal with a flipped byte: %+v", v)
	}
	t.Log(v.Err())
}

// TestCodecRoundTrip checks that every size encodes records the verifier
// accepts, with the writer and counter it was given.
func TestCodecRoundTrip(t *testing.T) {
	for _, size := range []int{1, 2, MinFramedSize - 1, MinFramedSize, MinFramedSize + 1, 128, 4096} {
		for _, writers := range []int{1, 7, 64} {
			c, err := newCodec(size, writers)
			if err != nil {
				t.Fatal(err)
			}
			for w := 0; w < writers; w += 3 {
				rec := c.template(w)
				for _, n := range []uint64{0, 1, 254, 255, 1 << 20} {
					c.encode(rec, w, n)
					var (
						gw   int
						gn   uint64
						want = n
					)
					if c.small() {
						gw, gn, err = c.tags.Decode(rec)
						want = n % uint64(c.tags.Mod())
					} else {
						gw, gn, err = payload.Decode(rec)
					}
					if err != nil || gw != w || gn != want {
						t.Fatalf("size %d writers %d: encode(%d, %d) decodes as (%d, %d, %v)", size, writers, w, n, gw, gn, err)
					}
					if bytes.IndexByte(rec, 0) >= 0 {
						t.Fatalf("size %d: record holds a zero byte", size)
					}
				}
			}
		}
	}
	if _, err := newCodec(1, 256); err == nil {
		t.Fatal("1-byte records with 256 writers accepted")
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := int64(1); i <= 1000; i++ {
		h.record(timeNs(i * 1000)) // 1µs .. 1ms
	}
	for _, tt := range []struct {
		q    float64
		want int64
	}{{0.5, 500_000}, {0.99, 990_000}, {0.999, 999_000}} {
		got := h.quantile(tt.q)
		if got < tt.want || float64(got) > float64(tt.want)*1.13 {
			t.Errorf("quantile(%v) = %d, want within [%d, +12.5%%]", tt.q, got, tt.want)
		}
	}
	for ns := int64(0); ns < 1<<20; ns = ns*5/4 + 1 {
		if b := bucketOf(ns); bucketHigh(b) < ns || (b > 0 && bucketHigh(b-1) >= ns) {
			t.Fatalf("bucket %d of %d ns spans up to %d", b, ns, bucketHigh(b))
		}
	}
}

func timeNs(ns int64) time.Duration { return time.Duration(ns) }
