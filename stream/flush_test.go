package stream

import (
	"context"
	"testing"
	"time"
)

// TestStreamFlush: Flush returns once every record published before it was
// handed to the OS (the log's Written counter covers them all), and a nil
// ctx is an error, not a panic.
func TestStreamFlush(t *testing.T) {
	st, err := Open(t.TempDir(), &Options{IdleTimeout: -1})
	noErr(t, err)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	for range 10 {
		_, err := s.Publish([]byte("record"))
		noErr(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	noErr(t, s.Flush(ctx))
	// Each record is its 6-byte payload in a frame of at least 16 bytes.
	if got := s.Stats().Log.Written; got < 10*(16+6) {
		t.Fatalf("after Flush the log wrote %d bytes, want the 10 records' frames", got)
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if err := s.Flush(nil); err == nil {
		t.Fatal("Flush(nil) returned nil")
	}
}
