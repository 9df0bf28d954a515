package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

// payloadOf returns a deterministic n-byte payload.
func payloadOf(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + 1)
	}
	return p
}

func TestMask(t *testing.T) {
	for _, c := range []uint32{0, 1, 0xa282ead8, 0xffffffff, 0x12345678} {
		if got := Unmask(Mask(c)); got != c {
			t.Errorf("Unmask(Mask(%#x)) = %#x", c, got)
		}
	}
	// The LevelDB formula, spelled out.
	c := uint32(0xdeadbeef)
	if want := ((c >> 15) | (c << 17)) + 0xa282ead8; Mask(c) != want {
		t.Errorf("Mask(%#x) = %#x, want %#x", c, Mask(c), want)
	}
}

// TestWireFormat pins the byte layout of a frame against a hand-built one.
func TestWireFormat(t *testing.T) {
	payload := []byte("hello")
	got := make([]byte, Size(len(payload)))
	if n := EncodeKind(got, KindPadding, 0x0102030405060708, payload); n != 21 {
		t.Fatalf("EncodeKind returned %d, want 21", n)
	}
	want := make([]byte, 21)
	binary.LittleEndian.PutUint32(want[4:], 2<<30|5)
	binary.LittleEndian.PutUint64(want[8:], 0x0102030405060708)
	copy(want[16:], payload)
	c := crc32.Checksum(want[4:], crc32.MakeTable(crc32.Castagnoli))
	binary.LittleEndian.PutUint32(want[0:], ((c>>15)|(c<<17))+0xa282ead8)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		KindInvalid: "invalid", KindRecord: "record", KindPadding: "padding",
		KindFooter: "footer", 7: "Kind(7)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, k := range []Kind{KindRecord, KindPadding, KindFooter} {
		for _, size := range []int{0, 1, 15, 16, 17, 100, 4096, 1 << 16} {
			t.Run(fmt.Sprintf("kind=%s/size=%d", k, size), func(t *testing.T) {
				payload := payloadOf(size)
				seq := uint64(size)*1e9 + uint64(k)
				buf := make([]byte, Size(size)+3) // trailing bytes are not part of the frame
				var n int
				if k == KindRecord {
					n = Encode(buf, seq, payload)
				} else {
					n = EncodeKind(buf, k, seq, payload)
				}
				if n != Size(size) {
					t.Fatalf("encoded size %d, want %d", n, Size(size))
				}
				f, m, err := Decode(buf)
				if err != nil {
					t.Fatal(err)
				}
				if m != n || f.Kind != k || f.Seq != seq || !bytes.Equal(f.Payload, payload) {
					t.Fatalf("decoded %v n=%d seq=%d len=%d", f.Kind, m, f.Seq, len(f.Payload))
				}
				if cap(f.Payload) != size {
					t.Fatalf("payload cap %d extends past the frame", cap(f.Payload))
				}
				// PutHeader writes the same header.
				hdr := make([]byte, HeaderSize)
				PutHeader(hdr, k, seq, payload)
				if !bytes.Equal(hdr, buf[:HeaderSize]) {
					t.Fatalf("PutHeader %x, Encode %x", hdr, buf[:HeaderSize])
				}
			})
		}
	}
}

func TestEncodeInPlace(t *testing.T) {
	buf := make([]byte, Size(10))
	copy(buf[HeaderSize:], "0123456789")
	Encode(buf, 5, buf[HeaderSize:])
	f, _, err := Decode(buf)
	if err != nil || string(f.Payload) != "0123456789" {
		t.Fatalf("Decode = %q, %v", f.Payload, err)
	}
}

