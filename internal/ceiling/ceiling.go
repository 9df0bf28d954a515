// Package ceiling measures the most a disk gives a writer: large sequential
// writes, one in flight, with nothing else to do. Both the writer
// benchmarks and appendlog bench compare strategies with it.
//
// A writer of logs writes new bytes, and on some machines (the test VM is
// one) new bytes are slower to write than old ones: the same loop of
// aligned 4 MiB O_DIRECT writes from huge pages takes longer per write when
// the other half of a double buffer is refilled while each write runs than
// when the buffer was filled once, up front (the device reads memory the
// CPU has just written more slowly). No writer of new bytes can reach the
// second loop's figure, so the ceiling the strategies are held to is the
// first: [Fresh], the best pipelined writer there can be, whose only work
// besides the writes is the copy any writer makes. [Reused] measures the
// loop over one buffer, so the difference stays visible: writer's
// BenchmarkFileLarge runs both (w=ceiling-direct/bytes=fresh and
// bytes=reused), and BENCHMARKS.md has the figures.
package ceiling

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/appendlog/appendlog/internal/sys"
)

// Mode says where the bytes of each write come from.
type Mode int

const (
	// Fresh writes from a double buffer: while one half is written, a
	// second goroutine refills the other with the next write's bytes, in
	// 4 KiB copies as producers fill a ring.
	Fresh Mode = iota
	// Reused writes the same buffer, filled once, every time.
	Reused
)

func (m Mode) String() string {
	if m == Reused {
		return "reused"
	}
	return "fresh"
}

// piece is the unit of the refill copy and of the pattern: every piece
// starts with its 8-byte stamp (its file offset for Fresh, its offset in the
// write for Reused), then the template.
const piece = 4096

var template = func() []byte {
	t := make([]byte, piece)
	for i := range t {
		t[i] = byte(i*131 + i>>8 + 7)
	}
	return t
}()

// fillAt fills b with the bytes Write puts at file offset off (b starts a
// write). REQUIRES: len(b) is a multiple of piece.
func fillAt(b []byte, off int64, m Mode) {
	if m == Reused {
		off = 0
	}
	for i := 0; i < len(b); i += piece {
		p := b[i : i+piece]
		copy(p, template)
		binary.LittleEndian.PutUint64(p, uint64(off)+uint64(i))
	}
}

// Create creates a new file at path for Write: opened with O_DIRECT when
// direct, for writing only, failing if the file exists.
func Create(path string, direct bool) (*os.File, error) {
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if direct {
		return sys.OpenDirect(path, flag, 0o644)
	}
	return os.OpenFile(path, flag, 0o644)
}

// Write writes n bytes to f from offset 0 in writes of size bytes (the last
// may be shorter) and returns when the last write has returned; the caller
// times it, and syncs if its figure is to include durability. The buffers
// come from sys.HugeBuffer, so an O_DIRECT f works when n is a multiple of
// sys.BlockSize. size must be a positive multiple of 4 KiB.
func Write(f *os.File, n int64, size int, m Mode) (err error) {
	if size <= 0 || size%piece != 0 || n < 0 {
		return fmt.Errorf("ceiling: bad write size %d or length %d", size, n)
	}
	buf, release, err := sys.HugeBuffer(2 * size)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, release()) }()
	cur, next := buf[:size], buf[size:]
	fillAt(cur, 0, m)
	var wg sync.WaitGroup
	for off := int64(0); off < n; off += int64(size) {
		w := int(min(int64(size), n-off))
		if m == Fresh && off+int64(size) < n {
			nextOff := off + int64(size)
			wg.Go(func() { fillAt(next, nextOff, m) })
		}
		_, err := f.WriteAt(cur[:w], off)
		wg.Wait()
		if err != nil {
			return fmt.Errorf("ceiling: write %s at offset %d: %w", f.Name(), off, err)
		}
		if m == Fresh {
			cur, next = next, cur
		}
	}
	return nil
}

// Check checks that the file at path is n bytes long and that its first,
// middle and last writes hold what Write wrote, so that a write path that
// writes nothing cannot pass for a fast one.
func Check(path string, n int64, size int, m Mode) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != n {
		return fmt.Errorf("ceiling: %s: %d bytes after writing %d", path, fi.Size(), n)
	}
	if n == 0 {
		return nil
	}
	got := make([]byte, size)
	want := make([]byte, size)
	writes := (n + int64(size) - 1) / int64(size)
	for _, i := range []int64{0, writes / 2, writes - 1} {
		off := i * int64(size)
		w := int(min(int64(size), n-off))
		if _, err := f.ReadAt(got[:w], off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		fillAt(want, off, m)
		if !bytes.Equal(got[:w], want[:w]) {
			return fmt.Errorf("ceiling: %s: the %d bytes at offset %d are not what was written", path, w, off)
		}
	}
	return nil
}
