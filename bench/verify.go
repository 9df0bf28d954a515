package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/wal"
)

// DamageKind says what is wrong with the bytes at some place in a file.
type DamageKind = payload.Kind

// Kinds of damage the verifier reports.
const (
	// Torn is a record whose bytes are not all its own: a partial record
	// at the end of the file, or one cut short.
	Torn = payload.Torn
	// Foreign is bytes that are no record at all: zeros, garbage, or a
	// record of a writer that did not run.
	Foreign = payload.Foreign
	// Checksum is a record whose check does not match its head: a damaged
	// head or check, or a record spliced from two.
	Checksum = payload.Checksum
	// Filler is a record with a wrong filler byte.
	Filler = payload.Filler
	// Missing is a record that was written but is not in the file.
	Missing = payload.Missing
	// Reordered is a record that comes before a record its writer wrote
	// earlier.
	Reordered = payload.Reordered
	// Duplicate is a record found more than once.
	Duplicate = payload.Duplicate
	// Extra is a record numbered past the last one its writer wrote.
	Extra = payload.Extra
)

// Damage is one problem the verifier found: what (Kind, Detail) and where
// (Offset, the byte offset of the record in the file, or -1 for a wal and
// when the damage has no place; Seq, the sequence number of the record in
// a wal, or 0; Record, the index of the record; Byte, the first wrong byte
// in it).
type Damage = payload.Problem

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

// newChecker returns the checker of records of size bytes by len(expect)
// writers, writer w having written expect[w] records, in order.
func newChecker(name string, size int, expect []uint64) (*codec, *payload.Checker, error) {
	c, err := newCodec(size, len(expect))
	if err != nil {
		return nil, nil, fmt.Errorf("verify %s: %w", name, err)
	}
	k, err := payload.NewChecker(payload.Options{Size: size, Expect: expect})
	if err != nil {
		return nil, nil, fmt.Errorf("verify %s: %w", name, err)
	}
	return c, k, nil
}

func verification(name string, c *codec, r *payload.Result) *Verification {
	return &Verification{
		Path: name, Expected: r.Expected, Intact: r.Intact, Lost: r.Lost, Bytes: r.Bytes,
		Damage: r.Problems, DamageCount: r.ProblemCount, Checked: c.describe(),
	}
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
	c, k, err := newChecker(name, size, expect)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, max(1, (1<<20)/size)*size)
	// The checker's Write never fails; the wrappers keep io.CopyBuffer
	// from using the reader's WriteTo or the checker's ReadFrom.
	if _, err := io.CopyBuffer(struct{ io.Writer }{k}, struct{ io.Reader }{r}, buf); err != nil {
		return nil, fmt.Errorf("verify %s at byte %d: %w", name, k.Finish().Bytes, err)
	}
	return verification(name, c, k.Finish()), nil
}

// VerifyWAL checks the wal in dir: every frame through wal.OpenReader
// (checksums, sequence numbers 1, 2, ... with no gap, no torn tail), then
// every payload as a record of size bytes, as VerifyFile does. Its Damage
// locates records by sequence number (Damage.Seq).
func VerifyWAL(ctx context.Context, dir string, size int, expect []uint64) (*Verification, error) {
	c, k, err := newChecker(dir, size, expect)
	if err != nil {
		return nil, err
	}
	var bytes int64
	done := func() *Verification {
		v := verification(dir, c, k.Finish())
		v.Bytes = bytes
		return v
	}
	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		if wal.IsCorrupt(err) {
			k.Report(Foreign, -1, 0, err.Error())
			return done(), nil
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
			k.Report(Missing, -1, s, fmt.Sprintf("sequence number %d where %d was due", s, want))
			want = s
		}
		want++
		p := r.Record()
		bytes += int64(len(p))
		k.Check(p, -1, r.Seq())
	}
	if err := r.Err(); err != nil {
		var ce *wal.CorruptionError
		if !errors.As(err, &ce) {
			return nil, fmt.Errorf("verify %s after seq %d: %w", dir, want-1, err)
		}
		k.Report(Foreign, -1, 0, strings.TrimPrefix(err.Error(), "wal: "))
	}
	if t := r.Torn(); t != nil {
		k.Report(Torn, -1, 0, fmt.Sprintf("torn tail: %d bytes at byte %d of %s after a clean Close", t.Bytes, t.Offset, t.Segment))
	}
	return done(), nil
}
