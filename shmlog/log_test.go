package shmlog_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

func TestAppendRead(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var want [][]byte
	var pos []uint64
	for i := range 300 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, i%97)
		at, err := l.Append(p)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		want = append(want, p)
		pos = append(pos, at)
	}
	last := pos[len(pos)-1]
	if last>>32 == 0 {
		t.Fatalf("300 records did not roll a 16 KiB file: last position %#x", last)
	}
	// One claim per record, and one more per roll: the claim that found
	// the file full.
	if st := l.Stats(); st.ActiveFile != last>>32 || st.Claims != 300+st.ActiveFile ||
		st.ActiveBytes <= last&0xffffffff || st.ActiveBytes > st.Capacity || st.Padded != 0 {
		t.Fatalf("Stats %+v after 300 records ending at %#x", st, last)
	}
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range want {
		rec, ok, err := r.Next()
		if err != nil || !ok {
			t.Fatalf("Next %d: %v, %v", i, ok, err)
		}
		if rec.Pos != pos[i] || !bytes.Equal(rec.Payload, want[i]) {
			t.Fatalf("record %d: got pos %#x %q, want %#x %q", i, rec.Pos, rec.Payload, pos[i], want[i])
		}
	}
	if _, ok, err := r.Next(); ok || err != nil {
		t.Fatalf("Next past the end: %v, %v", ok, err)
	}
	// Records are frames of package frame, whose seq is the position.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		f, _, err := frame.Decode(data[shmlog.HeaderSize+int(pos[i]):])
		if err != nil || f.Kind != frame.KindRecord || f.Seq != pos[i] || !bytes.Equal(f.Payload, want[i]) {
			t.Fatalf("record %d as a frame: %v %v %#x %q", i, err, f.Kind, f.Seq, f.Payload)
		}
	}
	// A reader from a position starts there.
	r2, err := l.NewReader(pos[250])
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if rec, ok, err := r2.Next(); !ok || err != nil || rec.Pos != pos[250] {
		t.Fatalf("reader from %#x: %#x, %v, %v", pos[250], rec.Pos, ok, err)
	}
}

func TestReserveCommit(t *testing.T) {
	path := logPath(t)
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := l.Reserve(40)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	// The reserved frame holds the reader back, and the later record too.
	if _, ok, err := r.Next(); ok || err != nil {
		t.Fatalf("Next before Commit: %v, %v", ok, err)
	}
	payload.Encode(res.Bytes(), 7, 0)
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := r.Next()
	if !ok || err != nil || rec.Pos != res.Pos() {
		t.Fatalf("Next after Commit: %v, %v, %#x", ok, err, rec.Pos)
	}
	if w, c, err := payload.Decode(rec.Payload); err != nil || w != 7 || c != 0 {
		t.Fatalf("reserved record: %d %d %v", w, c, err)
	}
	if rec, ok, _ := r.Next(); !ok || string(rec.Payload) != "after" {
		t.Fatalf("second record: %q, %v", rec.Payload, ok)
	}
}

func TestGoroutines(t *testing.T) {
	const writers, records, size = 8, 2000, 48
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	// A reader follows while the writers append.
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := payload.NewChecker(payload.Options{Size: size, Expect: counts(writers, records)})
	var wg sync.WaitGroup
	wg.Add(1)
	var readErr error
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for n := 0; n < writers*records; n++ {
			if readErr = r.Wait(ctx); readErr != nil {
				return
			}
			rec, _, _ := r.Next()
			k.Check(rec.Payload, -1, rec.Pos)
		}
	}()
	if err := appendAllT(l, writers, records, size); err != nil {
		t.Error(err)
	}
	wg.Wait()
	r.Close()
	if readErr != nil {
		t.Fatal(readErr)
	}
	if err := k.Finish().Err(); err != nil {
		t.Fatalf("live reader: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st := verify(t, path, size, counts(writers, records))
	if st.Files < 2 {
		t.Fatalf("expected rolling, read %d files", st.Files)
	}
}

func appendAllT(l *shmlog.Log, writers, records, size int) error {
	return appendAll(l, job{goroutines: writers, records: records, size: size, writers: writers})
}

func TestProcesses(t *testing.T) {
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(itoa(procs), func(t *testing.T) {
			const goroutines, records, size = 3, 1500, 64
			path := logPath(t)
			var jobs []job
			for p := range procs {
				jobs = append(jobs, job{path: path, first: p * goroutines, goroutines: goroutines, records: records, size: size, fileSize: 128 << 10, writers: procs * goroutines})
			}
			runChildren(t, jobs)
			st := verify(t, path, size, counts(procs*goroutines, records))
			t.Logf("%d processes: %d records in %d files", procs, st.Records, st.Files)
		})
	}
}

