package writer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// _exitChildEnv names the environment variable that makes the test binary
// run exitChild instead of the tests: the path of the log to write.
const _exitChildEnv = "APPENDLOG_WRITER_EXIT_CHILD"

// exitChild writes records through a Ring whose flusher would not write
// them for an hour, then leaves with Exit: only Exit's Close can save them.
func exitChild() {
	r, err := OpenFile(os.Getenv(_exitChildEnv), &RingOptions{FlushInterval: time.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var b []byte
	for c := range 1000 {
		b = appendRecord(b[:0], 0, c)
		if _, err := r.Write(b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	Exit(3, r)
}

func TestExitClosesWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exit.log")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), _exitChildEnv+"="+path,
		"GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0") // else a race-enabled child sleeps 1 s at exit
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child: %v, output:\n%s", err, out)
	}
	verifyRecords(t, readFile(t, path), 1, true, false, []int{1000})
}

type failCloser struct{ err error }

func (f failCloser) Close() error { return f.err }

func TestCloseAllReportsErrors(t *testing.T) {
	r, path := openRingFile(t, nil)
	mustWrite(t, r, []byte("kept\n"))
	var errw bytes.Buffer
	closeAll(&errw, []io.Closer{failCloser{errors.New("boom")}, r})
	if got := errw.String(); got != "appendlog: close on exit: boom\n" {
		t.Errorf("reported %q", got)
	}
	if got := string(readFile(t, path)); got != "kept\n" {
		t.Errorf("file %q", got)
	}
}
