package wal

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, &Options{SegmentSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				seq, err := l.Append([]byte(fmt.Sprintf("g%d-%d-%0100d", g, i, i)))
				if err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					if err := l.WaitDurable(context.Background(), seq); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	l, err = Open(dir, &Options{SegmentSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", l.Recovery())
	if l.NextSeq() != 16001 {
		t.Fatalf("next %d", l.NextSeq())
	}
	l.Close()
}
