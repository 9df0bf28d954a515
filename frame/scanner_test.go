package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// scanned is what a scan produced: frames with their offsets, then the end.
type scanned struct {
	offs   []int64
	frames []Frame
	end    int64
	err    error
}

// scanAll runs s to the end, copying payloads, and checks the Scanner's
// per-frame invariants.
func scanAll(t testing.TB, s *Scanner) scanned {
	t.Helper()
	var r scanned
	for s.Next() {
		f := s.Frame()
		f.Payload = bytes.Clone(f.Payload)
		if f.Payload == nil {
			f.Payload = []byte{}
		}
		r.offs = append(r.offs, s.Offset())
		r.frames = append(r.frames, f)
	}
	r.end, r.err = s.Offset(), s.Err()
	if s.Next() || s.Offset() != r.end || s.Err() != r.err {
		t.Fatalf("Scanner not sticky after the end")
	}
	if f := s.Frame(); f.Payload != nil || f.Kind != KindInvalid {
		t.Fatalf("Frame after the end = %+v, want zero", f)
	}
	return r
}

// reference scans b with Decode alone: the specification of Scanner.
func reference(b []byte, base int64, maxPayload int) scanned {
	if maxPayload <= 0 {
		maxPayload = MaxPayload
	}
	var r scanned
	off := 0
	for off < len(b) {
		f, n, err := decode(b[off:], maxPayload)
		if err != nil {
			if last := lastNonZeroSlow(b[off:]); last >= 0 {
				r.err = &Damage{Offset: base + int64(off), Err: err, Extent: int64(last + 1)}
			}
			break
		}
		f.Payload = bytes.Clone(f.Payload)
		r.offs = append(r.offs, base+int64(off))
		r.frames = append(r.frames, f)
		off += n
	}
	r.end = base + int64(off)
	return r
}

func lastNonZeroSlow(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

func equalScans(a, b scanned) error {
	if len(a.frames) != len(b.frames) {
		return fmt.Errorf("%d frames, want %d", len(a.frames), len(b.frames))
	}
	for i := range a.frames {
		fa, fb := a.frames[i], b.frames[i]
		if a.offs[i] != b.offs[i] || fa.Kind != fb.Kind || fa.Seq != fb.Seq || !bytes.Equal(fa.Payload, fb.Payload) {
			return fmt.Errorf("frame %d at %d (%v seq %d len %d), want at %d (%v seq %d len %d)", i,
				a.offs[i], fa.Kind, fa.Seq, len(fa.Payload), b.offs[i], fb.Kind, fb.Seq, len(fb.Payload))
		}
	}
	if a.end != b.end {
		return fmt.Errorf("end %d, want %d", a.end, b.end)
	}
	var da, db *Damage
	errors.As(a.err, &da)
	errors.As(b.err, &db)
	switch {
	case (a.err == nil) != (b.err == nil) || (da == nil) != (db == nil):
		return fmt.Errorf("err %v, want %v", a.err, b.err)
	case da != nil && *da != *db:
		return fmt.Errorf("damage %+v, want %+v", *da, *db)
	}
	return nil
}

// readers returns ways to read b that the Scanner must not be able to tell
// apart, paired with initial buffer sizes.
func readers() map[string]struct {
	wrap    func([]byte) io.Reader
	bufSize int
} {
	plain := func(b []byte) io.Reader { return bytes.NewReader(b) }
	return map[string]struct {
		wrap    func([]byte) io.Reader
		bufSize int
	}{
		"default":     {plain, _initialBufSize},
		"smallbuf":    {plain, 16},
		"buf=37":      {plain, 37},
		"onebyte":     {func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }, 64},
		"half":        {func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }, 100},
		"dataerr":     {func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) }, 50},
		"emptyreads":  {func(b []byte) io.Reader { return &stutterReader{r: bytes.NewReader(b)} }, 40},
		"large+small": {func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }, 1 << 16},
	}
}

// stutterReader returns (0, nil) before every real read.
type stutterReader struct {
	r   io.Reader
	odd bool
}

func (s *stutterReader) Read(p []byte) (int, error) {
	if s.odd = !s.odd; s.odd {
		return 0, nil
	}
	return s.r.Read(p)
}

// stream builds a test input.
type stream struct{ b []byte }

