package bench

import (
	"fmt"

	"github.com/appendlog/appendlog/internal/payload"
)

// Record limits. The records themselves are package payload's (see the
// package doc).
const (
	// MinFramedSize is the smallest record size that carries the full
	// self-describing record (writer, counter, filler, check). Smaller
	// records use one-byte tags (see the package doc).
	MinFramedSize = payload.MinSize
	// MaxRecordSize is the largest record size a case may use.
	MaxRecordSize = 1 << 20
	// MaxWriters is the most writer goroutines a case may use.
	MaxWriters = 1 << 12
	// MaxSmallWriters is the most writers a case with records smaller than
	// MinFramedSize may use: their tag byte must name the writer.
	MaxSmallWriters = payload.MaxTagWriters

	// _maxCounter bounds the records one writer writes in a run.
	_maxCounter = 1<<32 - 1
)

// codec encodes the records of one case: records of size bytes written by
// writers goroutines. It is immutable and safe for concurrent use.
type codec struct {
	size    int
	writers int
	tags    payload.Tags // size < MinFramedSize
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
	c := &codec{size: size, writers: writers}
	if size < MinFramedSize {
		t, err := payload.NewTags(writers)
		if err != nil {
			return nil, err
		}
		c.tags = t
	}
	return c, nil
}

func (c *codec) small() bool { return c.size < MinFramedSize }

// template returns a new record buffer for writer w: its record 0.
func (c *codec) template(w int) []byte {
	b := make([]byte, c.size)
	if c.small() {
		c.tags.Encode(b, w, 0)
	} else {
		_ = payload.Encode(b, w, 0) // newCodec bounds the size and writer
	}
	return b
}

// encode stamps counter n of writer w into rec, a template of writer w. It
// is the only per-record encoding work: payload.Stamp's O(1) rewrite of the
// head and check, or one tag.
func (c *codec) encode(rec []byte, w int, n uint64) {
	if c.small() {
		c.tags.Encode(rec, w, n)
		return
	}
	// newCodec bounds the size and writer and runs bound the counter
	// (newChecker), so Stamp cannot fail here.
	_ = payload.Stamp(rec, w, n)
}

// describe says in one sentence what the verifier checks for this codec.
func (c *codec) describe() string {
	if !c.small() {
		return "every byte of every record (writer id, counter, filler, check), per-writer counter order, exact count and file length"
	}
	if m := c.tags.Mod(); m > 1 {
		return fmt.Sprintf("file length, one tag per record (torn, zero and foreign bytes), per-writer counts, per-writer order modulo %d; no checksum", m)
	}
	return "file length, one tag per record (torn, zero and foreign bytes), per-writer counts; no order check with this many writers"
}
