package wal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/appendlog/appendlog/frame"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/vfs"
)

// floorHookFS is the file system of the tests of a cursor that OpenCursor
// creates while the writer's retention runs. Both go through the files
// only: OpenCursor shares no memory with the Log, as in two processes.
//
// afterList runs once, after the next listing of the cursors directory
// (retention reading the cursors' positions, before it deletes).
// beforeTmp runs once, before the next create of a cursor's temporary
// file (a cursor's checkpoint, written after it chose its position).
// busy is closed the first time a Lock of a file in the cursors directory
// finds it held by someone else.
type floorHookFS struct {
	vfs.FS
	cdir      string
	afterList atomic.Pointer[func()]
	beforeTmp atomic.Pointer[func()]
	busyOnce  sync.Once
	busy      chan struct{}
}

func newFloorHookFS() *floorHookFS {
	return &floorHookFS{FS: vfs.NewMem(), cdir: filepath.Join("/log", cursorDir), busy: make(chan struct{})}
}

func (f *floorHookFS) List(dir string) ([]string, error) {
	names, err := f.FS.List(dir)
	if dir == f.cdir {
		if h := f.afterList.Swap(nil); h != nil {
			(*h)()
		}
	}
	return names, err
}

func (f *floorHookFS) OpenRegular(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if filepath.Dir(name) == f.cdir && flag&os.O_CREATE != 0 && strings.HasSuffix(name, ".tmp") {
		if h := f.beforeTmp.Swap(nil); h != nil {
			(*h)()
		}
	}
	return f.FS.OpenRegular(name, flag, perm)
}

func (f *floorHookFS) Lock(name, holder string) (io.Closer, error) {
	c, err := f.FS.Lock(name, holder)
	if filepath.Dir(name) == f.cdir && errors.Is(err, vfs.ErrLocked) {
		f.busyOnce.Do(func() { close(f.busy) })
	}
	return c, err
}

// floorRaceLog returns a log on fsys of some seven segments whose
// retention (MaxBytes of three segments) would delete the oldest ones at
// its next pass. It was written without retention by a Log that had a
// cursor, since deleted, and opened again with retention: its sealer has
// nothing to do. clk is its clock, the system clock if nil.
func floorRaceLog(t *testing.T, fsys vfs.FS, clk clock.Clock) *Log {
	t.Helper()
	return floorRaceLogIn(t, fsys, "/log", clk, true)
}

// noCursorsLog is floorRaceLog for a log that never had a cursor: it has
// no cursors directory.
func noCursorsLog(t *testing.T, fsys vfs.FS) *Log {
	t.Helper()
	return floorRaceLogIn(t, fsys, "/log", nil, false)
}

// floorRaceLogIn is floorRaceLog in dir, with a cursors directory or not.
func floorRaceLogIn(t *testing.T, fsys vfs.FS, dir string, clk clock.Clock, cursors bool) *Log {
	t.Helper()
	o := &Options{fsys: fsys, SegmentSize: 64 << 10, BufferSize: 64 << 10, CheckpointEvery: time.Hour, clock: clk}
	l := mustOpen(t, dir, o)
	if cursors {
		c, err := l.Cursor("gone")
		noErr(t, err)
		noErr(t, c.Close())
		noErr(t, l.DeleteCursor("gone"))
	}
	for i := range 2000 {
		_, err := l.Append(testPayload(1, i, 200))
		noErr(t, err)
	}
	noErr(t, l.Close())
	o.Retention.MaxBytes = 3 * o.SegmentSize
	l = mustOpen(t, dir, o)
	_, err := fsys.Stat(filepath.Join(dir, cursorDir))
	if exists := err == nil; exists != cursors || l.FirstSeq() != 1 {
		t.Fatalf("cursors directory: %v (want it %v); first %d", err, cursors, l.FirstSeq())
	}
	return l
}

// retentionPass is a deletion by the writer: a background retention pass,
// or a TruncateFront of every sealed segment.
type retentionPass struct {
	name string
	run  func(l *Log) error
}

var _retentionPasses = []retentionPass{
	{"applyRetention", func(l *Log) error {
		l.applyRetention()
		l.ret.Lock()
		defer l.ret.Unlock()
		err := l.ret.err
		l.ret.err = nil
		return err
	}},
	{"TruncateFront", func(l *Log) error { return l.TruncateFront(l.NextSeq()) }},
}

