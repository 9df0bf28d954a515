package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroupReopenWhileClosing: a group opened by one goroutine while
// another closes it (Close waiting for its last checkpoint) is the group
// opened again once that close is done, not the one closing: its Next
// delivered nothing and returned ErrClosed.
func TestGroupReopenWhileClosing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b := newBlockingFS(filepath.Join("cursors", ".g.tmp"))
	st := mustOpen(t, t.TempDir(), &Options{fsys: b})
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	g, err := s.Group("g", &GroupOptions{CheckpointEvery: time.Hour})
	noErr(t, err)
	for _, p := range []string{"a", "b"} {
		_, err := s.Publish([]byte(p))
		noErr(t, err)
	}
	m, err := g.Next(ctx, nil)
	noErr(t, err)
	noErr(t, g.Ack(m.Seq)) // the last checkpoint has something to write

	b.armed.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	<-b.blocked // Close is writing the last checkpoint
	reopened := make(chan *Group, 1)
	go func() {
		g2, err := s.Group("g", nil)
		if err != nil {
			t.Errorf("Group while the group closes: %v", err)
		}
		reopened <- g2
	}()
	select {
	case g2 := <-reopened:
		// Returned before the close finished: it may only be a group
		// that works, which the one closing is not.
		close(b.release)
		noErr(t, <-closed)
		checkReopened(t, ctx, g, g2)
	case <-time.After(100 * time.Millisecond):
		close(b.release)
		noErr(t, <-closed)
		checkReopened(t, ctx, g, <-reopened)
	}
}

func checkReopened(t *testing.T, ctx context.Context, old, g2 *Group) {
	t.Helper()
	if g2 == nil {
		t.FailNow()
	}
	if g2 == old {
		t.Fatal("Group returned the group being closed")
	}
	m, err := g2.Next(ctx, nil)
	noErr(t, err)
	if m.Seq != 2 {
		t.Fatalf("reopened group delivered %d, want 2", m.Seq)
	}
	noErr(t, g2.Close())
}

// TestStressPublishIdle: publishers (Publish, PublishBatch, WaitDurable)
// race the janitor closing the stream's log as idle (a 2 ms IdleTimeout)
// and a poller of Stats, List and NextSeq; every record confirmed is
// there once, in each publisher's order, after the store is reopened.
func TestStressPublishIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	st := mustOpen(t, dir, &Options{IdleTimeout: 2 * time.Millisecond})
	s, err := st.Create("p", &Config{SegmentSize: 64 << 10})
	noErr(t, err)
	const pubs, n = 4, 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var polls, idle atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ss := s.Stats()
			if ss.NextSeq > 0 && ss.DurableSeq >= ss.NextSeq {
				t.Errorf("Stats: DurableSeq %d at or past NextSeq %d", ss.DurableSeq, ss.NextSeq)
			}
			_ = st.List()
			_ = s.GroupStats()
			polls.Add(1)
			if !ss.Open {
				idle.Add(1)
			}
		}
	}()
	var pw sync.WaitGroup
	for p := range pubs {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for i := 0; i < n; {
				var last uint64
				if i%3 == 0 && i+2 <= n {
					first, err := s.PublishBatch([][]byte{rec(p, i), rec(p, i+1)})
					if err != nil {
						t.Errorf("PublishBatch: %v", err)
						return
					}
					last, i = first+1, i+2
				} else {
					seq, err := s.Publish(rec(p, i))
					if err != nil {
						t.Errorf("Publish: %v", err)
						return
					}
					last, i = seq, i+1
				}
				if i%7 == 0 {
					if err := s.WaitDurable(ctx, last); err != nil {
						t.Errorf("WaitDurable(%d): %v", last, err)
						return
					}
					// Idle long enough for the janitor, now and then.
					if i%21 == 0 {
						time.Sleep(3 * time.Millisecond)
					}
				}
			}
		}()
	}
	pw.Wait()
	close(stop)
	wg.Wait()
	noErr(t, st.Close())
	st = mustOpen(t, dir, nil)
	defer st.Close()
	s, err = st.Stream("p")
	noErr(t, err)
	next := make([]int, pubs)
	count := 0
	noErr(t, s.Scan(0, func(seq uint64, r []byte) error {
		if len(r) != 16 {
			return fmt.Errorf("record %d: %d bytes", seq, len(r))
		}
		p, i := int(binary.LittleEndian.Uint64(r)), int(binary.LittleEndian.Uint64(r[8:]))
		if p >= pubs {
			return fmt.Errorf("record %d: publisher %d", seq, p)
		}
		if i != next[p] {
			return fmt.Errorf("record %d: publisher %d record %d, want %d", seq, p, i, next[p])
		}
		next[p]++
		count++
		return nil
	}))
	if count != pubs*n {
		t.Fatalf("%d records after reopen, want %d", count, pubs*n)
	}
	t.Logf("%d polls, %d saw the log closed", polls.Load(), idle.Load())
}

