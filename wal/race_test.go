package wal

import (
	"context"
	"errors"
	"fmt"
	"github.com/appendlog/appendlog/frame"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/vfs"
)

// deadline returns a context that fails the test's wait after d: a hang
// is an error, not a stuck test binary.
func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// joinWithin waits for wg, failing the test if it takes longer than d.
func joinWithin(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: hung for %v", what, d)
	}
}

// TestAppendRacesClose: appends and batches racing Close either succeed
// and are in the log after a reopen, in order, or return ErrClosed; Sync,
// Flush and WaitDurable racing Close return nil or ErrClosed, and never
// hang.
func TestAppendRacesClose(t *testing.T) {
	for trial := range 30 {
		mem := vfs.NewMem()
		opts := &Options{fsys: mem, SegmentSize: 64 << 10, BufferSize: 64 << 10}
		l := mustOpen(t, "/log", opts)
		type got struct {
			seq  uint64
			g, i int
		}
		var mu sync.Mutex
		var ok []got
		var wg sync.WaitGroup
		var started atomic.Int32
		for g := range 6 {
			wg.Go(func() {
				for i := 0; ; i++ {
					started.Add(1)
					var seq uint64
					var err error
					switch g % 3 {
					case 0:
						seq, err = l.Append(testPayload(g, i, 100))
					case 1:
						seq, err = l.AppendBatch([][]byte{testPayload(g, i, 100), testPayload(g, i+1, 60)})
						if err == nil {
							mu.Lock()
							ok = append(ok, got{seq, g, i}, got{seq + 1, g, i + 1})
							mu.Unlock()
							i++
							continue
						}
					case 2:
						seq, err = l.Append(testPayload(g, i, 300))
						if err == nil {
							err = l.WaitDurable(context.Background(), seq)
							if err != nil && !errors.Is(err, ErrClosed) {
								t.Errorf("WaitDurable racing Close: %v", err)
							}
							err = nil // the append itself succeeded
						}
					}
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("append racing Close: %v", err)
						}
						return
					}
					mu.Lock()
					ok = append(ok, got{seq, g, i})
					mu.Unlock()
				}
			})
		}
		wg.Go(func() {
			for {
				err := l.Sync(context.Background())
				if err == nil {
					err = l.Flush(context.Background())
				}
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Sync/Flush racing Close: %v", err)
					}
					return
				}
			}
		})
		for started.Load() < int32(50+trial*20) {
			time.Sleep(50 * time.Microsecond)
		}
		noErr(t, l.Close())
		joinWithin(t, &wg, 5*time.Second, "appenders after Close")
		if t.Failed() {
			t.FailNow()
		}
		all := readAll(t, mem.Crash(nil), "/log")
		for _, a := range ok {
			p, present := all[a.seq]
			if !present {
				t.Fatalf("trial %d: seq %d acked by Append before Close is lost (%d records)", trial, a.seq, len(all))
			}
			if g, i, err := parsePayload(p); err != nil || g != a.g || i != a.i {
				t.Fatalf("trial %d: seq %d holds %d #%d (%v), want %d #%d", trial, a.seq, g, i, err, a.g, a.i)
			}
		}
		if len(all) != len(ok) {
			t.Fatalf("trial %d: %d records in the log, %d appends succeeded", trial, len(all), len(ok))
		}
	}
}

// TestTruncateFrontRacesReaders: TruncateFront deleting segments while
// Readers are created at FirstSeq and read through them, and an appender
// rotates: every Reader sees consecutive, intact records, or a
// *TruncatedError once it fell behind, never garbage, and nothing hangs.
func TestTruncateFrontRacesReaders(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
	defer l.Close()
	ctx := deadline(t, 20*time.Second)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < 20000 && !stop.Load(); i++ {
			if _, err := l.Append(testPayload(1, i, 200)); err != nil {
				t.Errorf("append: %v", err)
				return
			}
		}
		stop.Store(true)
	})
	wg.Go(func() {
		for !stop.Load() {
			if n := l.NextSeq(); n > 600 {
				if err := l.TruncateFront(n - 600); err != nil {
					t.Errorf("TruncateFront: %v", err)
					return
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	var reads, truncated atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				from := l.FirstSeq()
				r, err := l.NewReader(from, nil)
				if errors.Is(err, ErrTruncated) {
					truncated.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("NewReader(%d): %v", from, err)
					return
				}
				want := from
				for k := 0; k < 3000 && !stop.Load(); {
					for r.Next() {
						if r.Seq() != want {
							t.Errorf("reader from %d: seq %d, want %d", from, r.Seq(), want)
							r.Close()
							return
						}
						if g, i, err := parsePayload(r.Record()); err != nil || g != 1 || uint64(i) != want-1 {
							t.Errorf("seq %d holds %d #%d (%v)", want, g, i, err)
							r.Close()
							return
						}
						want++
						k++
						reads.Add(1)
					}
					if err := r.Err(); err != nil {
						if !errors.Is(err, ErrTruncated) {
							t.Errorf("reader from %d at %d: %v", from, want, err)
						}
						truncated.Add(1)
						break
					}
					if want >= l.NextSeq() && stop.Load() {
						break
					}
					wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					err := r.Wait(wctx)
					cancel()
					if err != nil && ctx.Err() != nil {
						t.Errorf("reader hung: %v", err)
						break
					}
				}
				noErr(t, r.Close())
			}
		})
	}
	joinWithin(t, &wg, 20*time.Second, "truncate and readers")
	t.Logf("%d records read, %d truncated errors, %d segments deleted", reads.Load(), truncated.Load(), l.Stats().SegmentsDeleted)
	if l.Stats().SegmentsDeleted == 0 {
		t.Fatal("nothing was deleted")
	}
}

