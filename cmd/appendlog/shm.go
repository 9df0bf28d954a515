package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

// shmFlags are the flags of "appendlog shm load".
type shmFlags struct {
	file        string
	processes   int
	records     int
	size        int
	json        bool
	kill        int
	maxFileSize int64
	baseline    bool

	// Hidden: a worker process's job.
	worker   int
	phase    string
	signalAt int
	damage   bool // test hook: damage the log before verifying it
}

// shmResult is the report of "appendlog shm load"; with --json it is the
// last line of stdout.
type shmResult struct {
	Records         int64   `json:"records"` // intact records found
	Processes       int     `json:"processes"`
	Size            int     `json:"size"`
	Seconds         float64 `json:"seconds"`
	RecordsPerSec   float64 `json:"records_per_sec"`
	BaselineSeconds float64 `json:"baseline_seconds,omitempty"`
	BaselinePerSec  float64 `json:"baseline_records_per_sec"`
	Ratio           float64 `json:"ratio"`
	Killed          int     `json:"killed"`
	Lost            int64   `json:"lost"`
	HolesPadded     uint64  `json:"holes_padded"`
	Verified        bool    `json:"verified"`
	VerifyError     string  `json:"verify_error,omitempty"`
	// Error says why the run stopped before its end; empty when it
	// completed.
	Error            string `json:"error,omitempty"`
	BaselineVerified bool   `json:"baseline_verified"`
}

func newShmCmd(started *bool) *cobra.Command {
	shm := &cobra.Command{
		Use:   "shm",
		Short: "Drive shared-memory logs (package shmlog)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("missing subcommand (load or verify)")
		},
	}
	for _, c := range []*cobra.Command{newShmLoadCmd(), newShmVerifyCmd()} {
		c.Args = usageArgs(c.Args)
		c.RunE = markStarted(started, c.RunE)
		shm.AddCommand(c)
	}
	return shm
}

func newShmVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify FILE",
		Short: "Check every file and record of a shared-memory log",
		Long: `shm verify reads every file of the shared-memory log FILE (FILE,
FILE.00000001, ...) and checks the header pages and every frame's checksum,
in order. It pads over frames left unfinished by writers that are gone, as
any reader does: run it when no process is appending.

Exit status 0 means every frame checked out; 1 means damage (the message
names the file and byte offset), a frame still in progress by a live
process, or that FILE is missing or not a shared-memory log. "appendlog
verify FILE" does the same.`,
		Example: `  appendlog shm verify /tmp/shm`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return err
			}
			if args[0] == "" {
				return errors.New("empty FILE argument")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShmVerify(cmd.OutOrStdout(), args[0])
		},
	}
}

