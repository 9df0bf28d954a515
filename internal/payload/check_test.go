package payload

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// stream returns the records of writers writers with per records each,
// interleaved round-robin as concurrent writers leave them, each of size
// bytes (0: sizes varying with the counter), and the offset of each record
// by (writer, counter).
func stream(t testing.TB, size, writers, per int) ([]byte, [][]int) {
	t.Helper()
	var b []byte
	at := make([][]int, writers)
	var tags Tags
	if size > 0 && size < MinSize {
		var err error
		if tags, err = NewTags(writers); err != nil {
			t.Fatal(err)
		}
	}
	for c := range per {
		for w := range writers {
			at[w] = append(at[w], len(b))
			if tags.mod > 0 {
				p := make([]byte, size)
				tags.Encode(p, w, uint64(c))
				b = append(b, p...)
				continue
			}
			n := size
			if n == 0 {
				n = MinSize + (w*7+c*13)%90
			}
			var err error
			if b, err = Append(b, w, uint64(c), n); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b, at
}

func counts(writers, per int) []uint64 {
	out := make([]uint64, writers)
	for i := range out {
		out[i] = uint64(per)
	}
	return out
}

func checkStream(t testing.TB, b []byte, o Options) *Result {
	t.Helper()
	k, err := NewChecker(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Write(b); err != nil {
		t.Fatal(err)
	}
	return k.Finish()
}

func hasKind(r *Result, k Kind) bool {
	for _, p := range r.Problems {
		if p.Kind == k {
			return true
		}
	}
	return false
}

// TestCheckerCatchesDamage damages streams of fixed-size and of
// newline-delimited records of varying size and checks that the checker
// names the damage.
func TestCheckerCatchesDamage(t *testing.T) {
	const writers, per = 3, 50
	type damage func(b []byte, at [][]int, end func(w, c int) int) []byte
	rec := func(b []byte, at [][]int, end func(w, c int) int, w, c int) []byte {
		return slices.Clone(b[at[w][c]:end(w, c)])
	}
	swap := func(b []byte, at [][]int, end func(w, c int) int, w, c1, c2 int) []byte {
		r1, r2 := rec(b, at, end, w, c1), rec(b, at, end, w, c2)
		out := slices.Clone(b[:at[w][c1]])
		out = append(out, r2...)
		out = append(out, b[end(w, c1):at[w][c2]]...)
		out = append(out, r1...)
		return append(out, b[end(w, c2):]...)
	}
	tests := []struct {
		name   string
		damage damage
		kind   Kind
		lost   uint64
	}{
		{"bit flip in a head", func(b []byte, at [][]int, _ func(w, c int) int) []byte {
			b[at[1][7]+12] ^= 0x01
			return b
		}, Checksum, 1},
		{"bit flip in filler", func(b []byte, at [][]int, _ func(w, c int) int) []byte {
			b[at[2][7]+20] ^= 0x40
			return b
		}, Filler, 1},
		{"torn tail", func(b []byte, _ [][]int, _ func(w, c int) int) []byte { return b[:len(b)-10] }, Torn, 1},
		{"mixed head and body", func(b []byte, at [][]int, end func(w, c int) int) []byte {
			// Record (1, 10) keeps its head, and takes the rest of (1, 11).
			r := rec(b, at, end, 1, 11)
			out := slices.Clone(b[:at[1][10]+_headSize])
			out = append(out, r[_headSize:]...)
			return append(out, b[end(1, 10):]...)
		}, Checksum, 1},
		{"missing record", func(b []byte, at [][]int, end func(w, c int) int) []byte {
			return slices.Delete(b, at[0][20], end(0, 20))
		}, Missing, 1},
		{"missing last record", func(b []byte, at [][]int, end func(w, c int) int) []byte {
			return slices.Delete(b, at[2][per-1], end(2, per-1))
		}, Missing, 1},
		{"swapped records", func(b []byte, at [][]int, end func(w, c int) int) []byte {
			return swap(b, at, end, 1, 5, 30)
		}, Reordered, 0},
		{"duplicated record", func(b []byte, at [][]int, end func(w, c int) int) []byte {
			return slices.Insert(b, end(0, 9), rec(b, at, end, 0, 9)...)
		}, Duplicate, 0},
		{"zeros", func(b []byte, at [][]int, end func(w, c int) int) []byte {
			return slices.Insert(b, at[1][25], make([]byte, end(1, 25)-at[1][25])...)
		}, Foreign, 0},
		{"garbage over a record", func(b []byte, at [][]int, end func(w, c int) int) []byte {
			s, e := at[2][40], end(2, 40)
			copy(b[s:e-1], strings.Repeat("garbage!", 100))
			return b
		}, Foreign, 1},
		{"foreign writer", func(b []byte, _ [][]int, end func(w, c int) int) []byte {
			p, _ := Append(nil, 8, 0, end(0, 0))
			return append(b, p...)
		}, Foreign, 0},
	}
	for _, mode := range []struct {
		name string
		size int
	}{{"fixed", 64}, {"lines", 0}} {
		good, _ := stream(t, mode.size, writers, per)
		o := Options{Size: mode.size, Expect: counts(writers, per)}
		if r := checkStream(t, good, o); !r.OK() || r.Intact != writers*per || r.Err() != nil {
			t.Fatalf("%s: clean stream: %+v", mode.name, r)
		}
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				b, at := stream(t, mode.size, writers, per)
				end := func(w, c int) int {
					i := bytes.IndexByte(b[at[w][c]:], '\n')
					return at[w][c] + i + 1
				}
				b = tt.damage(b, at, end)
				r := checkStream(t, b, o)
				if r.OK() || r.Err() == nil {
					t.Fatalf("damage not caught: %+v", r)
				}
				if !hasKind(r, tt.kind) {
					t.Fatalf("damage %v not reported as %v: %v", r.Problems, tt.kind, r.Err())
				}
				if r.Lost < tt.lost {
					t.Fatalf("lost %d, want at least %d", r.Lost, tt.lost)
				}
				if p := r.Problems[0]; p.Record < 0 && p.Offset < 0 && tt.kind != Missing {
					t.Fatalf("problem without a place: %+v", p)
				}
				t.Log(r.Err())
			})
		}
	}
}

