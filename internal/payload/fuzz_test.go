package payload

import (
	"bytes"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts is exactly the
// record Encode writes for what it returned.
func FuzzDecode(f *testing.F) {
	for _, n := range []int{MinSize, 40, 128} {
		p, err := Append(nil, 3, 42, n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, p []byte) {
		w, c, err := Decode(p)
		if err != nil {
			if _, ok := err.(*Problem); !ok {
				t.Fatalf("Decode error %T %v, want a *Problem", err, err)
			}
			return
		}
		q := make([]byte, len(p))
		if err := Encode(q, w, c); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, q) {
			t.Fatalf("Decode accepted %q, which encodes as %q", p, q)
		}
	})
}

// FuzzChecker: a Checker fed any stream, in any pieces, never panics and
// accounts for every byte.
func FuzzChecker(f *testing.F) {
	p, _ := Append(nil, 1, 0, 40)
	q, _ := Append(nil, 1, 1, 40)
	f.Add(append(p, q...), 0, 7)
	f.Add(append(p, q...), 40, 13)
	f.Add([]byte{1, 2, 3, 0, 4}, 1, 2)
	f.Fuzz(func(t *testing.T, b []byte, size, step int) {
		size = max(0, size%64)
		step = max(1, step%97)
		o := Options{Size: size}
		if size > 0 && size < MinSize {
			o.Writers = 3
		}
		k, err := NewChecker(o)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(b); i += step {
			k.Write(b[i:min(i+step, len(b))])
		}
		r := k.Finish()
		if r.Bytes != int64(len(b)) || r.Intact > uint64(r.Records) || len(r.Problems) > MaxProblems {
			t.Fatalf("%+v for %d bytes", r, len(b))
		}
	})
}
