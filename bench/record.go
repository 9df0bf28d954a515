package bench

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record layout constants. They are part of the file format the verifier
// reads and must not change.
const (
	// MinFramedSize is the smallest record size that carries the full
	// self-describing header (writer, counter, checksum, trailer). Smaller
	// records use the one-byte tag scheme (see the package doc).
	MinFramedSize = 16
	// MaxRecordSize is the largest record size a case may use.
	MaxRecordSize = 1 << 20
	// MaxWriters is the most writer goroutines a case may use: the
	// writer id is a u16.
	MaxWriters = 1 << 12
	// MaxSmallWriters is the most writers a case with records smaller than
	// MinFramedSize may use: their tag byte must name the writer.
	MaxSmallWriters = 255

	_headerSize  = 10 // writer u16, counter u32, crc u32
	_trailerSize = 4  // ^counter u32
	_maxCounter  = 1<<32 - 1
)

// codec encodes and parses the records of one case: records of size bytes
// written by writers goroutines. It is immutable and safe for concurrent
// use.
type codec struct {
	size    int
	writers int
	small   bool // size < MinFramedSize: one-byte tags
	mod     int  // small: counter modulus m = 255 / writers
	tab     *crc32.Table
}

func newCodec(size, writers int) (*codec, error) {
	switch {
	case size < 1 || size > MaxRecordSize:
		return nil, fmt.Errorf("record size %d out of range [1, %d]", size, MaxRecordSize)
	case writers < 1 || writers > MaxWriters:
		return nil, fmt.Errorf("writers %d out of range [1, %d]", writers, MaxWriters)
	case size < MinFramedSize && writers > MaxSmallWriters:
		return nil, fmt.Errorf("%d-byte records identify their writer in one byte: at most %d writers, got %d", size, MaxSmallWriters, writers)
	}
	c := &codec{size: size, writers: writers, small: size < MinFramedSize, tab: crc32.MakeTable(crc32.Castagnoli)}
	if c.small {
		c.mod = 255 / writers
	}
	return c, nil
}

// fill returns filler byte i of writer w's records.
func fill(w, i int) byte {
	return byte(i*131+w*29) ^ 0x5b
}

// template returns a new record buffer for writer w with everything that
// does not depend on the counter already in place.
func (c *codec) template(w int) []byte {
	b := make([]byte, c.size)
	if !c.small {
		binary.LittleEndian.PutUint16(b[0:2], uint16(w))
		for i := _headerSize; i < c.size-_trailerSize; i++ {
			b[i] = fill(w, i)
		}
	}
	return b
}

// encode stamps counter n into rec, a template of writer w. It is the only
// per-record encoding work: a few bytes and a CRC over 6 of them.
func (c *codec) encode(rec []byte, w int, n uint64) {
	if c.small {
		tag := c.tag(w, n)
		for i := range rec {
			rec[i] = tag
		}
		return
	}
	binary.LittleEndian.PutUint32(rec[2:6], uint32(n))
	binary.LittleEndian.PutUint32(rec[6:10], crc32.Checksum(rec[0:6], c.tab))
	binary.LittleEndian.PutUint32(rec[c.size-_trailerSize:], ^uint32(n))
}

func (c *codec) tag(w int, n uint64) byte {
	return byte(1 + w*c.mod + int(n%uint64(c.mod)))
}

// parse decodes one record. For framed records it returns the writer and
// the counter; for small records the writer and the counter modulo mod.
// A record that does not decode is returned as a Damage (with Offset 0).
func (c *codec) parse(rec []byte) (w int, n uint64, d *Damage) {
	if c.small {
		return c.parseSmall(rec)
	}
	if len(rec) != c.size {
		return 0, 0, &Damage{Kind: Torn, Writer: -1, Detail: fmt.Sprintf("record of %d bytes, want %d", len(rec), c.size)}
	}
	crc := binary.LittleEndian.Uint32(rec[6:10])
	if got := crc32.Checksum(rec[0:6], c.tab); got != crc {
		return 0, 0, &Damage{Kind: Foreign, Writer: -1, Detail: fmt.Sprintf("header checksum %08x, stored %08x: not a record", got, crc)}
	}
	w = int(binary.LittleEndian.Uint16(rec[0:2]))
	n = uint64(binary.LittleEndian.Uint32(rec[2:6]))
	if w >= c.writers {
		return 0, 0, &Damage{Kind: Foreign, Writer: -1, Detail: fmt.Sprintf("writer id %d, but only %d writers ran", w, c.writers)}
	}
	for i := _headerSize; i < c.size-_trailerSize; i++ {
		if rec[i] != fill(w, i) {
			return w, n, &Damage{Kind: Torn, Writer: w, Detail: fmt.Sprintf("writer %d record %d: byte %d is %#02x, want %#02x", w, n, i, rec[i], fill(w, i))}
		}
	}
	if t := binary.LittleEndian.Uint32(rec[c.size-_trailerSize:]); t != ^uint32(n) {
		return w, n, &Damage{Kind: Torn, Writer: w, Detail: fmt.Sprintf("writer %d record %d ends with the trailer of record %d", w, n, ^t)}
	}
	return w, n, nil
}

func (c *codec) parseSmall(rec []byte) (w int, r uint64, d *Damage) {
	if len(rec) != c.size {
		return 0, 0, &Damage{Kind: Torn, Writer: -1, Detail: fmt.Sprintf("record of %d bytes, want %d", len(rec), c.size)}
	}
	tag := rec[0]
	if tag == 0 || int(tag-1) >= c.writers*c.mod {
		return 0, 0, &Damage{Kind: Foreign, Writer: -1, Detail: fmt.Sprintf("byte %#02x is no writer's tag (%d writers)", tag, c.writers)}
	}
	w, r = int(tag-1)/c.mod, uint64(int(tag-1)%c.mod)
	for i := 1; i < len(rec); i++ {
		if rec[i] != tag {
			return w, r, &Damage{Kind: Torn, Writer: w, Detail: fmt.Sprintf("byte %d of the record is %#02x, byte 0 is %#02x", i, rec[i], tag)}
		}
	}
	return w, r, nil
}

// describe says in one sentence what the verifier checks for this codec.
func (c *codec) describe() string {
	if !c.small {
		return "header CRC-32C, writer id, every filler byte, trailer, per-writer counter order, exact count and file length"
	}
	if c.mod == 1 {
		return "file length, one tag per record (torn, zero and foreign bytes), per-writer counts; no order check with this many writers"
	}
	return fmt.Sprintf("file length, one tag per record (torn, zero and foreign bytes), per-writer counts, per-writer order modulo %d; no checksum", c.mod)
}
