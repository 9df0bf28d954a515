package shmlog_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// TestStalledClaimsOfALiveProcess: two goroutines of a live process stall
// between their claims and their headers for longer than CommitTimeout,
// while other goroutines of the process append on. A reader waiting at
// the first claim must not take the process's later claims leaving for
// the stalled ones: padding over the two claims would cover the second,
// whose header CAS then succeeds inside the padding's body, so its Append
// succeeds with a record no reader ever reads.
func TestStalledClaimsOfALiveProcess(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20, CommitTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var calls atomic.Int32
	stalled := make(chan struct{}, 2)
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	l.SetBeforeHeader(func() {
		if n := calls.Add(1); n <= 2 {
			stalled <- struct{}{}
			<-release[n-1]
		}
	})
	type result struct {
		pos uint64
		err error
	}
	var res [2]result
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			res[i].pos, res[i].err = l.Append([]byte("stalled"))
		})
		<-stalled
	}
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 3 {
		if _, ok, err := r.Next(); ok || err != nil {
			t.Fatalf("Next at a live claim: %v %v", ok, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Other goroutines of the process append on.
	for range 2 {
		if _, err := l.Append([]byte("busy")); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		r.Next()
		time.Sleep(2 * time.Millisecond)
	}
	close(release[1])
	close(release[0])
	wg.Wait()
	r.Close()
	l.Close()
	read := map[uint64]bool{}
	if _, err := shmlog.Verify(path, func(rec shmlog.Record) error {
		read[rec.Pos] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, rs := range res {
		if rs.err == nil && !read[rs.pos] {
			t.Errorf("stalled Append %d returned %#x, nil; the record is not in the log", i, rs.pos)
		}
	}
}
