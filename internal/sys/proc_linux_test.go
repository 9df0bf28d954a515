//go:build linux

package sys

import (
	"os"
	"os/exec"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in    string
		start uint64
		alive bool
	}{
		{"42 (a b) c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 19 20", 777, true},
		{"42 (x) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 19 20", 0, false},
		{"42 (x) R 1 2 3", 0, false},
		{"no paren", 0, false},
		{"42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -1", 0, false},
	} {
		st, ok := parseStat([]byte(tc.in))
		if st != tc.start || ok != tc.alive {
			t.Errorf("parseStat(%q) = %d, %v; want %d, %v", tc.in, st, ok, tc.start, tc.alive)
		}
	}
}

func TestProcStart(t *testing.T) {
	st, ok := ProcStart(os.Getpid())
	if !ok || st == 0 {
		t.Fatalf("ProcStart(self) = %d, %v", st, ok)
	}
	if st2, _ := ProcStart(os.Getpid()); st2 != st {
		t.Fatalf("start time changed: %d then %d", st, st2)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	if _, ok := ProcStart(cmd.Process.Pid); ok {
		t.Errorf("reaped child %d reported alive", cmd.Process.Pid)
	}
	if _, ok := ProcStart(0); ok {
		t.Error("pid 0 reported alive")
	}
}

func TestUint64At(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "m")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	m, err := Mmap(f, 0, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	defer Munmap(m)
	Uint64At(m, 8).Store(0x0102030405060708)
	if m[8] != 8 || m[15] != 1 {
		t.Fatalf("word at 8 stored as % x", m[8:16])
	}
	for _, off := range []int{-8, 4090, 4, 4096} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Uint64At(%d) did not panic", off)
				}
			}()
			Uint64At(m, off)
		}()
	}
}

// TestProcStartHidden: a process whose /proc entry is missing (procfs
// mounted with hidepid hides other users' processes) is alive with an
// unknown start time, 0, if the pid exists; a pid that does not is gone.
func TestProcStartHidden(t *testing.T) {
	empty := t.TempDir()
	if st, ok := procStartIn(empty, os.Getpid()); !ok || st != 0 {
		t.Errorf("procStartIn(empty, self) = %d, %v; want 0, true", st, ok)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	if _, ok := procStartIn(empty, cmd.Process.Pid); ok {
		t.Errorf("reaped child %d reported alive", cmd.Process.Pid)
	}
}
