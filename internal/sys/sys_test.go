package sys

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestWritevAllShortWrites drives the Pwritev loop with a fake pwritev that
// writes at most a few bytes per call, to check that short writes continue
// exactly where they stopped and that vectors respect IOV_MAX.
func TestWritevAllShortWrites(t *testing.T) {
	var bufs [][]byte
	var want []byte
	for i := range 2500 {
		b := bytes.Repeat([]byte{byte(i)}, i%5) // i%5 == 0 gives empty buffers
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	for _, limit := range []int{1, 3, 7, 1000, 1 << 20} {
		var got []byte
		calls := 0
		n, err := writevAll(bufs, 10, func(vec [][]byte, off int64) (int, error) {
			calls++
			if len(vec) > _maxIov {
				t.Fatalf("vector of %d buffers", len(vec))
			}
			if off != int64(10+len(got)) {
				t.Fatalf("offset %d, want %d", off, 10+len(got))
			}
			w := 0
			for _, b := range vec {
				if len(b) == 0 {
					t.Fatal("empty buffer passed")
				}
				k := min(len(b), limit-w)
				got = append(got, b[:k]...)
				w += k
				if w == limit {
					break
				}
			}
			return w, nil
		})
		if err != nil || n != len(want) || !bytes.Equal(got, want) {
			t.Fatalf("limit %d: n=%d err=%v equal=%v", limit, n, err, bytes.Equal(got, want))
		}
		if limit == 1<<20 && calls != 2 { // 2000 non-empty buffers: 1024 + 976
			t.Fatalf("limit %d: %d calls, want 2", limit, calls)
		}
	}
}

func TestWritevAllError(t *testing.T) {
	bufs := [][]byte{[]byte("abcd"), []byte("efgh")}
	boom := errors.New("boom")
	n, err := writevAll(bufs, 0, func(vec [][]byte, off int64) (int, error) { return 5, boom })
	if n != 5 || err != boom {
		t.Fatalf("n=%d err=%v", n, err)
	}
	n, err = writevAll(bufs, 0, func(vec [][]byte, off int64) (int, error) { return 0, nil })
	if n != 0 || err != io.ErrShortWrite {
		t.Fatalf("no progress: n=%d err=%v", n, err)
	}
}

func TestAdviceString(t *testing.T) {
	if AdviceDontNeed.String() != "dontneed" || Advice(0).String() != "invalid" {
		t.Fatal("Advice.String")
	}
}
