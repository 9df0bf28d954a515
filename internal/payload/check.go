package payload

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// MaxProblems bounds the problems a Result keeps; Result.ProblemCount counts
// them all.
const MaxProblems = 16

// _maxLine bounds a line a Checker buffers while splitting a text stream.
const _maxLine = 64 << 20

// Options configure a Checker. The zero Options check records of any size
// and any writer, each writer's counters 0, 1, 2, ... and no totals.
type Options struct {
	// Size, if not 0, is the size of every record: a record of another size
	// is torn, and Write splits the stream into records of Size bytes.
	// Below MinSize, records use the tag encoding (see Tags), which needs
	// Writers or Expect. With Size 0, any size from MinSize up is a
	// record, and Write splits the stream into lines.
	Size int
	// Writers, if not 0, is the number of writers: a record naming writer
	// Writers or above is foreign. 0 means len(Expect), or any writer id.
	Writers int
	// Expect, if not nil, holds how many records each writer wrote (so
	// len(Expect) writers ran). In strict order, Finish reports each
	// writer whose intact records do not add up to its count; with Gaps, a
	// counter at or past its count is Extra.
	Expect []uint64
	// Gaps accepts counters that only increase, for writers that may drop
	// records. Without it, a writer's counters are 0, 1, 2, ... exactly.
	Gaps bool
	// Restarts accepts a writer's counter falling back to 0 as the same
	// writer id starting over (a load run again on the same log).
	Restarts bool
}

// Result is what a Checker found.
type Result struct {
	// Records counts the records checked, whole or not.
	Records int64
	// Intact counts records that decoded and checked out, wherever they
	// were; Lost is Expected minus Intact, or 0.
	Intact, Lost uint64
	// Expected is the sum of Options.Expect.
	Expected uint64
	// Bytes counts the bytes given to Write.
	Bytes int64
	// PerWriter holds the intact records of each writer id seen (or of
	// each expected writer), indexed by writer id.
	PerWriter []uint64
	// Writers counts the distinct writers seen.
	Writers int
	// Restarts counts the counters that fell back to 0 (Options.Restarts).
	Restarts int
	// Problems holds the first MaxProblems problems, ProblemCount counts
	// all.
	Problems     []Problem
	ProblemCount int
}

// OK reports whether the records are exactly what the writers wrote: no
// problem, and when counts were expected, all of them intact.
func (r *Result) OK() bool {
	return r.ProblemCount == 0 && r.Lost == 0 && (r.Expected == 0 || r.Intact == r.Expected)
}

// Err returns nil if OK, or an error naming the first problem, how many
// more there were, and how many records were intact.
func (r *Result) Err() error {
	if r.OK() {
		return nil
	}
	if r.ProblemCount == 0 {
		return fmt.Errorf("%d of %d records intact", r.Intact, r.Expected)
	}
	more := ""
	if r.ProblemCount > 1 {
		more = fmt.Sprintf(" (and %d more problems)", r.ProblemCount-1)
	}
	if r.Expected == 0 {
		return fmt.Errorf("%v%s; %d records intact", r.Problems[0], more, r.Intact)
	}
	return fmt.Errorf("%v%s; %d of %d records intact", r.Problems[0], more, r.Intact, r.Expected)
}

// A Checker follows the records of one output in order: it checks each
// record (Decode, or Tags.Decode for tiny records), each writer's counter
// order and, at Finish, the counts. Feed it records with Check, or a byte
// stream with Write. Not safe for concurrent use.
type Checker struct {
	o     Options
	tags  Tags // Size < MinSize
	limit int  // writer ids below limit are known
	ws    []writerState
	res   Result
	// gapped is set by Gap: a writer first seen after it may start at
	// any counter.
	gapped bool

	// Stream splitting (Write).
	carry []byte
	off   int64 // stream offset of carry[0]
}

type writerState struct {
	next    uint64 // the counter due next (strict), or the lowest allowed (Gaps)
	seen    uint64 // intact records
	started bool
	jump    bool // the next record may skip forward (Gap)
	// due is the record due next, counter next, when records have a fixed
	// size: a record equal to it is intact and in order, with no parsing.
	// nil until the writer's first record, and when next is past
	// MaxCounter.
	due []byte
}