func newShmLoadCmd() *cobra.Command {
	var f shmFlags
	cmd := &cobra.Command{
		Use:   "load --file F [--processes N] [--records R] [--size S] [--json] [--kill K]",
		Short: "Append from many processes to one shared-memory log, verify it, and compare with write(2)",
		Long: `shm load starts N writer processes (this program, run again) that each
append R records of S bytes to the shared-memory log F at once, then
verifies the log: every record whole, each writer's records in order, none
missing except the last ones of writers it killed, dead writers' frames
padded. In the same run it measures the baseline: the same N processes each
doing one write(2) per record to one O_APPEND file (F.baseline, removed
afterwards). It prints both rates and their ratio; with --json the last
line of stdout is a JSON object.

--kill K SIGKILLs K writers at random points of the first half of their
run; the others go on
and the log still verifies (the killed writers' records are a prefix of
what they appended, at least up to the point they reported).

F must not exist. Exit status 1 if verification fails.`,
		Example: `  appendlog shm load --file /tmp/shm --processes 4 --records 100000 --size 128
  appendlog shm load --file /tmp/shm --processes 8 --kill 2 --json`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{_jsonVerified: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.phase != "" {
				return runShmWorker(cmd.OutOrStdout(), f)
			}
			return runShmLoad(cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.file, "file", "", "the shared-memory log to create (required)")
	fl.IntVar(&f.processes, "processes", 4, "writer processes")
	fl.IntVar(&f.records, "records", 100000, "records per process")
	sizeVar(fl, &f.size, "size", 128, "bytes per record, e.g. 1KiB")
	fl.BoolVar(&f.json, "json", false, "print the result as JSON on the last line")
	fl.IntVar(&f.kill, "kill", 0, "SIGKILL this many writers at random points")
	sizeVar(fl, &f.maxFileSize, "max-file-size", shmlog.DefaultMaxFileSize, "bytes per log file, e.g. 64MiB")
	fl.BoolVar(&f.baseline, "baseline", true, "also measure one write(2) per record to an O_APPEND file")
	fl.IntVar(&f.worker, "worker", 0, "")
	fl.StringVar(&f.phase, "phase", "", "")
	fl.IntVar(&f.signalAt, "signal-at", -1, "")
	fl.BoolVar(&f.damage, "damage", false, "")
	for _, h := range []string{"worker", "phase", "signal-at", "damage"} {
		fl.MarkHidden(h)
	}
	return cmd
}

func (f *shmFlags) validate() error {
	switch {
	case f.file == "":
		return usagef("--file is required")
	case f.processes < 1 || f.processes > 1024:
		return usagef("--processes %d: want 1 to 1024", f.processes)
	case f.records < 1:
		return usagef("--records %d: want at least 1", f.records)
	case f.maxFileSize < 1:
		return usagef("--max-file-size %d: want a size, e.g. 64MiB", f.maxFileSize)
	case f.size < 1 || int64(f.size) > f.maxFileSize/2:
		return usagef("--size %d: want 1 to half of --max-file-size", f.size)
	case f.kill < 0 || f.kill >= f.processes:
		return usagef("--kill %d: want 0 to %d (fewer than --processes)", f.kill, f.processes-1)
	case f.size < payload.MinSize && f.processes > 255:
		return usagef("--size %d: records under %d bytes tell at most 255 processes apart", f.size, payload.MinSize)
	}
	return nil
}

func runShmLoad(stdout, stderr io.Writer, f shmFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	if err := checkAbsent(f.file); err != nil {
		return usagef("--file %s; shm load creates a new log", err)
	}
	base := f.file + ".baseline"
	if f.baseline {
		// The baseline's file is written and then removed: never one
		// that was there before.
		if err := checkAbsent(base); err != nil {
			return usagef("%s; shm load writes its baseline there and removes it: move it away, or pass --baseline=false", err)
		}
	}
	// Create the log with its file size; the workers join it.
	l, err := shmlog.Open(f.file, &shmlog.Options{MaxFileSize: f.maxFileSize})
	if err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return err
	}
	res := shmResult{Processes: f.processes, Size: f.size, Killed: f.kill}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	victims := map[int]int{} // worker → record after which it is killed
	for _, w := range rng.Perm(f.processes)[:f.kill] {
		// In the first half of its run: a victim goes on appending while
		// the kill is on its way, and one killed near its end may finish
		// first, which tests nothing.
		victims[w] = rng.IntN(max(1, f.records/2))
	}
	// fail ends a run that started: with --json, the result so far, with
	// the error, is still the last line of stdout.
	fail := func(err error) error {
		if f.json {
			res.Error = err.Error()
			b, _ := json.Marshal(res)
			fmt.Fprintln(stdout, string(b))
		}
		return err
	}
	took, err := runWorkers(f, "shm", victims)
	if err != nil {
		return fail(err)
	}
	res.Seconds = took.Seconds()
	if f.damage {
		damageShm(f.file)
	}
	found, perr := checkShm(f, victims, &res)
	res.Records = found
	res.Verified = perr == nil
	if perr != nil {
		res.VerifyError = perr.Error()
	}
	ok := int64(f.processes-f.kill) * int64(f.records)
	res.RecordsPerSec = float64(found) / res.Seconds
	if f.kill == 0 {
		res.RecordsPerSec = float64(ok) / res.Seconds
	}
	fmt.Fprintf(stdout, "shmlog: %d processes × %d records of %d B: %d records in %.3fs: %.0f records/s\n",
		f.processes, f.records, f.size, found, res.Seconds, res.RecordsPerSec)
	if f.baseline {
		// Made here, exclusively, so that the file removed below is the
		// one this run made; the workers only append to it.
		bf, err := os.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fail(fmt.Errorf("create the baseline file: %w", err))
		}
		if err := bf.Close(); err != nil {
			os.Remove(base)
			return fail(fmt.Errorf("create the baseline file: %w", err))
		}
		btook, err := runWorkers(f, "baseline", nil)
		if err != nil {
			os.Remove(base)
			return fail(fmt.Errorf("baseline: %w", err))
		}
		res.BaselineSeconds = btook.Seconds()
		res.BaselinePerSec = float64(f.processes) * float64(f.records) / res.BaselineSeconds
		res.Ratio = res.RecordsPerSec / res.BaselinePerSec
		res.BaselineVerified = checkBaseline(base, f) == nil
		os.Remove(base)
		fmt.Fprintf(stdout, "write(2) per record to one O_APPEND file, same processes: %.0f records/s\n", res.BaselinePerSec)
		fmt.Fprintf(stdout, "ratio: %.2f×\n", res.Ratio)
	}
	if perr != nil {
		fmt.Fprintf(stderr, "appendlog shm load: verify %s: %v\n", f.file, perr)
	} else {
		fmt.Fprintf(stdout, "verified: %d records whole and in per-process order; %d killed, %d lost, %d holes padded\n",
			found, f.kill, res.Lost, res.HolesPadded)
	}
	if f.json {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	}
	if perr != nil {
		return &exitError{exitFailure}
	}
	return nil
}