// TestCheckerTags does the same for records under MinSize.
func TestCheckerTags(t *testing.T) {
	for _, tt := range []struct {
		name          string
		size, writers int
		damage        func(b []byte, at [][]int) []byte
		kind          Kind
	}{
		{"missing", 1, 8, func(b []byte, at [][]int) []byte { return slices.Delete(b, at[3][10], at[3][10]+1) }, Missing},
		{"missing last", 1, 8, func(b []byte, at [][]int) []byte { return slices.Delete(b, at[7][99], at[7][99]+1) }, Missing},
		{"swapped", 1, 8, func(b []byte, at [][]int) []byte {
			b[at[2][10]], b[at[2][11]] = b[at[2][11]], b[at[2][10]]
			return b
		}, Missing},
		{"duplicate", 1, 8, func(b []byte, at [][]int) []byte { return slices.Insert(b, at[2][10]+1, b[at[2][10]]) }, Reordered},
		{"zero", 1, 8, func(b []byte, at [][]int) []byte { b[at[5][50]] = 0; return b }, Foreign},
		{"foreign tag", 1, 8, func(b []byte, _ [][]int) []byte { return append(b, 0xff) }, Foreign},
		{"torn", 4, 8, func(b []byte, at [][]int) []byte { b[at[1][5]+2] ^= 1; return b }, Torn},
		{"torn tail", 4, 8, func(b []byte, _ [][]int) []byte { return b[:len(b)-1] }, Torn},
		{"one writer missing", 1, 1, func(b []byte, _ [][]int) []byte { return slices.Delete(b, 40, 41) }, Missing},
		{"one writer swap", 1, 1, func(b []byte, _ [][]int) []byte { b[40], b[41] = b[41], b[40]; return b }, Missing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const per = 100
			o := Options{Size: tt.size, Expect: counts(tt.writers, per)}
			good, _ := stream(t, tt.size, tt.writers, per)
			if r := checkStream(t, good, o); !r.OK() {
				t.Fatalf("clean stream: %v", r.Err())
			}
			b, at := stream(t, tt.size, tt.writers, per)
			r := checkStream(t, tt.damage(b, at), o)
			if r.OK() {
				t.Fatalf("damage not caught: %+v", r)
			}
			if !hasKind(r, tt.kind) {
				t.Fatalf("damage %v not reported as %v", r.Problems, tt.kind)
			}
			t.Log(r.Err())
		})
	}
}