func (s *stream) frame(k Kind, seq uint64, size int) *stream {
	buf := make([]byte, Size(size))
	EncodeKind(buf, k, seq, payloadOf(size))
	s.b = append(s.b, buf...)
	return s
}

func (s *stream) records(n, size int) *stream {
	for i := range n {
		s.frame(KindRecord, uint64(i+1), size)
	}
	return s
}

func (s *stream) raw(b ...byte) *stream { s.b = append(s.b, b...); return s }
func (s *stream) zeros(n int) *stream   { s.b = append(s.b, make([]byte, n)...); return s }
func (s *stream) flip(off int) *stream  { s.b[off] ^= 0x10; return s }

func TestScanner(t *testing.T) {
	const base = FileHeaderSize
	type want struct {
		frames int
		end    int64 // relative to base
		err    error // sentinel, or nil for a clean end
		extent int64
	}
	threeRecs := int64(3 * Size(10))
	for _, tc := range []struct {
		name       string
		in         *stream
		maxPayload int
		want       want
	}{
		{"empty", &stream{}, 0, want{0, 0, nil, 0}},
		{"frames", new(stream).records(3, 10), 0, want{3, threeRecs, nil, 0}},
		{"all kinds", new(stream).frame(KindRecord, 1, 5).frame(KindPadding, 0, 100).frame(KindFooter, 2, 24), 0,
			want{3, int64(Size(5) + Size(100) + Size(24)), nil, 0}},
		{"empty payloads", new(stream).records(50, 0), 0, want{50, 50 * HeaderSize, nil, 0}},
		{"zero tail 1", new(stream).records(3, 10).zeros(1), 0, want{3, threeRecs, nil, 0}},
		{"zero tail 15", new(stream).records(3, 10).zeros(15), 0, want{3, threeRecs, nil, 0}},
		{"zero tail 16", new(stream).records(3, 10).zeros(16), 0, want{3, threeRecs, nil, 0}},
		{"zero tail 3MiB", new(stream).records(3, 10).zeros(3 << 20), 0, want{3, threeRecs, nil, 0}},
		{"only zeros", new(stream).zeros(100000), 0, want{0, 0, nil, 0}},
		{"garbage after zeros", new(stream).records(3, 10).zeros(1000).raw(1, 2, 3).zeros(50), 0,
			want{3, threeRecs, ErrZeroed, 1003}},
		{"garbage far after zeros", new(stream).records(3, 10).zeros(3 << 20).raw(9), 0,
			want{3, threeRecs, ErrZeroed, 3<<20 + 1}},
		{"frame after zero hole", new(stream).records(1, 10).zeros(32).records(1, 10), 0,
			want{1, int64(Size(10)), ErrZeroed, 32 + int64(Size(10))}},
		{"short nonzero tail", new(stream).records(3, 10).raw(0, 0, 5).zeros(4), 0,
			want{3, threeRecs, ErrTruncated, 3}},
		{"short tail one byte", new(stream).records(3, 10).raw(1), 0, want{3, threeRecs, ErrTruncated, 1}},
		{"header only", new(stream).records(3, 10).raw(new(stream).records(1, 10).b[:HeaderSize]...), 0,
			want{3, threeRecs, ErrTruncated, 9}}, // seq 1: the last 7 bytes are zero
		{"torn payload", new(stream).records(3, 10).raw(new(stream).records(1, 10).b[:20]...), 0,
			want{3, threeRecs, ErrTruncated, 20}},
		{"torn payload zero-padded", new(stream).records(3, 10).raw(new(stream).records(1, 1000).b[:600]...).zeros(100), 0,
			want{3, threeRecs, ErrTruncated, 600}},
		{"checksum", new(stream).records(3, 10).flip(int(Size(10)) + 18), 0,
			want{1, int64(Size(10)), ErrChecksum, 2 * int64(Size(10))}},
		{"checksum zero tail", new(stream).records(3, 10).flip(2*Size(10) + 1).zeros(5000), 0,
			want{2, 2 * int64(Size(10)), ErrChecksum, int64(Size(10))}},
		{"kind 0", new(stream).records(2, 10).raw(1, 2, 3, 4, 5, 0, 0, 0).zeros(8), 0,
			want{2, 2 * int64(Size(10)), ErrKind, 5}},
		{"too large", new(stream).records(2, 100).frame(KindRecord, 3, 101).records(1, 1), 100,
			want{2, 2 * int64(Size(100)), ErrTooLarge, int64(Size(101) + Size(1))}},
		{"max payload fits", new(stream).records(2, 100), 100, want{2, 2 * int64(Size(100)), nil, 0}},
		{"large frames", new(stream).records(1, 10).frame(KindRecord, 2, 3<<20+5).records(2, 7).frame(KindRecord, 9, 1<<20), 0,
			want{5, int64(Size(10) + Size(3<<20+5) + 2*Size(7) + Size(1<<20)), nil, 0}},
	} {
		for rname, rd := range readers() {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				got := scanAll(t, newScanner(rd.wrap(tc.in.b), base, tc.maxPayload, rd.bufSize))
				if err := equalScans(got, reference(tc.in.b, base, tc.maxPayload)); err != nil {
					t.Fatal(err)
				}
				if len(got.frames) != tc.want.frames || got.end != base+tc.want.end {
					t.Fatalf("%d frames ending at %d, want %d ending at %d", len(got.frames), got.end, tc.want.frames, base+tc.want.end)
				}
				if tc.want.err == nil {
					if got.err != nil {
						t.Fatalf("err = %v, want clean end", got.err)
					}
					return
				}
				var d *Damage
				if !errors.As(got.err, &d) || !IsDamage(got.err) {
					t.Fatalf("err = %v, want Damage", got.err)
				}
				if !errors.Is(got.err, tc.want.err) || d.Offset != got.end || d.Extent != tc.want.extent {
					t.Fatalf("damage %+v, want %v at %d extent %d", *d, tc.want.err, got.end, tc.want.extent)
				}
			})
		}
	}
}

