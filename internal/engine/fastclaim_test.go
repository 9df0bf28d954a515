package engine

import (
	"context"
	"errors"
	"testing"
)

// TestFastClaimRefuses: FastClaim reserves nothing (the tail stays where it
// was) when n is out of range, the ring is full, the engine is closed or
// failed; Claim then says why.
func TestFastClaimRefuses(t *testing.T) {
	refuses := func(t *testing.T, e *Engine, n int) {
		t.Helper()
		pos, seq := e.Tail()
		if c, ok := e.FastClaim(n); ok || c != (Claim{}) {
			t.Fatalf("FastClaim(%d) = %+v, %v; want a refusal", n, c, ok)
		}
		if p, s := e.Tail(); p != pos || s != seq {
			t.Fatalf("FastClaim(%d) refused but moved the tail from %d/%d to %d/%d", n, pos, seq, p, s)
		}
	}
	t.Run("range", func(t *testing.T) {
		e, err := New(Config{Size: MinSize}, &memSink{t: t})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for _, n := range []int{0, -1, e.MaxClaim() + 1} {
			refuses(t, e, n)
		}
		c, ok := e.FastClaim(e.MaxClaim())
		if !ok || c.Pos != 0 || c.Seq != 0 || c.Len() != e.MaxClaim() {
			t.Fatalf("FastClaim(MaxClaim) = %+v, %v", c, ok)
		}
		e.Put(c, 0, make([]byte, c.Len()))
		e.Commit(c)
	})
	t.Run("full", func(t *testing.T) {
		e, err := New(Config{Size: MinSize, BlockSize: 1024}, &memSink{t: t})
		if err != nil {
			t.Fatal(err)
		}
		// Claims not yet committed hold the whole ring.
		var held []Claim
		for range MinSize / 1024 {
			c, ok := e.FastClaim(1024)
			if !ok {
				t.Fatalf("FastClaim(1024) refused with %d bytes claimed", len(held)*1024)
			}
			held = append(held, c)
		}
		refuses(t, e, 1)
		if _, ok, err := e.TryClaim(1, 1); ok || err != nil {
			t.Fatalf("TryClaim on a full ring: %v, %v", ok, err)
		}
		for _, c := range held {
			e.Put(c, 0, make([]byte, c.Len()))
			e.Commit(c)
		}
		if err := e.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var c Claim
		waitUntil(t, e, "space released", func() bool {
			var ok bool
			c, ok = e.FastClaim(1)
			return ok
		})
		e.Put(c, 0, []byte{1})
		e.Commit(c)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		e, err := New(Config{Size: MinSize}, &memSink{t: t})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		refuses(t, e, 10)
		if _, err := e.Claim(10, 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("Claim after Close: %v", err)
		}
	})
	t.Run("failed", func(t *testing.T) {
		sink := &memSink{t: t, writeErr: errors.New("EIO")}
		e, err := New(Config{Size: MinSize}, sink)
		if err != nil {
			t.Fatal(err)
		}
		commitN(t, e, 10)
		if err := e.Flush(context.Background()); err == nil {
			t.Fatal("Flush after a failed write succeeded")
		}
		refuses(t, e, 10)
		if _, err := e.Claim(10, 1); err == nil || err.Error() != "EIO" {
			t.Fatalf("Claim after failure: %v", err)
		}
		if err := e.Close(); err == nil {
			t.Fatal("Close hid the failure")
		}
	})
}