// waitRace waits until the call running in another goroutine is done or
// waits for a lock in the cursors directory (busy), or, for a call that
// would wait on a mutex instead (patience > 0), patience has passed.
func waitRace(t *testing.T, fsys *floorHookFS, done <-chan struct{}, what string, patience time.Duration) {
	t.Helper()
	var timeout <-chan time.Time
	if patience > 0 {
		timeout = time.After(patience)
	}
	select {
	case <-done:
	case <-fsys.busy:
	case <-timeout:
	case <-time.After(10 * time.Second):
		t.Errorf("%s neither returned nor waited for a lock in 10s", what)
	}
}

// checkNewCursor checks a cursor OpenCursor just created on l: it starts
// at the log's first record, its file says so, and Next delivers it.
func checkNewCursor(t *testing.T, l *Log, c *Cursor) {
	t.Helper()
	first := l.FirstSeq()
	if got := c.Committed(); got != first {
		t.Errorf("new cursor at %d; the log starts at %d", got, first)
	}
	if got, err := readCursorFile(l.opts.fsys, l.dir, c.Name(), frame.LogID{}); err != nil || got < first {
		t.Errorf("new cursor's file holds %d (%v); the log starts at %d: it claims records that are gone", got, err, first)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seq, _, err := c.Next(ctx)
	if err != nil || seq != first {
		t.Errorf("new cursor's first Next: %d, %v; want record %d, the log's first", seq, err, first)
	}
}

// TestOpenCursorRacesRetentionScan: a cursor that OpenCursor (in another
// process: it shares nothing with the Log but the files) creates after the
// writer's retention read the cursors' positions, and before it deleted
// the segments, starts at the first record the deletion kept. Without an
// order between the two, the cursor chose record 1 and wrote its
// checkpoint, and retention, whose floor could not count it, deleted
// record 1: a new cursor whose checkpoint claims deleted records, whose
// first Next is a *TruncatedError although no cursor's records may be
// deleted.
//
// A log that never had a cursor has no cursors directory: retention then
// found none, and OpenCursor made it and its cursor before the deletion.
func TestOpenCursorRacesRetentionScan(t *testing.T) {
	for _, pass := range _retentionPasses {
		for _, dirAt := range []string{"cursors directory", "no cursors directory"} {
			t.Run(pass.name+"/"+dirAt, func(t *testing.T) {
				testOpenCursorRacesRetentionScan(t, pass, dirAt == "cursors directory")
			})
		}
	}
}

func testOpenCursorRacesRetentionScan(t *testing.T, pass retentionPass, withDir bool) {
	fsys := newFloorHookFS()
	var l *Log
	if withDir {
		l = floorRaceLog(t, fsys, nil)
	} else {
		l = noCursorsLog(t, fsys)
	}
	defer l.Close()
	var c *Cursor
	var cerr error
	done := make(chan struct{})
	h := func() {
		go func() {
			defer close(done)
			c, cerr = OpenCursor("/log", "new", &Options{fsys: fsys}, nil)
		}()
		waitRace(t, fsys, done, "OpenCursor", 0)
	}
	fsys.afterList.Store(&h)
	noErr(t, pass.run(l))
	if fsys.afterList.Load() != nil {
		t.Fatal("retention did not list the cursors")
	}
	<-done
	noErr(t, cerr)
	defer c.Close()
	if l.FirstSeq() == 1 {
		t.Fatal("retention deleted nothing")
	}
	checkNewCursor(t, l, c)
}

// TestRetentionRacesOpenCursorCheckpoint: a retention pass of the writer
// that starts while OpenCursor (in another process) writes a new cursor's
// first checkpoint, after it chose its position, keeps the cursor's
// records. Without an order, retention listed the cursors before the
// checkpoint was there and deleted the records the cursor had just
// chosen.
func TestRetentionRacesOpenCursorCheckpoint(t *testing.T) {
	for _, pass := range _retentionPasses {
		t.Run(pass.name, func(t *testing.T) {
			fsys := newFloorHookFS()
			l := floorRaceLog(t, fsys, nil)
			defer l.Close()
			var perr error
			done := make(chan struct{})
			h := func() {
				go func() {
					defer close(done)
					perr = pass.run(l)
				}()
				waitRace(t, fsys, done, pass.name, 0)
			}
			fsys.beforeTmp.Store(&h)
			c, err := OpenCursor("/log", "new", &Options{fsys: fsys}, nil)
			<-done
			noErr(t, err)
			defer c.Close()
			noErr(t, perr)
			if fsys.beforeTmp.Load() != nil {
				t.Fatal("OpenCursor wrote no checkpoint")
			}
			// The next pass (the next seal's) sees the cursor.
			noErr(t, pass.run(l))
			checkNewCursor(t, l, c)
		})
	}
}

// TestSeekBackRacesRetention: a Seek back that starts after retention
// read the cursors' positions (the cursor's was further on) and before it
// deleted the segments either is counted by the deletion or reports the
// deletion (a *TruncatedError, the cursor unchanged); it never returns
// with a checkpoint at a deleted record. The cursor is a Log's, or
// OpenCursor's in another process.
func TestSeekBackRacesRetention(t *testing.T) {
	for _, kind := range []string{"Log.Cursor", "OpenCursor"} {
		for _, pass := range _retentionPasses {
			t.Run(kind+"/"+pass.name, func(t *testing.T) {
				fsys := newFloorHookFS()
				l := floorRaceLog(t, fsys, nil)
				defer l.Close()
				var c *Cursor
				var err error
				patience := time.Duration(0)
				if kind == "Log.Cursor" {
					c, err = l.Cursor("s")
					patience = 100 * time.Millisecond // Seek waits on a mutex, if at all
				} else {
					c, err = OpenCursor("/log", "s", &Options{fsys: fsys}, nil)
				}
				noErr(t, err)
				defer c.Close()
				const at = 1900
				noErr(t, c.Seek(at))
				var serr error
				done := make(chan struct{})
				h := func() {
					go func() {
						defer close(done)
						serr = c.Seek(1)
					}()
					waitRace(t, fsys, done, "Seek", patience)
				}
				var hooked atomic.Bool
				l.ret.Lock()
				l.retentionFloor = func() (uint64, bool, error) {
					f, ok, err := l.cursorFloor()
					if !hooked.Swap(true) {
						h()
					}
					return f, ok, err
				}
				l.ret.Unlock()
				noErr(t, pass.run(l))
				if !hooked.Load() {
					t.Fatal("retention did not read the cursors")
				}
				<-done
				first := l.FirstSeq()
				if first == 1 {
					t.Fatal("retention deleted nothing")
				}
				got, err := readCursorFile(fsys, "/log", "s", frame.LogID{})
				noErr(t, err)
				var te *TruncatedError
				switch {
				case serr == nil && got < first:
					t.Fatalf("Seek(1) returned nil; the cursor's file holds %d, the log starts at %d: it claims records that are gone", got, first)
				case serr == nil:
				case !errors.As(serr, &te) || te.First != first:
					t.Fatalf("Seek(1): %v, want a *TruncatedError naming %d", serr, first)
				case got != at || c.Committed() != at:
					t.Fatalf("a failed Seek moved the cursor: file %d, committed %d, want %d", got, c.Committed(), at)
				}
			})
		}
	}
}

// advanceUntil moves fake forward in steps of the floor lock's pauses
// until done is closed.
func advanceUntil(fake *clock.Fake, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(100 * time.Microsecond):
		}
		fake.Advance(_floorPoll)
	}
}

