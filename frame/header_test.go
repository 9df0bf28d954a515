package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestFileHeaderRoundTrip(t *testing.T) {
	for _, h := range []FileHeader{
		{Kind: FileWAL}, {Kind: FileWAL, FirstSeq: 1}, {Kind: FileShm, FirstSeq: 1<<64 - 1}, {Kind: 7, FirstSeq: 12345},
	} {
		buf := bytes.Repeat([]byte{0xee}, FileHeaderSize)
		PutFileHeader(buf, h)
		if string(buf[:8]) != "APNDLOG\x00" || binary.LittleEndian.Uint16(buf[8:]) != 1 {
			t.Fatalf("magic/version %x", buf[:10])
		}
		if !bytes.Equal(buf[28:64], make([]byte, 36)) {
			t.Fatalf("[28:64) not zeroed: %x", buf[28:64])
		}
		if buf[64] != 0xee {
			t.Fatal("PutFileHeader wrote past 64")
		}
		got, err := DecodeFileHeader(buf[:28])
		if err != nil || got != h {
			t.Fatalf("DecodeFileHeader = %+v, %v, want %+v", got, err, h)
		}
	}
}

func TestFileHeaderCorruption(t *testing.T) {
	good := make([]byte, 64)
	PutFileHeader(good, FileHeader{Kind: FileWAL, FirstSeq: 99})
	// Every single-bit flip in [0:28) is detected.
	for i := range 28 {
		for bit := range 8 {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			if _, err := DecodeFileHeader(b); err == nil {
				t.Fatalf("flip byte %d bit %d not detected", i, bit)
			}
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
		msg  string
	}{
		{"short", good[:27], ErrTruncated, ""},
		{"zero", make([]byte, 4096), ErrBadMagic, "frame: not an appendlog file"},
		{"magic", append([]byte("APNDLOGX"), good[8:]...), ErrBadMagic, ""},
		{"version", func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint16(b[8:], 2)
			return b
		}(), ErrVersion, "version 2"},
		{"crc", func() []byte { b := bytes.Clone(good); b[17]++; return b }(), ErrChecksum, ""},
		{"kind 0", func() []byte { b := make([]byte, 64); PutFileHeader(b, FileHeader{Kind: 0, FirstSeq: 1}); return b }(), ErrKind, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFileHeader(tc.b)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

// TestFileHeaderLogID: a header with a log ID round-trips it (read from 48
// bytes on, the zero LogID from fewer), every flipped bit of the ID or its
// CRC is detected, and a header without one reads as the zero LogID.
func TestFileHeaderLogID(t *testing.T) {
	id, err := NewLogID()
	if err != nil {
		t.Fatal(err)
	}
	if id.IsZero() || id.String() == "none" || len(id.String()) != 32 {
		t.Fatalf("NewLogID = %v", id)
	}
	var none LogID
	if none.String() != "none" {
		t.Fatalf("zero LogID prints %q", none.String())
	}
	other, _ := NewLogID()
	if !id.Matches(id) || !id.Matches(none) || !none.Matches(id) || id.Matches(other) {
		t.Fatal("Matches: equal or zero IDs match, different ones do not")
	}
	h := FileHeader{Kind: FileWAL, FirstSeq: 42, Log: id}
	buf := bytes.Repeat([]byte{0xee}, FileHeaderSize)
	PutFileHeader(buf, h)
	if !bytes.Equal(buf[48:64], make([]byte, 16)) || buf[64] != 0xee {
		t.Fatalf("[48:64) not zeroed or wrote past 64: %x", buf[44:68])
	}
	if got, err := DecodeFileHeader(buf[:64]); err != nil || got != h {
		t.Fatalf("DecodeFileHeader = %+v, %v, want %+v", got, err, h)
	}
	if got, err := DecodeFileHeader(buf[:47]); err != nil || !got.Log.IsZero() || got.FirstSeq != 42 {
		t.Fatalf("DecodeFileHeader of 47 bytes = %+v, %v, want no log id", got, err)
	}
	for i := 28; i < 48; i++ {
		for bit := range 8 {
			b := bytes.Clone(buf[:64])
			b[i] ^= 1 << bit
			if got, err := DecodeFileHeader(b); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "log id") {
				t.Fatalf("flip byte %d bit %d: %+v, %v", i, bit, got, err)
			}
		}
	}
	// The CRC of the zero ID, written as if it were one, is refused.
	b := make([]byte, 64)
	PutFileHeader(b, FileHeader{Kind: FileWAL, FirstSeq: 1})
	binary.LittleEndian.PutUint32(b[44:], crcOf(b[28:44]))
	if _, err := DecodeFileHeader(b); !errors.Is(err, ErrChecksum) {
		t.Fatalf("zero id with a CRC: %v", err)
	}
}

func TestFileKindString(t *testing.T) {
	if FileWAL.String() != "wal" || FileShm.String() != "shm" || FileKind(0).String() != "FileKind(0)" {
		t.Fatal(FileWAL, FileShm, FileKind(0))
	}
}

func TestMark(t *testing.T) {
	for _, m := range []Mark{{0, 0}, {FileHeaderSize, 1}, {1 << 40, 1<<64 - 1}, {-1, 5}} {
		buf := make([]byte, MarkSize)
		PutMark(buf, m)
		if got, ok := DecodeMark(buf); !ok || got != m {
			t.Fatalf("DecodeMark = %+v, %v, want %+v", got, ok, m)
		}
		for i := range MarkSize {
			for bit := range 8 {
				b := bytes.Clone(buf)
				b[i] ^= 1 << bit
				if _, ok := DecodeMark(b); ok {
					t.Fatalf("mark %+v: flip byte %d bit %d not detected", m, i, bit)
				}
			}
		}
	}
	if _, ok := DecodeMark(make([]byte, MarkSize)); ok {
		t.Fatal("zero slot decoded")
	}
	if _, ok := DecodeMark(make([]byte, MarkSize-1)); ok {
		t.Fatal("short slot decoded")
	}
	// The slot sits after the file header without disturbing it.
	region := make([]byte, FileHeaderSize)
	PutFileHeader(region, FileHeader{Kind: FileWAL, FirstSeq: 1})
	PutMark(region[MarkOffset:], Mark{5000, 10})
	if _, err := DecodeFileHeader(region); err != nil {
		t.Fatal(err)
	}
	if m, ok := DecodeMark(region[MarkOffset:]); !ok || m != (Mark{5000, 10}) {
		t.Fatal(m, ok)
	}
}

func TestFooter(t *testing.T) {
	for _, f := range []Footer{{1, 0, FileHeaderSize}, {100, 5000, 1 << 30}, {1<<64 - 1, 1, 0}} {
		tail := make([]byte, 100+FooterSize)
		if n := PutFooter(tail[100:], f); n != FooterSize || FooterSize != 40 {
			t.Fatalf("PutFooter = %d", n)
		}
		got, err := DecodeFooter(tail) // the whole tail: reads the last 40 bytes
		if err != nil || got != f {
			t.Fatalf("DecodeFooter = %+v, %v, want %+v", got, err, f)
		}
		fr, n, err := Decode(tail[100:])
		if err != nil || n != FooterSize || fr.Kind != KindFooter || fr.Seq != f.FirstSeq+f.Count {
			t.Fatalf("footer frame %+v %d %v", fr, n, err)
		}
		for i := range FooterSize {
			b := bytes.Clone(tail[100:])
			b[i] ^= 0x04
			if _, err := DecodeFooter(b); err == nil {
				t.Fatalf("flip byte %d not detected", i)
			}
		}
	}
	footerLike := func(k Kind, seq uint64, payload []byte) []byte {
		b := make([]byte, Size(len(payload)))
		EncodeKind(b, k, seq, payload)
		return b
	}
	payload := make([]byte, 24)
	binary.LittleEndian.PutUint64(payload, 10)
	binary.LittleEndian.PutUint64(payload[8:], 3)
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", make([]byte, FooterSize-1), ErrTruncated},
		{"zero", make([]byte, FooterSize), ErrZeroed},
		{"record kind", footerLike(KindRecord, 13, payload), ErrFooter},
		{"seq", footerLike(KindFooter, 12, payload), ErrFooter},
		{"short payload", append(footerLike(KindFooter, 13, payload[:22]), 0, 0), ErrFooter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeFooter(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