func TestTinyRecords(t *testing.T) {
	const procs, goroutines, records = 3, 2, 2000
	path := logPath(t)
	var jobs []job
	for p := range procs {
		jobs = append(jobs, job{path: path, first: p * goroutines, goroutines: goroutines, records: records, size: 1, fileSize: 64 << 10, writers: procs * goroutines})
	}
	runChildren(t, jobs)
	verify(t, path, 1, counts(procs*goroutines, records))
}

func TestAllocs(t *testing.T) {
	l, err := shmlog.Open(logPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := make([]byte, 128)
	if n := testing.AllocsPerRun(1000, func() { l.Append(p) }); n != 0 {
		t.Errorf("Append: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		r, _ := l.Reserve(128)
		r.Bytes()[0] = 1
		r.Commit()
	}); n != 0 {
		t.Errorf("Reserve+Commit: %v allocs", n)
	}
}

func itoa(n int) string { return string(rune('0'+n/10%10)) + string(rune('0'+n%10)) }

func TestSync(t *testing.T) {
	l, err := shmlog.Open(logPath(t), &shmlog.Options{MaxFileSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 500 { // several files
		if _, err := l.Append(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(ctx); err != context.Canceled {
		t.Fatalf("Sync with a cancelled context: %v", err)
	}
	l.Close()
	if err := l.Sync(context.Background()); err != shmlog.ErrClosed {
		t.Fatalf("Sync after Close: %v", err)
	}
}

func TestCommitTwice(t *testing.T) {
	l, err := shmlog.Open(logPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := l.Reserve(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Commit: %v", err)
	}
	if err := (shmlog.Reservation{}).Commit(); err == nil {
		t.Fatal("Commit of a zero Reservation succeeded")
	}
}

// TestZeroReservation: every method of a zero Reservation (what Reserve
// returns with an error) answers without panicking.
func TestZeroReservation(t *testing.T) {
	l, err := shmlog.Open(logPath(t), &shmlog.Options{MaxFileSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	failed, err := l.Reserve(1 << 20)
	if !errors.Is(err, shmlog.ErrTooLarge) {
		t.Fatalf("Reserve of more than a file: %v", err)
	}
	for name, r := range map[string]shmlog.Reservation{"zero": {}, "failed Reserve": failed} {
		if p := r.Pos(); p != 0 {
			t.Errorf("%s: Pos %#x, want 0", name, p)
		}
		if b := r.Bytes(); b != nil {
			t.Errorf("%s: Bytes %d bytes, want nil", name, len(b))
		}
		if err := r.Commit(); err == nil {
			t.Errorf("%s: Commit succeeded", name)
		}
	}
}

// TestZeroLog: a Log not made by Open refuses appends as closed, not as
// records too large for its (zero) files.
func TestZeroLog(t *testing.T) {
	var l shmlog.Log
	if _, err := l.Append([]byte("x")); !errors.Is(err, shmlog.ErrClosed) {
		t.Errorf("Append on a zero Log: %v, want ErrClosed", err)
	}
	if _, err := l.Reserve(0); !errors.Is(err, shmlog.ErrClosed) {
		t.Errorf("Reserve on a zero Log: %v, want ErrClosed", err)
	}
	if err := l.Sync(context.Background()); !errors.Is(err, shmlog.ErrClosed) {
		t.Errorf("Sync on a zero Log: %v, want ErrClosed", err)
	}
	if st := l.Stats(); st != (shmlog.LogStats{}) {
		t.Errorf("Stats of a zero Log: %+v", st)
	}
	l.Close()
	if err := l.Close(); !errors.Is(err, shmlog.ErrClosed) {
		t.Errorf("second Close of a zero Log: %v, want ErrClosed", err)
	}
}

// TestTrimWithinFile: the last Close cuts the active file after its tail
// rounded up to a page, but never past the file's full size: with a data
// size that is not a multiple of the page, the rounding would grow the
// file past MaxFileSize.
func TestTrimWithinFile(t *testing.T) {
	path := logPath(t)
	const size = shmlog.HeaderSize + 4096 + 2048
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: size})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(make([]byte, 4984)); err != nil { // the tail is past the first data page
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > size {
		t.Fatalf("after the last Close the file has %d bytes (%v), more than MaxFileSize %d", fi.Size(), err, size)
	}
	if st, err := shmlog.Verify(path, nil); err != nil || st.Records != 1 {
		t.Fatalf("Verify: %+v, %v", st, err)
	}
}