// checkAbsent returns nil if nothing is at path, else an error that
// names path and says it exists or why it cannot be checked.
func checkAbsent(path string) error {
	switch _, err := os.Lstat(path); {
	case err == nil:
		return fmt.Errorf("%s exists", path)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s cannot be checked: %w", path, err)
	}
	return nil
}

// runWorkers runs f.processes workers of the phase, starts them at once
// once all are ready, kills the victims when they report their point, and
// returns the time from the start to the last worker's end.
func runWorkers(f shmFlags, phase string, victims map[int]int) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	type worker struct {
		cmd   *exec.Cmd
		in    io.WriteCloser
		lines *bufio.Scanner
	}
	ws := make([]worker, f.processes)
	defer func() {
		for _, w := range ws {
			if w.cmd != nil && w.cmd.ProcessState == nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
			}
		}
	}()
	for i := range ws {
		at, ok := victims[i]
		if !ok {
			at = -1
		}
		args := []string{"shm", "load", "--file", f.file, "--records", strconv.Itoa(f.records), "--size", strconv.Itoa(f.size),
			"--processes", strconv.Itoa(f.processes), "--worker", strconv.Itoa(i), "--phase", phase, "--signal-at", strconv.Itoa(at)}
		cmd := exec.Command(exe, args...)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("start worker %d: %w", i, err)
		}
		ws[i] = worker{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	}
	for i, w := range ws {
		if !w.lines.Scan() || w.lines.Text() != "ready" {
			return 0, fmt.Errorf("worker %d did not start: %q", i, w.lines.Text())
		}
	}
	start := time.Now()
	for _, w := range ws {
		io.WriteString(w.in, "go\n")
		w.in.Close()
	}
	errc := make(chan error, len(ws))
	for i, w := range ws {
		go func() {
			_, victim := victims[i]
			for w.lines.Scan() {
				if w.lines.Text() == "at" && victim {
					w.cmd.Process.Signal(syscall.SIGKILL)
				}
			}
			err := w.cmd.Wait()
			if victim {
				err = nil
			} else if err != nil {
				err = fmt.Errorf("worker %d: %w", i, err)
			}
			errc <- err
		}()
	}
	var first error
	for range ws {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return time.Since(start), first
}