func TestScannerBufferGrowth(t *testing.T) {
	in := new(stream).records(2, 10).frame(KindRecord, 3, 3<<20).records(10, 10)
	s := NewScanner(bytes.NewReader(in.b), 0, 0)
	scanAll(t, s)
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if c := cap(s.buf); c < Size(3<<20) || c > 2*Size(3<<20) {
		t.Fatalf("buffer cap %d for a %d-byte frame", c, Size(3<<20))
	}
	// Growth never exceeds HeaderSize+maxPayload.
	in = new(stream).records(2, 10).frame(KindRecord, 3, 50000).records(10, 10)
	s = newScanner(bytes.NewReader(in.b), 0, 50000, 64)
	scanAll(t, s)
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if c := cap(s.buf); c != Size(50000) {
		t.Fatalf("buffer cap %d, want %d", c, Size(50000))
	}
	// A garbage length in a torn tail does not allocate maxPayload.
	in = new(stream).records(2, 10).raw(1, 2, 3, 4, 0xff, 0xff, 0xff, 0x7f, 1).zeros(3 << 20).raw(1)
	s = NewScanner(bytes.NewReader(in.b), 0, 0)
	scanAll(t, s)
	if !errors.Is(s.Err(), ErrTruncated) {
		t.Fatal(s.Err())
	}
	if c := cap(s.buf); c > 4<<20 {
		t.Fatalf("buffer cap %d for a %d-byte input", c, len(in.b))
	}
}

func TestScannerReadError(t *testing.T) {
	boom := errors.New("boom")
	in := new(stream).records(3, 10)
	for _, cut := range []int{0, 5, Size(10), Size(10) + 20, 3 * Size(10)} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			r := io.MultiReader(bytes.NewReader(in.b[:cut]), iotest.ErrReader(boom))
			s := newScanner(r, 100, 0, 64)
			got := scanAll(t, s)
			if !errors.Is(got.err, boom) || IsDamage(got.err) {
				t.Fatalf("err = %v, want wrapped boom", got.err)
			}
			if want := int64(100 + cut/Size(10)*Size(10)); got.end != want {
				t.Fatalf("end %d, want %d", got.end, want)
			}
		})
	}
	t.Run("during extent scan", func(t *testing.T) {
		b := new(stream).records(1, 10).zeros(100).b
		r := io.MultiReader(bytes.NewReader(b), iotest.ErrReader(boom))
		got := scanAll(t, newScanner(r, 0, 0, 64))
		if !errors.Is(got.err, boom) || IsDamage(got.err) || got.end != int64(Size(10)) {
			t.Fatalf("end %d err %v", got.end, got.err)
		}
	})
	t.Run("no progress", func(t *testing.T) {
		got := scanAll(t, NewScanner(iotest.ErrReader(nil), 0, 0))
		if !errors.Is(got.err, io.ErrNoProgress) {
			t.Fatalf("err = %v, want ErrNoProgress", got.err)
		}
	})
}