// NewChecker returns a Checker for o. The error names an option that makes
// no sense.
func NewChecker(o Options) (*Checker, error) {
	k := &Checker{o: o, limit: MaxWriters}
	switch {
	case o.Size < 0 || o.Size > 1<<30:
		return nil, fmt.Errorf("%w: %d", ErrSize, o.Size)
	case o.Writers < 0 || o.Writers > MaxWriters || len(o.Expect) > MaxWriters:
		return nil, fmt.Errorf("%w: %d writers, %d counts", ErrWriters, o.Writers, len(o.Expect))
	case o.Writers > 0 && o.Expect != nil && len(o.Expect) != o.Writers:
		return nil, fmt.Errorf("%w: %d writers but %d counts", ErrWriters, o.Writers, len(o.Expect))
	}
	if o.Expect != nil {
		k.limit = len(o.Expect)
	}
	if o.Writers > 0 {
		k.limit = o.Writers
	}
	for _, n := range o.Expect {
		if n > MaxCounter+1 {
			return nil, fmt.Errorf("%w: %d records for one writer, the counter holds %d", ErrCounter, n, uint64(MaxCounter)+1)
		}
		k.res.Expected += n
	}
	if o.Size > 0 && o.Size < MinSize {
		if k.limit == MaxWriters {
			return nil, fmt.Errorf("%w: %d-byte records need the number of writers", ErrWriters, o.Size)
		}
		t, err := NewTags(k.limit)
		if err != nil {
			return nil, err
		}
		k.tags = t
	}
	if k.limit < MaxWriters || o.Expect != nil {
		k.ws = make([]writerState, k.limit)
	}
	if o.Size > 0 {
		k.carry = make([]byte, 0, o.Size)
	}
	return k, nil
}

// Check checks p, one whole record found at byte offset off of its file or
// stream (-1 if unknown) or with sequence number seq in a log (0 if none).
// It returns the problem p has, or nil; every problem also goes into the
// Result. It does not allocate for a record that checks out.
func (k *Checker) Check(p []byte, off int64, seq uint64) *Problem {
	if k.o.Size >= MinSize && len(p) == k.o.Size {
		if w, ok := writerOf(p); ok && w < len(k.ws) {
			if s := &k.ws[w]; s.due != nil && bytes.Equal(p, s.due) && (k.o.Expect == nil || s.next < k.o.Expect[w]) {
				k.res.Records++
				k.res.Intact++
				s.seen++
				s.next++
				s.jump = false
				k.advance(s, w)
				return nil
			}
		}
	}
	idx := k.res.Records
	k.res.Records++
	var (
		w   int
		c   uint64
		err error
	)
	switch {
	case k.tags.mod > 0:
		w, c, err = k.tags.Decode(p)
		if err == nil && len(p) != k.o.Size {
			err = damaged(Torn, -1, w, "record of %d bytes, want %d", len(p), k.o.Size)
		}
	default:
		w, c, err = Decode(p)
		if err == nil && k.o.Size > 0 && len(p) != k.o.Size {
			err = damaged(Torn, -1, w, "writer %d counter %d: record of %d bytes, want %d", w, c, len(p), k.o.Size)
		}
		if err == nil && w >= k.limit {
			err = damaged(Foreign, 0, -1, "writer id %d, but only %d writers ran", w, k.limit)
		}
	}
	if err != nil {
		pr, ok := err.(*Problem)
		if !ok {
			pr = damaged(Foreign, -1, -1, "%v", err)
		}
		pr.Record, pr.Offset, pr.Seq = idx, off, seq
		return k.add(*pr)
	}
	if w >= len(k.ws) {
		k.ws = append(k.ws, make([]writerState, w+1-len(k.ws))...)
	}
	s := &k.ws[w]
	if !s.started {
		s.started = true
		s.jump = k.gapped
		k.res.Writers++
	}
	s.seen++
	k.res.Intact++
	if k.tags.mod > 0 {
		return k.orderTag(s, Problem{Record: idx, Offset: off, Seq: seq, Byte: -1, Writer: w}, c)
	}
	if s.jump {
		s.jump = false
		if c > s.next {
			s.next = c
		}
	}
	switch want := s.next; {
	case c == want || k.o.Gaps && c > want:
		if k.o.Expect != nil && c >= k.o.Expect[w] {
			break
		}
		s.next = c + 1
		k.redo(s, w)
		return nil
	case c == 0 && k.o.Restarts:
		k.res.Restarts++
		s.next = 1
		k.redo(s, w)
		return nil
	}
	pr := k.order(s, Problem{Record: idx, Offset: off, Seq: seq, Byte: -1, Writer: w}, c)
	k.redo(s, w)
	return pr
}