// TestCursorsRaceLogClose: consumers in Next/Ack/Commit, Cursors(),
// DeleteCursor of a cursor opened and closed in a loop, and an OpenCursor
// follower in the same process, all racing Log.Close: each call returns
// nil or its documented error, nothing hangs, and after a reopen every
// checkpoint is at or past its last successful Commit and no further than
// the acks.
func TestCursorsRaceLogClose(t *testing.T) {
	for trial := range 8 {
		dir := t.TempDir()
		l := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, BufferSize: 64 << 10})
		appendN(t, l, 2000)
		noErr(t, l.Sync(context.Background()))
		ctx := deadline(t, 10*time.Second)
		var wg sync.WaitGroup
		var progress atomic.Int64
		names := []string{"c0", "c1", "c2"}
		committed := make([]atomic.Uint64, len(names))
		acked := make([]atomic.Uint64, len(names))
		for k, name := range names {
			c, err := l.Cursor(name)
			noErr(t, err)
			wg.Go(func() {
				defer c.Close()
				for {
					seq, _, err := c.Next(ctx)
					if err == nil {
						err = c.Ack(seq)
						acked[k].Store(seq)
					}
					if err == nil && seq%50 == 0 {
						floor := c.Committed()
						err = c.Commit(ctx)
						if err == nil {
							committed[k].Store(max(floor, committed[k].Load()))
						}
					}
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("cursor %s: %v", name, err)
						}
						return
					}
					progress.Add(1)
				}
			})
		}
		wg.Go(func() {
			for {
				infos, err := l.Cursors()
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Cursors: %v", err)
					}
					return
				}
				for _, in := range infos {
					if in.Err != nil {
						t.Errorf("Cursors: %s: %v", in.Name, in.Err)
					}
				}
			}
		})
		wg.Go(func() {
			for {
				c, err := l.Cursor("d")
				if err == nil {
					_ = c.Ack(1)
					err = c.Close()
				}
				if err == nil {
					err = l.DeleteCursor("d")
				}
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("cursor d: %v", err)
					}
					return
				}
			}
		})
		var done atomic.Bool
		wg.Go(func() {
			for !done.Load() {
				c, err := OpenCursor(dir, "f", nil, nil)
				if err != nil {
					t.Errorf("OpenCursor: %v", err)
					return
				}
				for range 100 {
					seq, _, ok, err := c.Poll()
					if err != nil {
						t.Errorf("follower: %v", err)
					}
					if !ok {
						break
					}
					if err := c.Ack(seq); err != nil {
						t.Errorf("follower Ack: %v", err)
					}
				}
				if err := c.Close(); err != nil {
					t.Errorf("follower Close: %v", err)
				}
			}
		})
		for progress.Load() < int64(100+trial*150) {
			time.Sleep(50 * time.Microsecond)
		}
		noErr(t, l.Close())
		done.Store(true)
		joinWithin(t, &wg, 10*time.Second, "cursor users after Close")
		if t.Failed() {
			t.FailNow()
		}
		l2 := mustOpen(t, dir, nil)
		for k, name := range names {
			got, err := readCursorFile(vfs.OS(), dir, name, frame.LogID{})
			noErr(t, err)
			if got < committed[k].Load() || got > acked[k].Load()+1 {
				t.Errorf("trial %d: cursor %s checkpoint %d; committed %d, acked up to %d", trial, name, got, committed[k].Load(), acked[k].Load())
			}
		}
		noErr(t, l2.Close())
	}
}

// listHookFS runs hook once, after the first listing of a directory named
// dir that it is armed for: a way to make a deletion land between a
// listing and the reads that follow it.
type listHookFS struct {
	vfs.FS
	dir  string
	hook atomic.Pointer[func()]
}