func TestDamageError(t *testing.T) {
	d := &Damage{Offset: 4242, Err: ErrChecksum, Extent: 132}
	if got, want := d.Error(), "frame: checksum mismatch at offset 4242 (132 bytes to end)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("recover: %w", d)
	if !IsDamage(wrapped) || !errors.Is(wrapped, ErrChecksum) || errors.Is(wrapped, ErrKind) {
		t.Fatal("errors.Is/As through Damage")
	}
	if IsDamage(ErrChecksum) || IsDamage(nil) {
		t.Fatal("IsDamage of a bare sentinel")
	}
}

func TestLastNonZero(t *testing.T) {
	for _, n := range []int{0, 1, 7, 4095, 4096, 4097, 10000} {
		b := make([]byte, n)
		if got := lastNonZero(b); got != -1 {
			t.Fatalf("len %d zero: %d", n, got)
		}
		for _, i := range []int{0, n / 3, n - 4097, n - 4096, n - 1} {
			if i < 0 || i >= n {
				continue
			}
			clear(b)
			b[i] = 1
			if n > 2 {
				b[0] = 1
			}
			if got := lastNonZero(b); got != i {
				t.Fatalf("len %d nonzero at %d: got %d", n, i, got)
			}
		}
	}
}

func TestScannerZeroAllocs(t *testing.T) {
	in := new(stream).records(5000, 100)
	s := NewScanner(bytes.NewReader(in.b), 0, 0)
	s.Next() // allocate the buffer
	if a := testing.AllocsPerRun(1000, func() {
		if !s.Next() {
			panic(s.Err())
		}
	}); a != 0 {
		t.Fatalf("%v allocs per Next, want 0", a)
	}
}

// TestScannerReset checks that a reset Scanner scans a second input as a new
// one would, from its base offset, without allocating a new buffer.
func TestScannerReset(t *testing.T) {
	a := new(stream).records(300, 100)
	b := new(stream).records(200, 50)
	want := scanAll(t, NewScanner(bytes.NewReader(b.b), 4096, 0))

	s := NewScanner(bytes.NewReader(a.b), 0, 0)
	if first := scanAll(t, s); len(first.frames) != 300 || first.err != nil {
		t.Fatalf("first input: %d frames, err %v", len(first.frames), first.err)
	}
	buf := &s.buf[0]
	s.Reset(bytes.NewReader(b.b), 4096)
	got := scanAll(t, s)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after Reset scanned %d frames ending at %d (err %v), want %d ending at %d (err %v)",
			len(got.frames), got.end, got.err, len(want.frames), want.end, want.err)
	}
	if &s.buf[0] != buf {
		t.Fatal("Reset dropped the buffer it owned")
	}
	if a := testing.AllocsPerRun(100, func() {
		s.Reset(bytes.NewReader(b.b[:0]), 0)
	}); a > 1 { // the bytes.Reader escapes; the Scanner adds nothing
		t.Fatalf("%v allocs per Reset", a)
	}
}

// TestScannerZeroValueReset checks that a zero Scanner, Reset onto an
// input, scans it as NewScanner(r, base, 0) would: a caller keeping one
// Scanner for many files may declare it rather than construct it.
func TestScannerZeroValueReset(t *testing.T) {
	b := new(stream).records(200, 50)
	want := scanAll(t, NewScanner(bytes.NewReader(b.b), 4096, 0))
	var s Scanner
	s.Reset(bytes.NewReader(b.b), 4096)
	got := scanAll(t, &s)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("zero Scanner after Reset scanned %d frames ending at %d (err %v), want %d ending at %d (err %v)",
			len(got.frames), got.end, got.err, len(want.frames), want.end, want.err)
	}
}