// writerOf returns the writer a record names, without checking the rest.
func writerOf(p []byte) (int, bool) {
	v, ok := unhex8(0x30303030 | uint64(binary.LittleEndian.Uint32(p[0:4]))<<32)
	return int(v), ok
}

// redo rebuilds the record due next from writer w, whose state is s, after
// a record that was not the one due.
func (k *Checker) redo(s *writerState, w int) {
	if k.o.Size < MinSize {
		return
	}
	if s.next > MaxCounter {
		s.due = nil
		return
	}
	if s.due == nil {
		s.due = make([]byte, k.o.Size)
	}
	_ = Encode(s.due, w, s.next) // w and s.next are in range
}

// advance turns s.due into the record of counter s.next, one past its
// own, by counting up its counter digits.
func (k *Checker) advance(s *writerState, w int) {
	d := s.due
	for i := 16; ; i-- {
		if i < 5 {
			k.redo(s, w) // past MaxCounter
			return
		}
		switch d[i] {
		case '9':
			d[i] = 'a'
		case 'f':
			d[i] = '0'
			continue
		default:
			d[i]++
		}
		break
	}
	n := len(d)
	binary.LittleEndian.PutUint64(d[n-9:n-1], hex8(check(uint32(w), s.next, n)))
}

// order reports what is wrong with counter c of the writer whose state is
// s, which is not the counter due.
func (k *Checker) order(s *writerState, at Problem, c uint64) *Problem {
	w := at.Writer
	want := s.next
	switch {
	case k.o.Expect != nil && c >= k.o.Expect[w]:
		at.Kind, at.Detail = Extra, fmt.Sprintf("writer %d counter %d, but it wrote counters 0..%d", w, c, int64(k.o.Expect[w])-1)
	case c > want:
		what := fmt.Sprintf("counters %d..%d", want, c-1)
		if c-1 == want {
			what = fmt.Sprintf("counter %d", want)
		}
		at.Kind, at.Detail = Missing, fmt.Sprintf("writer %d: %s missing before counter %d", w, what, c)
		s.next = c + 1
	case c+1 == want:
		at.Kind, at.Detail = Duplicate, fmt.Sprintf("writer %d counter %d appears twice in a row", w, c)
	default:
		at.Kind, at.Detail = Reordered, fmt.Sprintf("writer %d counter %d comes after its counter %d", w, c, want-1)
	}
	return k.add(at)
}

// orderTag checks a tiny record: r is its counter modulo m.
func (k *Checker) orderTag(s *writerState, at Problem, r uint64) *Problem {
	w := at.Writer
	m := uint64(k.tags.mod)
	want := s.next % m
	switch {
	case r == want || m == 1:
		s.next++
		return nil
	case (r+1)%m == want:
		// One behind: the previous record again, or one that belonged
		// before it. Keep waiting for the record that is due.
		at.Kind, at.Detail = Reordered, fmt.Sprintf("writer %d: record ≡ %d (mod %d) repeats or comes back where ≡ %d was due", w, r, m, want)
	default:
		gap := (r + m - want) % m
		unit := "records"
		if gap == 1 {
			unit = "record"
		}
		at.Kind, at.Detail = Missing, fmt.Sprintf("writer %d: record ≡ %d (mod %d) where ≡ %d was due: %d %s missing or out of order", w, r, m, want, gap, unit)
		// Resynchronize on the record found, so that one problem is
		// reported once.
		s.next += gap + 1
	}
	return k.add(at)
}

// add records pr and returns it.
func (k *Checker) add(pr Problem) *Problem {
	k.res.ProblemCount++
	if len(k.res.Problems) < MaxProblems {
		k.res.Problems = append(k.res.Problems, pr)
	}
	return &pr
}