// TestFloorLockHeld: while another process holds the floor lock (a
// process stopped while it created a cursor), background retention skips
// its passes and counts them, TruncateFront, OpenCursor and a follower's
// Seek give up after a bounded wait with ErrFloorBusy naming the holder,
// and nothing is deleted or written. Once the lock is free (released, or
// its process died: the kernel releases it, its file stays), each works.
func TestFloorLockHeld(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	fsys := newFloorHookFS()
	l := floorRaceLog(t, fsys, fake)
	defer l.Close()
	s, err := OpenCursor("/log", "s", &Options{fsys: fsys, clock: fake}, nil)
	noErr(t, err)
	defer s.Close()
	noErr(t, s.Seek(1900))
	path := filepath.Join("/log", cursorDir, _floorLock)
	held, err := fsys.FS.Lock(path, "pid 99999 (OpenCursor)")
	noErr(t, err)
	busy := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrFloorBusy) || !strings.Contains(err.Error(), "pid 99999") || !strings.Contains(err.Error(), "tried for") {
			t.Errorf("%s with the floor lock held: %v, want ErrFloorBusy naming the holder after a wait", what, err)
		}
	}
	inBackground := func(f func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
		}()
		advanceUntil(fake, done)
	}

	l.applyRetention()
	if st := l.Stats(); st.RetentionSkipped != 1 || st.SegmentsDeleted != 0 || l.FirstSeq() != 1 {
		t.Fatalf("retention with the floor lock held: %d skipped, %d deleted, first %d; want 1 skipped, nothing deleted", st.RetentionSkipped, st.SegmentsDeleted, l.FirstSeq())
	}
	var terr, serr, oerr error
	inBackground(func() { terr = l.TruncateFront(l.NextSeq()) })
	busy("TruncateFront", terr)
	inBackground(func() { serr = s.Seek(5) })
	busy("Seek", serr)
	if got, err := readCursorFile(fsys, "/log", "s", frame.LogID{}); err != nil || got != 1900 || s.Committed() != 1900 {
		t.Errorf("a Seek that gave up moved the cursor: file %d (%v), committed %d", got, err, s.Committed())
	}
	inBackground(func() {
		var c *Cursor
		if c, oerr = OpenCursor("/log", "n", &Options{fsys: fsys, clock: fake}, nil); oerr == nil {
			c.Close()
		}
	})
	busy("OpenCursor", oerr)
	if _, err := readCursorFile(fsys, "/log", "n", frame.LogID{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenCursor that gave up left a cursor file: %v", err)
	}
	if l.FirstSeq() != 1 {
		t.Fatalf("deleted with the floor lock held: first %d", l.FirstSeq())
	}
	if err := l.TruncateFront(0); err != nil {
		t.Fatalf("TruncateFront with nothing to delete waits for no lock: %v", err)
	}

	noErr(t, held.Close())
	l.applyRetention()
	noErr(t, l.TruncateFront(0)) // returns what the background pass met
	first := l.FirstSeq()
	if first == 1 || l.Stats().RetentionSkipped != 1 {
		t.Fatalf("retention after the lock was released: first %d, %d skipped", first, l.Stats().RetentionSkipped)
	}
	n, err := OpenCursor("/log", "n", &Options{fsys: fsys, clock: fake}, nil)
	noErr(t, err)
	defer n.Close()
	checkNewCursor(t, l, n)
	noErr(t, s.Seek(first))
}

