package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

var _updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpora in testdata/fuzz")

// seedStreams are the seed inputs of both fuzzers.
func seedStreams() [][]byte {
	torn := new(stream).records(1, 50).b[:40]
	return [][]byte{
		{},
		make([]byte, 16),
		new(stream).records(1, 0).b,
		new(stream).records(1, 10).b,
		new(stream).frame(KindRecord, 1, 3).frame(KindPadding, 0, 20).frame(KindFooter, 2, 24).b,
		new(stream).records(3, 10).zeros(40).b,
		new(stream).records(3, 10).zeros(7).b,
		new(stream).records(2, 10).zeros(32).raw(1).b,
		new(stream).records(2, 10).raw(torn...).b,
		new(stream).records(3, 10).flip(30).b,
		new(stream).records(2, 10).raw(1, 2, 3, 4, 5, 0, 0, 0).zeros(8).b,
		new(stream).records(1, 10).raw(0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff).zeros(8).b,
		new(stream).records(1, 300).b,
		func() []byte { b := make([]byte, FooterSize); PutFooter(b, Footer{5, 3, 4096}); return b }(),
	}
}

// FuzzDecode checks that Decode never panics and that whatever it accepts
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, s := range seedStreams() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := Decode(b)
		if err != nil {
			if n != 0 || fr.Payload != nil {
				t.Fatalf("Decode returned n=%d payload=%d with %v", n, len(fr.Payload), err)
			}
			return
		}
		if n != Size(len(fr.Payload)) || n > len(b) || fr.Kind == KindInvalid || fr.Kind > KindFooter {
			t.Fatalf("Decode: n=%d kind=%v len=%d of %d", n, fr.Kind, len(fr.Payload), len(b))
		}
		re := make([]byte, n)
		if m := EncodeKind(re, fr.Kind, fr.Seq, fr.Payload); m != n || !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, b[:n])
		}
		if fr.Kind == KindFooter && n == FooterSize {
			_, _ = DecodeFooter(b[:n])
		}
	})
}

// FuzzFileHeader checks that DecodeFileHeader never panics, and that a
// header it accepts re-encodes to the same 64 bytes when it had them all
// and their reserved bytes were zero.
func FuzzFileHeader(f *testing.F) {
	id := LogID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, h := range []FileHeader{{Kind: FileWAL, FirstSeq: 1}, {Kind: FileShm, FirstSeq: 1 << 32}, {Kind: FileWAL, FirstSeq: 99, Log: id}} {
		b := make([]byte, 64)
		PutFileHeader(b, h)
		f.Add(b)
		f.Add(b[:28])
		f.Add(b[:47])
	}
	f.Add([]byte("APNDLOG\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeFileHeader(b)
		if err != nil {
			if h != (FileHeader{}) {
				t.Fatalf("DecodeFileHeader returned %+v with %v", h, err)
			}
			return
		}
		if len(b) < 64 || binary.LittleEndian.Uint32(b[12:16]) != 0 || lastNonZero(b[48:64]) >= 0 {
			return
		}
		re := make([]byte, 64)
		PutFileHeader(re, h)
		if !bytes.Equal(re, b[:64]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, b[:64])
		}
	})
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// FuzzScanner checks that the Scanner never panics, that offsets strictly
// increase, that every frame re-encodes to the bytes at its offset, that it
// ends within the input, and that it agrees with the Decode-based reference.
func FuzzScanner(f *testing.F) {
	for i, s := range seedStreams() {
		f.Add(s, uint8(i%3*7), uint16(i%2*20))
	}
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8, maxPayload uint16) {
		const base = 1000
		var s *Scanner
		if chunk == 0 {
			s = NewScanner(bytes.NewReader(b), base, int(maxPayload))
		} else {
			// Small reads and a small buffer exercise refills and growth.
			s = newScanner(&chunkReader{bytes.NewReader(b), int(chunk)}, base, int(maxPayload), HeaderSize+int(chunk)/2)
		}
		got := scanAll(t, s)
		prev := int64(-1)
		for i, fr := range got.frames {
			off := got.offs[i]
			if off <= prev {
				t.Fatalf("offset %d after %d", off, prev)
			}
			prev = off
			rel := off - base
			n := int64(Size(len(fr.Payload)))
			if rel < 0 || rel+n > int64(len(b)) {
				t.Fatalf("frame at %d (size %d) outside input of %d", off, n, len(b))
			}
			re := make([]byte, n)
			EncodeKind(re, fr.Kind, fr.Seq, fr.Payload)
			if !bytes.Equal(re, b[rel:rel+n]) {
				t.Fatalf("frame %d at %d re-encodes differently", i, off)
			}
		}
		if got.end < base || got.end > base+int64(len(b)) || got.end <= prev {
			t.Fatalf("end %d, input [%d, %d), last frame at %d", got.end, base, base+len(b), prev)
		}
		var d *Damage
		if errors.As(got.err, &d) {
			rel := d.Offset - base
			if d.Offset != got.end || d.Extent <= 0 || rel+d.Extent > int64(len(b)) || b[rel+d.Extent-1] == 0 ||
				lastNonZeroSlow(b[rel+d.Extent:]) >= 0 {
				t.Fatalf("bad damage %+v for input of %d", *d, len(b))
			}
		} else if got.err != nil {
			t.Fatalf("unexpected error %v", got.err)
		} else if lastNonZeroSlow(b[got.end-base:]) >= 0 {
			t.Fatalf("clean end at %d with non-zero bytes after it", got.end)
		}
		if err := equalScans(got, reference(b, base, int(maxPayload))); err != nil {
			t.Fatal(err)
		}
	})
}

// TestUpdateCorpus writes the seeds to testdata/fuzz when run with
// -update-corpus, so that plain `go test` replays them as files too.
func TestUpdateCorpus(t *testing.T) {
	if !*_updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	for i, s := range seedStreams() {
		writeCorpus(t, "FuzzDecode", i, fmt.Sprintf("[]byte(%q)\n", s))
		writeCorpus(t, "FuzzScanner", i, fmt.Sprintf("[]byte(%q)\nbyte(%q)\nuint16(%d)\n", s, byte(i%5*9), i%3*30))
	}
}

func writeCorpus(t *testing.T, fuzzer string, i int, body string) {
	dir := filepath.Join("testdata", "fuzz", fuzzer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
	if err := os.WriteFile(name, []byte("go test fuzz v1\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
}