// TestCheckerSplitsAnywhere feeds a stream in pieces of every small size:
// the result is the same as in one piece.
func TestCheckerSplitsAnywhere(t *testing.T) {
	for _, size := range []int{0, 1, 40} {
		b, _ := stream(t, size, 3, 20)
		o := Options{Size: size, Expect: counts(3, 20)}
		for step := 1; step < 90; step += 7 {
			k, err := NewChecker(o)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(b); i += step {
				k.Write(b[i:min(i+step, len(b))])
			}
			if r := k.Finish(); !r.OK() || r.Bytes != int64(len(b)) || r.Records != 60 {
				t.Fatalf("size %d, pieces of %d: %+v", size, step, r)
			}
		}
	}
}

func TestCheckerOrder(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		seq  []obs
		kind Kind
	}{
		{"interleaved", Options{}, []obs{{0, 0, true}, {1, 0, true}, {0, 1, true}, {1, 1, true}, {0, 2, true}}, 0},
		{"gap", Options{}, []obs{{0, 0, true}, {0, 2, false}}, Missing},
		{"repeat", Options{}, []obs{{0, 0, true}, {0, 1, true}, {0, 1, false}}, Duplicate},
		{"backwards", Options{}, []obs{{0, 0, true}, {0, 1, true}, {0, 2, true}, {0, 1, false}}, Reordered},
		{"late start", Options{}, []obs{{0, 0, true}, {1, 5, false}}, Missing},
		{"restart refused", Options{}, []obs{{0, 0, true}, {0, 1, true}, {0, 0, false}}, Reordered},
		{"restart allowed", Options{Restarts: true}, []obs{{0, 0, true}, {0, 1, true}, {0, 0, true}, {0, 1, true}}, 0},
		{"restart still no gap", Options{Restarts: true}, []obs{{0, 0, true}, {0, 0, true}, {0, 2, false}}, Missing},
		{"gaps", Options{Gaps: true}, []obs{{0, 3, true}, {0, 7, true}, {1, 0, true}, {0, 8, true}}, 0},
		{"gaps, backwards", Options{Gaps: true}, []obs{{0, 3, true}, {0, 7, true}, {0, 5, false}}, Reordered},
		{"gaps, repeat", Options{Gaps: true}, []obs{{0, 3, true}, {0, 3, false}}, Duplicate},
		{"gaps, past the end", Options{Gaps: true, Expect: []uint64{5}}, []obs{{0, 3, true}, {0, 5, false}}, Extra},
		{"past the end", Options{Expect: []uint64{2, 2}}, []obs{{0, 0, true}, {0, 1, true}, {0, 2, false}}, Extra},
		{"writer that did not run", Options{Writers: 2}, []obs{{0, 0, true}, {2, 0, false}}, Foreign},
		{"recorded gap", Options{}, []obs{{0, 0, true}, {1, 0, true}, {-1, 0, true}, {0, 5, true}, {1, 1, true}, {2, 9, true}, {2, 10, true}, {0, 7, false}}, Missing},
		{"gap, then backwards", Options{}, []obs{{0, 0, true}, {0, 1, true}, {-1, 0, true}, {0, 1, false}}, Duplicate},
		{"gap, then a restart", Options{Restarts: true}, []obs{{0, 0, true}, {0, 1, true}, {-1, 0, true}, {0, 0, true}, {0, 1, true}}, 0},
		{"one jump per gap", Options{}, []obs{{0, 0, true}, {-1, 0, true}, {0, 3, true}, {0, 5, false}}, Missing},
	}
	for _, size := range []int{0, 32} {
		for _, tt := range tests {
			tt.o.Size = size
			t.Run(fmt.Sprintf("size=%d/%s", size, tt.name), func(t *testing.T) {
				checkOrder(t, tt.o, tt.seq, tt.kind)
			})
		}
	}
}

type obs struct {
	w  int
	c  uint64
	ok bool
}

// checkOrder feeds a Checker of options o the records seq names (w < 0:
// a Gap) and expects a problem of kind at the first record not ok.
func checkOrder(t *testing.T, o Options, seq []obs, kind Kind) {
	k, err := NewChecker(o)
	if err != nil {
		t.Fatal(err)
	}
	rec := int64(0)
	for i, ob := range seq {
		if ob.w < 0 {
			k.Gap()
			continue
		}
		rec++
		p, err := Append(nil, ob.w, ob.c, 32)
		if err != nil {
			t.Fatal(err)
		}
		pr := k.Check(p, -1, uint64(i+1))
		if (pr == nil) != ob.ok {
			t.Fatalf("step %d: Check(%d, %d) = %v, want ok=%v", i, ob.w, ob.c, pr, ob.ok)
		}
		if pr != nil {
			if pr.Kind != kind || pr.Seq != uint64(i+1) || pr.Record != rec-1 {
				t.Fatalf("step %d: %v (record %d), want a %v at seq %d", i, pr, pr.Record, kind, i+1)
			}
			return
		}
	}
	if kind != 0 {
		t.Fatalf("no %v", kind)
	}
}

