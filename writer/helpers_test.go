package writer

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// tcpSink is a loopback TCP connection whose far end collects everything.
type tcpSink struct {
	conn net.Conn
	ln   net.Listener
	done chan struct{}
	buf  bytes.Buffer
}

func newTCPSink(t testing.TB) *tcpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpSink{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(&s.buf, c)
		c.Close()
	}()
	s.conn, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		<-s.done
		t.Fatal(err)
	}
	return s
}

// output closes the client end and returns what the server received.
func (s *tcpSink) output() []byte {
	s.conn.Close()
	<-s.done
	s.ln.Close()
	return s.buf.Bytes()
}

// openAppend opens a fresh file in t's temp dir with O_APPEND.
func openAppend(t testing.TB, name string) *os.File {
	t.Helper()
	f, err := appendFile(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// appendFile opens (creating if needed) the file at path with O_APPEND.
func appendFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fileOutput returns an output func that closes f and reads it back.
func fileOutput(t testing.TB, f *os.File) func() []byte {
	return func() []byte {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		return readFile(t, f.Name())
	}
}

// openRingFile opens a Ring on a new file; ok is false when O_DIRECT is
// wanted but unsupported here.
func openRingFile(t testing.TB, opts *RingOptions) (*Ring, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ring.log")
	r, err := OpenFile(path, opts)
	if errors.Is(err, ErrDirectUnsupported) {
		t.Skipf("O_DIRECT unsupported: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, path
}

// collectWriter collects writes in memory, optionally slowly or failing
// according to fail (called with the 1-based call number; it returns how
// many bytes to accept and an error).
type collectWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	calls int
	fail  func(call, n int) (int, error)
}

func (c *collectWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.fail != nil {
		if n, err := c.fail(c.calls, len(p)); err != nil {
			c.buf.Write(p[:n])
			return n, err
		}
	}
	return c.buf.Write(p)
}

func (c *collectWriter) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// mustWrite writes p through w as one record and fails the test on an
// error or a short count.
func mustWrite(t testing.TB, w io.Writer, p []byte) {
	t.Helper()
	if n, err := w.Write(p); err != nil || n != len(p) {
		t.Fatalf("write %q: %d, %v", p, n, err)
	}
}

// closeAtEnd closes c when the test ends and fails it on an error.
func closeAtEnd(t testing.TB, c io.Closer) {
	t.Helper()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}
