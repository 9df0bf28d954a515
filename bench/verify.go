package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/appendlog/appendlog/wal"
)

// DamageKind says what is wrong with the bytes at some place in a file.
type DamageKind int

// Kinds of damage the verifier reports.
const (
	// Torn is a record whose bytes are not all its own: a partial record
	// at the end of the file, or a record spliced from two.
	Torn DamageKind = iota + 1
	// Foreign is bytes that are no record at all: zeros, garbage, or a
	// record of a writer that did not run.
	Foreign
	// Missing is a record that was written but is not in the file.
	Missing
	// Reordered is a record that comes before a record its writer wrote
	// earlier.
	Reordered
	// Duplicate is a record found more than once.
	Duplicate
	// Extra is a record numbered past the last one its writer wrote.
	Extra
)

// String returns the kind's name as used in reports.
func (k DamageKind) String() string {
	switch k {
	case Torn:
		return "torn record"
	case Foreign:
		return "foreign bytes"
	case Missing:
		return "missing record"
	case Reordered:
		return "reordered record"
	case Duplicate:
		return "duplicate record"
	case Extra:
		return "extra record"
	default:
		return fmt.Sprintf("DamageKind(%d)", int(k))
	}
}

// Damage is one problem the verifier found.
type Damage struct {
	Kind DamageKind
	// Offset is the byte offset of the record in the file; -1 for a wal
	// (see Seq) and when the damage has no place (a count that does not
	// add up).
	Offset int64
	// Seq is the sequence number of the damaged record in a wal, or 0.
	Seq uint64
	// Writer is the writer the damage concerns, or -1 if unknown.
	Writer int
	// Detail says what exactly was wrong.
	Detail string
}

func (d Damage) String() string {
	at := ""
	switch {
	case d.Seq > 0:
		at = fmt.Sprintf(" at seq %d", d.Seq)
	case d.Offset >= 0:
		at = fmt.Sprintf(" at byte %d", d.Offset)
	}
	return fmt.Sprintf("%s%s: %s", d.Kind, at, d.Detail)
}

// _maxDamage bounds the damages a Verification keeps; DamageCount counts
// them all.
const _maxDamage = 16

// Verification is what the verifier found in one output.
type Verification struct {
	// Path is the file or wal directory checked.
	Path string
	// Expected is the number of records the writers wrote.
	Expected uint64
	// Intact counts records that decoded and checked out, wherever they
	// were; Lost is Expected minus Intact, or 0.
	Intact, Lost uint64
	// Bytes is the size of the data read (payload bytes for a wal).
	Bytes int64
	// Damage lists the first problems found; DamageCount counts all.
	Damage      []Damage
	DamageCount int
	// Checked says what was checked at this record size.
	Checked string
}

// OK reports whether the output is exactly what the writers wrote.
func (v *Verification) OK() bool { return v.DamageCount == 0 && v.Lost == 0 && v.Intact == v.Expected }

// Err returns nil if the output verified, or an error naming the output,
// the first damage and how many there were.
func (v *Verification) Err() error {
	if v.OK() {
		return nil
	}
	if v.DamageCount == 0 {
		return fmt.Errorf("%s: %d of %d records intact", v.Path, v.Intact, v.Expected)
	}
	more := ""
	if v.DamageCount > 1 {
		more = fmt.Sprintf(" (and %d more problems)", v.DamageCount-1)
	}
	return fmt.Errorf("%s: %s%s; %d of %d records intact", v.Path, v.Damage[0], more, v.Intact, v.Expected)
}

// checker follows the records of one output in file order.
type checker struct {
	c      *codec
	v      *Verification
	expect []uint64 // records each writer wrote
	next   []uint64 // next counter each writer should have
	seen   []uint64 // intact records of each writer
	off    int64    // byte offset of the record being observed, or -1
	seq    uint64   // wal sequence number of the record being observed, or 0
}

func newChecker(c *codec, path string, expect []uint64) (*checker, error) {
	if len(expect) != c.writers {
		return nil, fmt.Errorf("verify %s: %d per-writer counts for %d writers", path, len(expect), c.writers)
	}
	v := &Verification{Path: path, Checked: c.describe()}
	for _, n := range expect {
		if n > _maxCounter+1 {
			return nil, fmt.Errorf("verify %s: %d records for one writer, the counter holds %d", path, n, uint64(_maxCounter)+1)
		}
		v.Expected += n
	}
	return &checker{c: c, v: v, expect: expect, next: make([]uint64, c.writers), seen: make([]uint64, c.writers)}, nil
}

// damage records d; d.Offset and d.Seq, unless set, are the place of the
// record being observed.
func (k *checker) damage(d Damage) {
	if d.Offset == 0 && d.Seq == 0 {
		d.Offset, d.Seq = k.off, k.seq
	}
	if len(k.v.Damage) < _maxDamage {
		k.v.Damage = append(k.v.Damage, d)
	}
	k.v.DamageCount++
}