// TestCheckerDueRecord checks the record a Checker expects next from each
// writer of fixed-size records, counted up digit by digit, against
// Encode's, across every kind of carry and up to the counter's end.
func TestCheckerDueRecord(t *testing.T) {
	for _, start := range []uint64{0, 0x9, 0xf, 0xff0, 0xfffe, 0xffffffff - 3, MaxCounter - 3} {
		k, err := NewChecker(Options{Size: 40, Writers: 2, Gaps: true})
		if err != nil {
			t.Fatal(err)
		}
		for c := start; c <= start+40 && c <= MaxCounter; c++ {
			p, err := Append(nil, 1, c, 40)
			if err != nil {
				t.Fatal(err)
			}
			if pr := k.Check(p, -1, 0); pr != nil {
				t.Fatalf("counter %#x: %v", c, pr)
			}
			s := &k.ws[1]
			if c == MaxCounter {
				if s.due != nil {
					t.Fatalf("a record is due after the last counter: %q", s.due)
				}
				continue
			}
			want, _ := Append(nil, 1, c+1, 40)
			if !bytes.Equal(s.due, want) {
				t.Fatalf("after counter %#x: due %q, want %q", c, s.due, want)
			}
		}
	}
}

func TestCheckerCounts(t *testing.T) {
	b, _ := stream(t, 0, 2, 10)
	k, err := NewChecker(Options{Expect: []uint64{10, 11}})
	if err != nil {
		t.Fatal(err)
	}
	k.Write(b)
	r := k.Finish()
	if r.OK() || r.Lost != 1 || !hasKind(r, Missing) || r.Problems[0].Writer != 1 {
		t.Fatalf("a writer's last record lost: %+v", r)
	}
	if !slices.Equal(r.PerWriter, []uint64{10, 10}) || r.Writers != 2 {
		t.Fatalf("per writer %v, writers %d", r.PerWriter, r.Writers)
	}
	if k.Next(1) != 10 || k.Next(5) != 0 || k.Next(-1) != 0 {
		t.Fatalf("Next = %d", k.Next(1))
	}
	if !strings.Contains(r.Err().Error(), "20 of 21 records intact") {
		t.Fatalf("Err = %v", r.Err())
	}
}

func TestCheckerKeepsTheFirstProblems(t *testing.T) {
	k, err := NewChecker(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		k.Check([]byte("not a record at all, at all!\n"), int64(i*29), 0)
	}
	r := k.Finish()
	if r.ProblemCount != 100 || len(r.Problems) != MaxProblems || r.Problems[3].Offset != 3*29 {
		t.Fatalf("%d problems, %d kept, the 4th %+v", r.ProblemCount, len(r.Problems), r.Problems[3])
	}
	if !strings.Contains(r.Err().Error(), "(and 99 more problems)") || !strings.Contains(r.Err().Error(), "at byte 0") {
		t.Fatalf("Err = %v", r.Err())
	}
}

func TestCheckerLongLine(t *testing.T) {
	k, err := NewChecker(Options{})
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	for range _maxLine>>20 + 1 {
		k.Write(chunk)
	}
	r := k.Finish()
	if !hasKind(r, Foreign) || cap(k.carry) > 2*_maxLine {
		t.Fatalf("a stream with no newline: %+v", r.Problems)
	}
}

func TestNewCheckerMisuse(t *testing.T) {
	for _, o := range []Options{
		{Size: -1},
		{Writers: -1},
		{Writers: MaxWriters + 1},
		{Writers: 2, Expect: []uint64{1}},
		{Size: 1},                   // tags need the writers
		{Size: 1, Writers: 256},     // too many for one tag byte
		{Expect: []uint64{1 << 50}}, // past the counter
	} {
		if k, err := NewChecker(o); err == nil {
			t.Errorf("NewChecker(%+v) = %v, want an error", o, k)
		} else if !errors.Is(err, ErrSize) && !errors.Is(err, ErrWriters) && !errors.Is(err, ErrCounter) {
			t.Errorf("NewChecker(%+v) = %v, not a payload error", o, err)
		}
	}
}