// _floorChildEnv names the log directory to TestFloorLockHolderDies's
// child process.
const _floorChildEnv = "WAL_TEST_FLOOR_LOCK_CHILD"

// TestFloorLockHolderDies: another process that holds the floor lock (as
// OpenCursor does while it creates a cursor) keeps the writer's retention
// from deleting; once it is killed, the kernel has released the lock (its
// file stays) and the next pass deletes.
func TestFloorLockHolderDies(t *testing.T) {
	if dir := os.Getenv(_floorChildEnv); dir != "" {
		lock, err := vfs.OS().Lock(filepath.Join(dir, cursorDir, _floorLock), fmt.Sprintf("pid %d (OpenCursor)", os.Getpid()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		fmt.Println("held")
		time.Sleep(time.Minute) // killed before
		lock.Close()
		os.Exit(4)
	}
	switch runtime.GOOS {
	case "linux", "darwin", "dragonfly", "freebsd", "netbsd", "openbsd":
	default:
		t.Skip("no flock(2) here: the floor lock orders the callers of one process only")
	}
	dir := t.TempDir()
	l := floorRaceLogIn(t, vfs.OS(), dir, nil, true)
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFloorLockHolderDies$")
	cmd.Env = append(os.Environ(), _floorChildEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	noErr(t, err)
	noErr(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q, %v:\n%s", line, err, stderr.String())
	}
	l.applyRetention()
	if st := l.Stats(); st.RetentionSkipped != 1 || l.FirstSeq() != 1 {
		t.Errorf("retention while another process holds the floor lock: %d skipped, first %d", st.RetentionSkipped, l.FirstSeq())
	}
	noErr(t, cmd.Process.Kill())
	cmd.Wait()
	l.applyRetention()
	noErr(t, l.TruncateFront(0)) // returns what the background pass met
	if st := l.Stats(); st.RetentionSkipped != 1 || l.FirstSeq() == 1 {
		t.Errorf("retention after the holder died: %d skipped, first %d", st.RetentionSkipped, l.FirstSeq())
	}
	if _, err := os.Stat(filepath.Join(dir, cursorDir, _floorLock)); err != nil {
		t.Errorf("the lock file: %v", err)
	}
}