func (f *listHookFS) List(dir string) ([]string, error) {
	names, err := f.FS.List(dir)
	f.listed(dir)
	return names, err
}

func (f *listHookFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	entries, err := f.FS.ReadDir(dir)
	f.listed(dir)
	return entries, err
}

// listed runs the hook if it is armed and dir is f.dir.
func (f *listHookFS) listed(dir string) {
	if dir == f.dir {
		if h := f.hook.Swap(nil); h != nil {
			(*h)()
		}
	}
}

// TestDeleteCursorBetweenListAndRead: a cursor deleted after Cursors or
// retention listed the cursors directory, before they read its file, is
// gone: Cursors leaves it out and TruncateFront goes on, instead of
// reporting its missing file.
func TestDeleteCursorBetweenListAndRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(l *Log) error
	}{
		{"Cursors", func(l *Log) error {
			infos, err := l.Cursors()
			for _, in := range infos {
				if in.Name == "gone" || in.Err != nil {
					err = errors.Join(err, fmt.Errorf("cursor %s listed (%v)", in.Name, in.Err))
				}
			}
			if len(infos) != 1 || infos[0].Name != "kept" {
				err = errors.Join(err, fmt.Errorf("listed %+v, want cursor kept", infos))
			}
			return err
		}},
		{"ReadCursors", func(l *Log) error {
			infos, err := ReadCursors(l.dir, &Options{fsys: l.opts.fsys})
			if err == nil && (len(infos) != 1 || infos[0].Name != "kept" || infos[0].Err != nil) {
				err = fmt.Errorf("listed %+v, want cursor kept", infos)
			}
			return err
		}},
		{"TruncateFront", func(l *Log) error {
			if err := l.TruncateFront(l.NextSeq()); err != nil {
				return err
			}
			if l.FirstSeq() == 1 {
				return errors.New("nothing deleted")
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := &listHookFS{FS: vfs.NewMem(), dir: "/log/" + cursorDir}
			l := mustOpen(t, "/log", &Options{fsys: fsys, SegmentSize: 64 << 10, BufferSize: 64 << 10})
			defer l.Close()
			for i := range 1000 {
				_, err := l.Append(testPayload(1, i, 200))
				noErr(t, err)
			}
			noErr(t, l.Sync(context.Background()))
			for _, name := range []string{"gone", "kept"} {
				c, err := l.Cursor(name)
				noErr(t, err)
				for s := uint64(1); s < 900; s++ {
					noErr(t, c.Ack(s))
				}
				noErr(t, c.Close())
			}
			var derr error
			h := func() { derr = l.DeleteCursor("gone") }
			fsys.hook.Store(&h)
			err := tc.call(l)
			noErr(t, derr)
			if fsys.hook.Load() != nil {
				t.Fatal("the hook did not run")
			}
			if err != nil {
				t.Fatalf("%s with a cursor deleted after the listing: %v", tc.name, err)
			}
		})
	}
}

