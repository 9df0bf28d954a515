package payload

import "fmt"

// MaxTagWriters is the most writers records shorter than MinSize can name:
// their tag byte must identify the writer, and 0 is never a tag.
const MaxTagWriters = 255

// Tags is the encoding of records shorter than MinSize (see the package
// doc): every byte of writer w's record with counter c is the tag 1 + w*m +
// c mod m, m = 255 / writers. The zero Tags is not usable; see NewTags.
type Tags struct {
	writers int
	mod     int
}

// NewTags returns the tag encoding for writers writers, 1 ≤ writers ≤
// MaxTagWriters.
func NewTags(writers int) (Tags, error) {
	if writers < 1 || writers > MaxTagWriters {
		return Tags{}, fmt.Errorf("%w: records under %d bytes name their writer in one byte: 1 to %d writers, got %d", ErrWriters, MinSize, MaxTagWriters, writers)
	}
	return Tags{writers: writers, mod: MaxTagWriters / writers}, nil
}

// Mod returns m: a record's tag holds its counter modulo m.
func (t Tags) Mod() int { return t.mod }

// Encode fills p with the tag of counter c of writer w.
// REQUIRES: 0 ≤ w < the writers t was made for.
func (t Tags) Encode(p []byte, w int, c uint64) {
	tag := t.tag(w, c)
	for i := range p {
		p[i] = tag
	}
}

func (t Tags) tag(w int, c uint64) byte {
	return byte(1 + w*t.mod + int(c%uint64(t.mod)))
}

// Decode checks that every byte of p is one tag and returns its writer and
// its counter modulo Mod. Damage is a *Problem, as from Decode.
func (t Tags) Decode(p []byte) (w int, r uint64, err error) {
	if t.mod == 0 {
		return 0, 0, damaged(Foreign, 0, -1, "no tag encoding (zero Tags)")
	}
	if len(p) == 0 {
		return 0, 0, damaged(Torn, 0, -1, "empty record")
	}
	tag := p[0]
	if tag == 0 || int(tag-1) >= t.writers*t.mod {
		return 0, 0, damaged(Foreign, 0, -1, "byte %#02x is no writer's tag (%d writers)", tag, t.writers)
	}
	w, r = int(tag-1)/t.mod, uint64(int(tag-1)%t.mod)
	for i := 1; i < len(p); i++ {
		if p[i] != tag {
			return w, r, damaged(Torn, i, w, "byte %d of the record is %#02x, byte 0 is %#02x", i, p[i], tag)
		}
	}
	return w, r, nil
}