// TestStressGroupClose: members of one group take, ack and nack records
// while a closer closes the group again and again (the members then open
// it again), and opens and closes a second group that a deleter deletes
// (refused while it is open). Every record is acked at least once, none is acked by
// two members of one opening of the group, every error is one a member
// expects, and Stream.Delete at the end stops every member.
func TestStressGroupClose(t *testing.T) {
	for _, end := range []string{"delete", "close"} {
		t.Run(end, func(t *testing.T) { stressGroupClose(t, end) })
	}
}

func stressGroupClose(t *testing.T, end string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := mustOpen(t, t.TempDir(), &Options{IdleTimeout: 2 * time.Millisecond})
	defer st.Close()
	s, err := st.Create("q", &Config{SegmentSize: 64 << 10})
	noErr(t, err)
	const n, members = 10000, 6
	for i := range n {
		_, err := s.Publish(rec(0, i))
		noErr(t, err)
	}
	gopts := &GroupOptions{AckWait: time.Hour, CheckpointEvery: time.Hour}
	var mu sync.Mutex
	acked := make(map[uint64]int)              // seq: acks that returned nil
	byGroup := make(map[*Group]map[uint64]int) // per opening
	var done atomic.Int64                      // distinct records acked
	var deleted atomic.Int64
	var wg sync.WaitGroup
	for m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for k := 0; ; k++ {
				g, err := s.Group("g", gopts)
				if errors.Is(err, ErrNotFound) || errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("member %d: Group: %v", m, err)
					return
				}
				msg, err := g.Next(ctx, buf)
				switch {
				case errors.Is(err, ErrNotFound), end == "close" && errors.Is(err, ErrClosed) && st.isClosed():
					return
				case errors.Is(err, ErrClosed):
					continue // closed by the closer: open it again
				case err != nil:
					t.Errorf("member %d: Next: %v", m, err)
					return
				}
				buf = msg.Data
				if binary.LittleEndian.Uint64(msg.Data[8:]) != msg.Seq-1 {
					t.Errorf("member %d: record %d holds %x", m, msg.Seq, msg.Data)
					return
				}
				if k%10 == 0 {
					if err := g.Nack(msg.Seq); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotFound) {
						t.Errorf("member %d: Nack(%d): %v", m, msg.Seq, err)
						return
					}
					continue
				}
				err = g.Ack(msg.Seq)
				switch {
				case errors.Is(err, ErrClosed), errors.Is(err, ErrNotFound):
					continue
				case err != nil:
					t.Errorf("member %d: Ack(%d): %v", m, msg.Seq, err)
					return
				}
				mu.Lock()
				if byGroup[g] == nil {
					byGroup[g] = make(map[uint64]int)
				}
				byGroup[g][msg.Seq]++
				if byGroup[g][msg.Seq] > 1 {
					t.Errorf("record %d delivered and acked twice by one opening of the group", msg.Seq)
				}
				acked[msg.Seq]++
				if acked[msg.Seq] == 1 {
					done.Add(1)
				}
				mu.Unlock()
			}
		}()
	}
	var side sync.WaitGroup
	stop := make(chan struct{})
	side.Add(2)
	go func() { // the closer
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, name := range []string{"g", "h"} {
				if g, err := s.Group(name, gopts); err == nil {
					if err := g.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				}
			}
			_ = s.GroupStats()
			_ = s.Stats()
		}
	}()
	go func() { // the deleter of group h, which the closer opens and closes
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := s.DeleteGroup("h")
			if err != nil && !errors.Is(err, ErrGroupOpen) && !errors.Is(err, ErrNoGroup) {
				t.Errorf("DeleteGroup: %v", err)
			}
			if err == nil {
				deleted.Add(1)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for done.Load() < n && ctx.Err() == nil && !t.Failed() {
		time.Sleep(time.Millisecond)
	}
	if ctx.Err() != nil {
		buf := make([]byte, 1<<20)
		t.Logf("stuck at %d of %d; goroutines:\n%s", done.Load(), n, buf[:runtime.Stack(buf, true)])
	}
	close(stop)
	side.Wait()
	if end == "delete" {
		noErr(t, st.Delete("q"))
	} else {
		noErr(t, st.Close())
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%d of %d records acked in time", done.Load(), n)
	}
	for seq := uint64(1); seq <= n; seq++ {
		if acked[seq] == 0 {
			t.Errorf("record %d never acked", seq)
		}
	}
	t.Logf("%d openings, %d deleted", len(byGroup), deleted.Load())
}

func (st *Store) isClosed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.closed
}