// TestSeekBackRacesCommit: a Seek back that returned is what the cursor
// file holds, whatever Commit (or the checkpointer) did meanwhile: a
// checkpoint that read the committed position before the Seek must not
// write it after the Seek's.
func TestSeekBackRacesCommit(t *testing.T) {
	l := mustOpen(t, "/log", &Options{fsys: vfs.NewMem(), CheckpointEvery: time.Hour})
	defer l.Close()
	appendN(t, l, 3000)
	noErr(t, l.Sync(context.Background()))
	c, err := l.Cursor("c")
	noErr(t, err)
	defer c.Close()
	next := uint64(1)
	for k := range 300 {
		back := next
		for range 10 {
			noErr(t, c.Ack(next))
			next++
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			for !stop.Load() {
				if err := c.Commit(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		})
		noErr(t, c.Seek(back))
		stop.Store(true)
		wg.Wait()
		if got, err := readCursorFile(l.opts.fsys, "/log", "c", frame.LogID{}); err != nil || got != back {
			t.Fatalf("round %d: Seek(%d) returned, the cursor file holds %d (%v); Committed %d", k, back, got, err, c.Committed())
		}
		next = back
		for range 10 { // forward again, past what the next round acks
			noErr(t, c.Ack(next))
			next++
		}
		noErr(t, c.Commit(context.Background()))
	}
}

// renameHookFS runs hook once, before the next Rename: the sealer renames
// the next segment after it synced the one it seals, and writes that
// one's index file after.
type renameHookFS struct {
	vfs.FS
	hook atomic.Pointer[func()]
}

func (f *renameHookFS) Rename(oldname, newname string) error {
	if h := f.hook.Swap(nil); h != nil {
		(*h)()
	}
	return f.FS.Rename(oldname, newname)
}

// TestTruncateFrontRacesSealIndex: a TruncateFront that deletes a segment
// the sealer is still sealing leaves no index file behind for it (the
// sealer wrote it after the deletion, and only the next Open removed it).
// TruncateFront starts while the sealer renames the next segment; it
// waits for that name to be durable (see liveSeg.named) and then races
// the sealer's write of the sealed segment's index file.
func TestTruncateFrontRacesSealIndex(t *testing.T) {
	mem := vfs.NewMem()
	fsys := &renameHookFS{FS: mem}
	l := mustOpen(t, "/log", &Options{fsys: fsys, SegmentSize: 64 << 10, BufferSize: 64 << 10})
	terr := make(chan error, 1)
	h := func() { go func() { terr <- l.TruncateFront(l.NextSeq()) }() }
	fsys.hook.Store(&h)
	for i := range 400 {
		_, err := l.Append(testPayload(1, i, 200))
		noErr(t, err)
	}
	noErr(t, l.Sync(context.Background()))
	if fsys.hook.Load() != nil {
		t.Fatal("the appends did not rotate")
	}
	noErr(t, <-terr)
	noErr(t, l.Close())
	if fsys.hook.Load() != nil || l.FirstSeq() == 1 {
		t.Fatalf("the hook did not delete the sealed segment (first %d)", l.FirstSeq())
	}
	names, err := mem.List("/log")
	noErr(t, err)
	for _, n := range names {
		if seg, ok := strings.CutSuffix(n, idxSuffix); ok {
			if _, err := mem.Stat("/log/" + seg); err != nil {
				t.Errorf("index file %s left for a deleted segment (files %q)", n, names)
			}
		}
	}
}

// TestNewCursorRacesTruncateFront: a cursor created while TruncateFront
// runs starts at a record the deletion keeps. It started at the FirstSeq
// from before the deletion, whose floor could not count it: its first
// Next was a *TruncatedError, and so was every later one until a Seek.
func TestNewCursorRacesTruncateFront(t *testing.T) {
	fsys := &listHookFS{FS: vfs.NewMem(), dir: "/log/" + cursorDir}
	l := mustOpen(t, "/log", &Options{fsys: fsys, SegmentSize: 64 << 10, BufferSize: 64 << 10})
	defer l.Close()
	for i := range 1000 {
		_, err := l.Append(testPayload(1, i, 200))
		noErr(t, err)
	}
	noErr(t, l.Sync(context.Background()))
	var c *Cursor
	var cerr error
	done := make(chan struct{})
	// Retention listed the cursors (none): the cursor is created now. It
	// either completes at once (the bug) or waits for the deletion; the
	// hook waits a little for it, so that the first shows.
	h := func() {
		go func() {
			defer close(done)
			c, cerr = l.Cursor("n")
		}()
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	fsys.hook.Store(&h)
	noErr(t, l.TruncateFront(l.NextSeq()))
	<-done
	noErr(t, cerr)
	defer c.Close()
	if l.FirstSeq() == 1 {
		t.Fatal("nothing was deleted")
	}
	seq, _, err := c.Next(context.Background())
	if err != nil || seq != l.FirstSeq() {
		t.Fatalf("new cursor at %d: Next %d, %v; the log starts at %d", c.Committed(), seq, err, l.FirstSeq())
	}
}

// TestCursorsRacesTruncateFront: Cursors lists the segments, then sizes
// the ones after a cursor's position; a TruncateFront deleting some of
// them in between (a cursor that IgnoreCursors does not protect) is not
// an error of the cursor's.
func TestCursorsRacesTruncateFront(t *testing.T) {
	fsys := &listHookFS{FS: vfs.NewMem(), dir: "/log"}
	l := mustOpen(t, "/log", &Options{fsys: fsys, SegmentSize: 64 << 10, BufferSize: 64 << 10, Retention: Retention{IgnoreCursors: true}})
	defer l.Close()
	for i := range 1500 {
		_, err := l.Append(testPayload(1, i, 200))
		noErr(t, err)
	}
	noErr(t, l.Sync(context.Background()))
	c, err := l.Cursor("c")
	noErr(t, err)
	noErr(t, c.Close())
	var terr error
	h := func() { terr = l.TruncateFront(1200) } // after the listing of the segments
	fsys.hook.Store(&h)
	infos, err := l.Cursors()
	noErr(t, err)
	noErr(t, terr)
	if fsys.hook.Load() != nil || l.FirstSeq() == 1 {
		t.Fatalf("the hook deleted nothing (first %d)", l.FirstSeq())
	}
	if len(infos) != 1 || infos[0].Err != nil || infos[0].LagBytes <= 0 {
		t.Fatalf("Cursors racing TruncateFront: %+v", infos)
	}
}