func TestPutHeaderPanics(t *testing.T) {
	for name, fn := range map[string]func(){
		"kind0":     func() { PutHeader(make([]byte, 16), KindInvalid, 1, nil) },
		"kind4":     func() { PutHeader(make([]byte, 16), 4, 1, nil) },
		"short":     func() { PutHeader(make([]byte, 15), KindRecord, 1, nil) },
		"shortDst":  func() { Encode(make([]byte, 20), 1, make([]byte, 5)) },
		"tooLarge":  func() { PutHeader(make([]byte, 16), KindRecord, 1, make([]byte, MaxPayload+1)) },
		"footerDst": func() { PutFooter(make([]byte, FooterSize-1), Footer{}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			fn()
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good := make([]byte, Size(8))
	Encode(good, 42, payloadOf(8))
	with := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, ErrTruncated},
		{"short", good[:15], ErrTruncated},
		{"zero header", make([]byte, 16), ErrZeroed},
		{"zero header with payload", append(make([]byte, 16), 1, 2, 3), ErrZeroed},
		{"kind 0", with(func(b []byte) { b[7] &^= 0xc0 }), ErrKind},
		{"only crc set", with(func(b []byte) { clear(b[4:]) }), ErrKind},
		{"only seq set", append(make([]byte, 15), 1), ErrKind},
		{"payload cut", good[:len(good)-1], ErrTruncated},
		{"length grown", with(func(b []byte) { b[4]++ }), ErrTruncated},
		{"length shrunk", with(func(b []byte) { b[4]-- }), ErrChecksum},
		{"payload bit", with(func(b []byte) { b[20] ^= 1 }), ErrChecksum},
		{"seq bit", with(func(b []byte) { b[15] ^= 0x80 }), ErrChecksum},
		{"crc bit", with(func(b []byte) { b[0] ^= 1 }), ErrChecksum},
		{"max length", with(func(b []byte) { binary.LittleEndian.PutUint32(b[4:], 1<<30|MaxPayload) }), ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, n, err := Decode(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode err = %v, want %v", err, tc.want)
			}
			if n != 0 || f.Kind != KindInvalid || f.Payload != nil {
				t.Fatalf("Decode returned %+v, %d with error", f, n)
			}
		})
	}
}

// TestBitFlips checks that every single-bit flip and every whole-byte
// corruption of a frame is detected.
func TestBitFlips(t *testing.T) {
	for _, k := range []Kind{KindRecord, KindPadding, KindFooter} {
		for _, size := range []int{0, 1, 24, 200} {
			t.Run(fmt.Sprintf("kind=%s/size=%d", k, size), func(t *testing.T) {
				good := make([]byte, Size(size))
				EncodeKind(good, k, 0x0123456789abcdef, payloadOf(size))
				b := make([]byte, len(good))
				for i := range good {
					for _, x := range []byte{1, 2, 4, 8, 16, 32, 64, 128, 0xff, 0x5a} {
						copy(b, good)
						b[i] ^= x
						if _, _, err := Decode(b); err == nil {
							t.Fatalf("byte %d ^ %#x: corruption not detected", i, x)
						}
					}
				}
			})
		}
	}
}

// TestTruncations decodes every prefix of a frame.
func TestTruncations(t *testing.T) {
	good := make([]byte, Size(100))
	Encode(good, 7, payloadOf(100))
	for n := range len(good) {
		if _, _, err := Decode(good[:n]); err != ErrTruncated {
			t.Fatalf("prefix %d: err = %v, want ErrTruncated", n, err)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	payload := payloadOf(1000)
	hdr := make([]byte, HeaderSize)
	scratch := make([]byte, Size(len(payload)))
	buf := make([]byte, Size(len(payload)))
	Encode(buf, 1, payload)
	footer := make([]byte, FooterSize)
	PutFooter(footer, Footer{1, 2, 3})
	mark := make([]byte, MarkSize)
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"PutHeader", func() { PutHeader(hdr, KindRecord, 1, payload) }},
		{"Encode", func() { Encode(scratch, 1, payload) }},
		{"EncodeKind", func() { EncodeKind(scratch, KindPadding, 1, payload) }},
		{"Decode", func() {
			if _, _, err := Decode(buf); err != nil {
				panic(err)
			}
		}},
		{"DecodeError", func() { _, _, _ = Decode(buf[:100]) }},
		{"PutFooter", func() { PutFooter(footer, Footer{1, 2, 3}) }},
		{"DecodeFooter", func() {
			if _, err := DecodeFooter(footer); err != nil {
				panic(err)
			}
		}},
		{"PutMark", func() { PutMark(mark, Mark{1, 2}) }},
		{"DecodeMark", func() { DecodeMark(mark) }},
	} {
		if a := testing.AllocsPerRun(100, tc.fn); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", tc.name, a)
		}
	}
}