// Report records a problem the caller found around the records, such as
// a gap in a log's sequence numbers or a torn frame: kind, where and what.
// It returns the problem as recorded.
func (k *Checker) Report(kind Kind, off int64, seq uint64, detail string) *Problem {
	return k.add(Problem{Kind: kind, Record: -1, Offset: off, Seq: seq, Byte: -1, Writer: -1, Detail: detail})
}

// Gap tells the checker that records may be missing here (a recorded gap
// in a log): each writer's next record may skip forward over them, and a
// writer first seen after a gap may start at any counter. Tiny records
// (tags) ignore it.
func (k *Checker) Gap() {
	k.gapped = true
	for i := range k.ws {
		if k.ws[i].started {
			k.ws[i].jump = true
		}
	}
}

// Write splits a byte stream into records and checks each: records of
// Options.Size bytes, or with Size 0, lines ending in '\n' (the newline
// belongs to the record). A record may be split across calls. Offsets count
// from the first byte written. Write never fails: problems go into the
// Result, and a partial record at the end is reported by Finish.
func (k *Checker) Write(p []byte) (int, error) {
	n := len(p)
	k.res.Bytes += int64(n)
	if k.o.Size > 0 {
		k.writeFixed(p)
	} else {
		k.writeLines(p)
	}
	return n, nil
}

func (k *Checker) writeFixed(p []byte) {
	size := k.o.Size
	if len(k.carry) > 0 {
		m := copy(k.carry[len(k.carry):size], p)
		k.carry = k.carry[:len(k.carry)+m]
		p = p[m:]
		if len(k.carry) < size {
			return
		}
		k.Check(k.carry, k.off, 0)
		k.off += int64(size)
		k.carry = k.carry[:0]
	}
	for len(p) >= size {
		k.Check(p[:size], k.off, 0)
		k.off += int64(size)
		p = p[size:]
	}
	k.carry = append(k.carry, p...)
}

func (k *Checker) writeLines(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(k.carry)+len(p) > _maxLine {
				k.Report(Foreign, k.off, 0, fmt.Sprintf("no newline in %d bytes", len(k.carry)+len(p)))
				k.off += int64(len(k.carry) + len(p))
				k.carry = k.carry[:0]
				return
			}
			k.carry = append(k.carry, p...)
			return
		}
		line := p[:i+1]
		if len(k.carry) > 0 {
			k.carry = append(k.carry, line...)
			line = k.carry
		}
		k.Check(line, k.off, 0)
		k.off += int64(len(line))
		k.carry = k.carry[:0]
		p = p[i+1:]
	}
}

// Finish reports a partial record left by Write as torn, checks the
// per-writer counts against Options.Expect (strict order only) and returns
// the Result. Call it once, after the last record.
func (k *Checker) Finish() *Result {
	if n := len(k.carry); n > 0 {
		detail := fmt.Sprintf("the stream ends with %d bytes of a %d-byte record", n, k.o.Size)
		if k.o.Size == 0 {
			detail = fmt.Sprintf("the stream ends with %d bytes and no newline", n)
		}
		k.res.Records++
		k.Report(Torn, k.off, 0, detail)
		k.off += int64(n)
		k.carry = k.carry[:0]
	}
	if k.o.Expect != nil && !k.o.Gaps {
		for w, want := range k.o.Expect {
			switch got := k.ws[w].seen; {
			case got < want:
				k.add(Problem{Kind: Missing, Record: -1, Offset: -1, Byte: -1, Writer: w, Detail: fmt.Sprintf("writer %d: %d of its %d records found", w, got, want)})
			case got > want:
				k.add(Problem{Kind: Extra, Record: -1, Offset: -1, Byte: -1, Writer: w, Detail: fmt.Sprintf("writer %d: %d records found, it wrote %d", w, got, want)})
			}
		}
	}
	if k.res.Intact < k.res.Expected {
		k.res.Lost = k.res.Expected - k.res.Intact
	}
	k.res.PerWriter = make([]uint64, len(k.ws))
	for w := range k.ws {
		k.res.PerWriter[w] = k.ws[w].seen
	}
	return &k.res
}

// Next returns the counter due next from writer w in strict order (one
// past the last in order), or the lowest it may send next with Gaps.
func (k *Checker) Next(w int) uint64 {
	if w < 0 || w >= len(k.ws) {
		return 0
	}
	return k.ws[w].next
}
