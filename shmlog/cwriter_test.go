package shmlog_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/shmlog"
)

// buildCWriter compiles testdata/cwriter.c with the system C compiler.
func buildCWriter(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the C writer uses Linux futex(2) and /proc")
	}
	var cc string
	for _, name := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		t.Skip("no C compiler (cc, gcc or clang) on PATH")
	}
	out := filepath.Join(t.TempDir(), "cwriter")
	if b, err := exec.Command(cc, "-O2", "-std=c11", "-Wall", "-o", out, "testdata/cwriter.c").CombinedOutput(); err != nil {
		t.Fatalf("%s testdata/cwriter.c: %v\n%s", cc, err, b)
	}
	return out
}

// TestCWriter appends from two C processes and two Go processes to one
// log at once, rolling small files: every record of each is there, whole
// and in order.
func TestCWriter(t *testing.T) {
	const records, size = 3000, 64
	bin := buildCWriter(t)
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for w := range 2 {
		cmd := exec.Command(bin, path, strconv.Itoa(w), strconv.Itoa(records), strconv.Itoa(size))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	runChildren(t, []job{
		{path: path, first: 0, goroutines: 2, records: records, size: size, fileSize: 64 << 10, writers: 4},
		{path: path, first: 2, goroutines: 2, records: records, size: size, fileSize: 64 << 10, writers: 4},
	})
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("C writer %d: %v: %s", i, err, outs[i])
		}
	}
	k, err := payload.NewChecker(payload.Options{Size: size, Expect: counts(4, records)})
	if err != nil {
		t.Fatal(err)
	}
	var cnext [2]uint64
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		if r.Payload[0] != 'c' {
			k.Check(r.Payload, -1, r.Pos)
			return nil
		}
		var w int
		var c uint64
		if _, err := fmt.Sscanf(string(r.Payload[:18]), "c%04x %012x", &w, &c); err != nil || w > 1 {
			return fmt.Errorf("C record at %#x: %q: %v", r.Pos, r.Payload, err)
		}
		want := append([]byte(fmt.Sprintf("c%04x %012x", w, c)), bytes.Repeat([]byte("."), size-19)...)
		if !bytes.Equal(r.Payload, append(want, '\n')) || c != cnext[w] {
			return fmt.Errorf("C record at %#x: %q, want counter %d", r.Pos, r.Payload, cnext[w])
		}
		cnext[w]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Finish().Err(); err != nil {
		t.Fatalf("Go records: %v", err)
	}
	if cnext != [2]uint64{records, records} {
		t.Fatalf("C records: %v, want %d each", cnext, records)
	}
	if st.Files < 3 {
		t.Fatalf("read %d files: the writers did not roll", st.Files)
	}
	t.Logf("%d records in %d files", st.Records, st.Files)
}