// observe checks one record found at byte off of a file, or (off < 0) with
// sequence number seq in a wal.
func (k *checker) observe(rec []byte, off int64, seq uint64) {
	k.off, k.seq = off, seq
	w, n, d := k.c.parse(rec)
	if d != nil {
		k.damage(*d)
		return
	}
	k.seen[w]++
	k.v.Intact++
	if k.c.small {
		k.observeSmall(w, n, off)
		return
	}
	want := k.next[w]
	switch {
	case n == want:
		k.next[w]++
	case n >= k.expect[w]:
		k.damage(Damage{Kind: Extra, Writer: w, Detail: fmt.Sprintf("writer %d record %d, but it wrote records 0..%d", w, n, int64(k.expect[w])-1)})
	case n > want:
		what := fmt.Sprintf("records %d..%d", want, n-1)
		if n-1 == want {
			what = fmt.Sprintf("record %d", want)
		}
		k.damage(Damage{Kind: Missing, Writer: w, Detail: fmt.Sprintf("writer %d: %s missing before record %d", w, what, n)})
		k.next[w] = n + 1
	case n+1 == want:
		k.damage(Damage{Kind: Duplicate, Writer: w, Detail: fmt.Sprintf("writer %d record %d appears twice in a row", w, n)})
	default:
		k.damage(Damage{Kind: Reordered, Writer: w, Detail: fmt.Sprintf("writer %d record %d comes after its record %d", w, n, want-1)})
	}
}

// observeSmall checks the order of a small record: r is its counter
// modulo m.
func (k *checker) observeSmall(w int, r uint64, off int64) {
	m := uint64(k.c.mod)
	want := k.next[w] % m
	switch {
	case r == want || m == 1:
		k.next[w]++
	case (r+1)%m == want:
		// One behind: the previous record again, or one that belonged
		// before it. Keep waiting for the record that is due.
		k.damage(Damage{Kind: Reordered, Writer: w, Detail: fmt.Sprintf("writer %d: record ≡ %d (mod %d) repeats or comes back where ≡ %d was due", w, r, m, want)})
	default:
		gap := (r + m - want) % m
		k.damage(Damage{Kind: Missing, Writer: w, Detail: fmt.Sprintf("writer %d: record ≡ %d (mod %d) where ≡ %d was due: %d %s missing or out of order", w, r, m, want, gap, plural(int(gap), "record", "records"))})
		// Resynchronize on the record found, so that one problem is
		// reported once.
		k.next[w] += gap + 1
	}
}

// finish checks the counts and returns the verification.
func (k *checker) finish() *Verification {
	for w := range k.expect {
		switch got, want := k.seen[w], k.expect[w]; {
		case got < want:
			k.damage(Damage{Kind: Missing, Offset: -1, Writer: w, Detail: fmt.Sprintf("writer %d: %d of its %d records found", w, got, want)})
		case got > want:
			k.damage(Damage{Kind: Extra, Offset: -1, Writer: w, Detail: fmt.Sprintf("writer %d: %d records found, it wrote %d", w, got, want)})
		}
	}
	if k.v.Intact < k.v.Expected {
		k.v.Lost = k.v.Expected - k.v.Intact
	}
	return k.v
}

// VerifyFile checks a file of fixed-size records of size bytes written by
// len(expect) writers, writer w having written expect[w] records (see the
// package doc for what is checked at each size). Damage is reported in the
// Verification; the error is for a file that cannot be read or arguments
// that make no sense.
func VerifyFile(path string, size int, expect []uint64) (*Verification, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer f.Close()
	return VerifyReader(f, path, size, expect)
}

// VerifyReader is VerifyFile reading from r; name is used in messages.
func VerifyReader(r io.Reader, name string, size int, expect []uint64) (*Verification, error) {
	c, err := newCodec(size, len(expect))
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", name, err)
	}
	k, err := newChecker(c, name, expect)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, max(1, (1<<20)/size)*size)
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		for i := 0; i+size <= n; i += size {
			k.observe(buf[i:i+size], off, 0)
			off += int64(size)
		}
		if rest := n % size; rest > 0 {
			k.off = off
			k.damage(Damage{Kind: Torn, Writer: -1, Detail: fmt.Sprintf("the file ends with %d bytes of a %d-byte record", rest, size)})
			off += int64(rest)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("verify %s at byte %d: %w", name, off, err)
		}
	}
	k.v.Bytes = off
	return k.finish(), nil
}

// VerifyWAL checks the wal in dir: every frame through wal.OpenReader
// (checksums, sequence numbers 1, 2, ... with no gap, no torn tail), then
// every payload as a record of size bytes, as VerifyFile does. Its Damage
// locates records by sequence number (Damage.Seq).
func VerifyWAL(ctx context.Context, dir string, size int, expect []uint64) (*Verification, error) {
	c, err := newCodec(size, len(expect))
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	k, err := newChecker(c, dir, expect)
	if err != nil {
		return nil, err
	}
	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		if wal.IsCorrupt(err) {
			k.damage(Damage{Kind: Foreign, Offset: -1, Writer: -1, Detail: err.Error()})
			return k.finish(), nil
		}
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	defer r.Close()
	want := uint64(1)
	for i := 0; r.Next(); i++ {
		if i&0xffff == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("verify %s: %w", dir, ctx.Err())
		}
		if s := r.Seq(); s != want {
			k.damage(Damage{Kind: Missing, Offset: -1, Seq: s, Writer: -1, Detail: fmt.Sprintf("sequence number %d where %d was due", s, want)})
			want = s
		}
		want++
		p := r.Record()
		k.v.Bytes += int64(len(p))
		k.observe(p, -1, r.Seq())
	}
	if err := r.Err(); err != nil {
		var ce *wal.CorruptionError
		if !errors.As(err, &ce) {
			return nil, fmt.Errorf("verify %s after seq %d: %w", dir, want-1, err)
		}
		k.damage(Damage{Kind: Foreign, Offset: -1, Writer: -1, Detail: strings.TrimPrefix(err.Error(), "wal: ")})
	}
	if t := r.Torn(); t != nil {
		k.damage(Damage{Kind: Torn, Offset: -1, Writer: -1, Detail: fmt.Sprintf("torn tail: %d bytes at byte %d of %s after a clean Close", t.Bytes, t.Offset, t.Segment)})
	}
	return k.finish(), nil
}
