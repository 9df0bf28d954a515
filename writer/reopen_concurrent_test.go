package writer

import (
	"bytes"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReopens: Reopen, like every method, may be called from
// several goroutines at once (a SIGHUP handler and an admin endpoint). A
// Reopen whose own switch was made must not fail because another one's
// request came meanwhile: it returned "reopen at X, written to Y", taking
// the other request, whose bytes were not all written yet, for its own.
// Every record written ends up in the file, whole.
func TestConcurrentReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	r, err := OpenFile(path, &RingOptions{Size: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	line := []byte("a line of text for the log\n")
	var written atomic.Int64
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for range 200_000 { // a bound on the file, however slow the Reopens
			select {
			case <-stop:
				return
			default:
			}
			mustWrite(t, r, line)
			written.Add(1)
		}
	})
	var reopeners sync.WaitGroup
	for range 4 {
		reopeners.Go(func() {
			for range 300 {
				if err := r.Reopen(); err != nil {
					t.Errorf("Reopen = %v", err)
					return
				}
			}
		})
	}
	reopeners.Wait()
	close(stop)
	writer.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !bytes.Equal(got, bytes.Repeat(line, int(written.Load()))) {
		t.Errorf("the file holds %d bytes, want %d lines of %d", len(got), written.Load(), len(line))
	}
}
