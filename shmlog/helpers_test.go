package shmlog_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

// _childEnv holds a child process's job: "append PATH FIRSTWRITER
// GOROUTINES RECORDS SIZE FILESIZE [HOOK]".
const _childEnv = "SHMLOG_TEST_CHILD"

// job is what a child process does.
type job struct {
	path       string
	first      int // writer id of the first goroutine
	goroutines int
	records    int // per goroutine
	size       int
	fileSize   int64
	hook       string // "", "hold": reserve one record, print "held", never commit
	writers    int    // total writers, for tiny records
	start      int    // first counter (in-process only)
}

func (j job) String() string {
	return fmt.Sprintf("append %s %d %d %d %d %d %d %s", j.path, j.first, j.goroutines, j.records, j.size, j.fileSize, j.writers, j.hook)
}

func parseJob(spec string) (job, error) {
	f := strings.Fields(spec)
	if len(f) < 8 || f[0] != "append" {
		return job{}, fmt.Errorf("bad job %q", spec)
	}
	var j job
	j.path = f[1]
	var nums [6]int64
	for i := range nums {
		v, err := strconv.ParseInt(f[2+i], 10, 64)
		if err != nil {
			return job{}, fmt.Errorf("bad job %q: %v", spec, err)
		}
		nums[i] = v
	}
	j.first, j.goroutines, j.records, j.size, j.fileSize, j.writers = int(nums[0]), int(nums[1]), int(nums[2]), int(nums[3]), nums[4], int(nums[5])
	if len(f) > 8 {
		j.hook = f[8]
	}
	return j, nil
}

// child runs a job in a re-executed test binary and returns its exit code.
func child(spec string) int {
	j, err := parseJob(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l, err := shmlog.Open(j.path, &shmlog.Options{MaxFileSize: j.fileSize})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if j.hook == "hole" {
		// Claim, then stop before writing the header until killed.
		l.SetBeforeHeader(func() {
			fmt.Println("claimed")
			var b [1]byte
			os.Stdin.Read(b[:])
			select {}
		})
		l.Append(make([]byte, j.size))
		return 1
	}
	if j.hook == "stamp" {
		// Append records carrying the wall clock, 50µs apart.
		fmt.Println("open")
		p := make([]byte, j.size)
		last := time.Now()
		for range j.records {
			for time.Since(last) < 50*time.Microsecond {
			}
			last = time.Now()
			binary.LittleEndian.PutUint64(p, uint64(last.UnixNano()))
			if _, err := l.Append(p); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		l.Close()
		return 0
	}
	if j.hook == "hold" {
		r, err := l.Reserve(j.size)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("held", r.Pos())
		// Wait for the test to kill or stop and continue us; then try to
		// commit and report what happened.
		var b [1]byte
		os.Stdin.Read(b[:])
		fillRecord(r.Bytes(), j.first, 0, j.writers)
		if err := r.Commit(); err != nil {
			fmt.Println("commit:", err)
			return 3
		}
		fmt.Println("committed")
		l.Close()
		return 0
	}
	if j.hook == "cycle" {
		// Open, append and close again and again, racing the other
		// processes' appends with this one's trims.
		l.Close()
		for round := range 10 {
			l, err := shmlog.Open(j.path, nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			jj := j
			jj.records = j.records / 10
			jj.start = round * jj.records
			if err := appendAll(l, jj); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := l.Close(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	}
	fmt.Println("open")
	if err := appendAll(l, j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := l.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// appendAll runs j's goroutines on l.
func appendAll(l *shmlog.Log, j job) error {
	var wg sync.WaitGroup
	errs := make(chan error, j.goroutines)
	for g := range j.goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := j.first + g
			buf := make([]byte, j.size)
			for c := j.start; c < j.start+j.records; c++ {
				fillRecord(buf, w, uint64(c), j.writers)
				if _, err := l.Append(buf); err != nil {
					errs <- fmt.Errorf("writer %d record %d: %w", w, c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// fillRecord writes writer w's record c into p.
func fillRecord(p []byte, w int, c uint64, writers int) {
	if len(p) < payload.MinSize {
		t, err := payload.NewTags(writers)
		if err != nil {
			panic(err)
		}
		t.Encode(p, w, c)
		return
	}
	if err := payload.Encode(p, w, c); err != nil {
		panic(err)
	}
}

// runChildren runs one child per job and waits for all.
func runChildren(t *testing.T, jobs []job) {
	t.Helper()
	cmds := make([]*exec.Cmd, len(jobs))
	outs := make([]*bytes.Buffer, len(jobs))
	for i, j := range jobs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), _childEnv+"="+j.String(), "GORACE=atexit_sleep_ms=0")
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child %d (%s): %v: %s", i, jobs[i], err, outs[i])
		}
	}
}

// verify reads the whole log at path and checks every record against the
// expected per-writer counts, exactly and in order. It returns the stats.
func verify(t *testing.T, path string, size int, expect []uint64) shmlog.Stats {
	t.Helper()
	k, err := payload.NewChecker(payload.Options{Size: size, Expect: expect, Writers: len(expect)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		k.Check(r.Payload, -1, r.Pos)
		return nil
	})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	res := k.Finish()
	if err := res.Err(); err != nil {
		t.Fatalf("check: %v", err)
	}
	if st.Records != res.Expected {
		t.Fatalf("Verify counted %d records, want %d", st.Records, res.Expected)
	}
	return st
}

func counts(writers, records int) []uint64 {
	e := make([]uint64, writers)
	for i := range e {
		e[i] = uint64(records)
	}
	return e
}

func logPath(t *testing.T) string { return filepath.Join(t.TempDir(), "log") }