// runShmWorker is one worker process: it opens the log (or the baseline
// file), says "ready", waits for "go" on stdin, appends its records, and
// says "at" after record --signal-at.
func runShmWorker(stdout io.Writer, f shmFlags) error {
	var appendRec func([]byte) error
	var closeFn func() error
	switch f.phase {
	case "shm":
		l, err := shmlog.Open(f.file, nil)
		if err != nil {
			return err
		}
		appendRec = func(p []byte) error { _, err := l.Append(p); return err }
		closeFn = l.Close
	case "baseline":
		// The parent made the file; a worker never creates one.
		fd, err := os.OpenFile(f.file+".baseline", os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		appendRec = func(p []byte) error { _, err := fd.Write(p); return err }
		closeFn = fd.Close
	default:
		return usagef("--phase %q", f.phase)
	}
	rec, stamp, err := recordStamper(f)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	for c := range f.records {
		stamp(uint64(c))
		if err := appendRec(rec); err != nil {
			return fmt.Errorf("worker %d record %d: %w", f.worker, c, err)
		}
		if c == f.signalAt {
			fmt.Fprintln(stdout, "at")
		}
	}
	return closeFn()
}

// recordStamper returns a record buffer and a function that makes it the
// worker's record c.
func recordStamper(f shmFlags) ([]byte, func(c uint64), error) {
	rec := make([]byte, f.size)
	if f.size < payload.MinSize {
		tags, err := payload.NewTags(f.processes)
		if err != nil {
			return nil, nil, err
		}
		return rec, func(c uint64) { tags.Encode(rec, f.worker, c) }, nil
	}
	if err := payload.Encode(rec, f.worker, 0); err != nil {
		return nil, nil, err
	}
	return rec, func(c uint64) { payload.Stamp(rec, f.worker, c) }, nil
}

// checkShm verifies the log: records whole, each writer's in order; the
// survivors' counts exact, each victim's at least up to its kill point.
func checkShm(f shmFlags, victims map[int]int, res *shmResult) (int64, error) {
	k, err := payload.NewChecker(payload.Options{Size: f.size, Writers: f.processes})
	if err != nil {
		return 0, err
	}
	st, verr := shmlog.Verify(f.file, func(r shmlog.Record) error {
		k.Check(r.Payload, -1, r.Pos)
		return nil
	})
	res.HolesPadded = st.Padded
	out := k.Finish()
	per := out.PerWriter
	for w := range f.processes {
		var got uint64
		if w < len(per) {
			got = per[w]
		}
		want := uint64(f.records)
		if at, ok := victims[w]; ok {
			want = uint64(at) + 1
		}
		if got < want {
			res.Lost += int64(want - got)
		}
		if _, ok := victims[w]; !ok && got > want {
			verr = errors.Join(verr, fmt.Errorf("writer %d: %d records, want %d", w, got, want))
		}
	}
	if verr == nil && out.ProblemCount > 0 {
		verr = out.Err()
	}
	if verr == nil && res.Lost > 0 {
		verr = fmt.Errorf("%d records lost", res.Lost)
	}
	return int64(out.Intact), verr
}

// checkBaseline checks the baseline file's records and count.
func checkBaseline(name string, f shmFlags) error {
	fd, err := os.Open(name)
	if err != nil {
		return err
	}
	defer fd.Close()
	expect := make([]uint64, f.processes)
	for i := range expect {
		expect[i] = uint64(f.records)
	}
	k, err := payload.NewChecker(payload.Options{Size: f.size, Expect: expect})
	if err != nil {
		return err
	}
	if _, err := io.Copy(k, bufio.NewReader(fd)); err != nil {
		return err
	}
	return k.Finish().Err()
}

// damageShm flips a byte in the first record of the log (test hook).
func damageShm(name string) {
	fd, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer fd.Close()
	var b [1]byte
	fd.ReadAt(b[:], frame.FileHeaderSize+20)
	b[0] ^= 0x20
	fd.WriteAt(b[:], frame.FileHeaderSize+20)
}
