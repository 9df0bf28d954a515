//go:build linux

package sys

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFlockHolderParsesProcLocks(t *testing.T) {
	const table = `1: POSIX  ADVISORY  WRITE 700 fd:01:42 0 EOF
2: OFDLCK ADVISORY  WRITE -1 fd:01:42 0 EOF
3: FLOCK  ADVISORY  WRITE 0 fd:01:42 0 EOF
4: FLOCK  ADVISORY  WRITE 801 fd:01:4242 0 EOF
5: FLOCK  ADVISORY  WRITE 802 fd:02:42 0 EOF
6: FLOCK  ADVISORY  WRITE 803 fe:01:42 0 EOF
7: FLOCK  ADVISORY  WRITE 1234 fd:01:42 0 EOF
7: -> FLOCK  ADVISORY  WRITE 999 fd:01:42 0 EOF
8: FLOCK  ADVISORY  WRITE 555 00:1f:42 0 EOF
`
	cases := []struct {
		name         string
		major, minor uint32
		ino          uint64
		pid          int
		ok           bool
	}{
		// POSIX and OFD locks are not flock's; pid 0 is another namespace's.
		{"holder", 0xfd, 1, 42, 1234, true},
		{"other inode", 0xfd, 1, 4242, 801, true},
		{"hex minor", 0, 0x1f, 42, 555, true},
		{"no lock", 0xfd, 1, 7, 0, false},
		{"other device", 0xfd, 3, 42, 0, false},
	}
	for _, c := range cases {
		pid, ok := flockHolder([]byte(table), c.major, c.minor, c.ino)
		if pid != c.pid || ok != c.ok {
			t.Errorf("%s: flockHolder = %d, %v; want %d, %v", c.name, pid, ok, c.pid, c.ok)
		}
	}
	for _, bad := range []string{"", "garbage\n", "1: FLOCK ADVISORY WRITE x fd:01:42 0 EOF\n", "1: FLOCK ADVISORY WRITE 5 fd:01 0 EOF\n", "1: FLOCK ADVISORY WRITE 5 zz:01:42 0 EOF\n"} {
		if pid, ok := flockHolder([]byte(bad), 0xfd, 1, 42); ok {
			t.Errorf("flockHolder(%q) = %d, true", bad, pid)
		}
	}
}

// TestLockHolderFindsThisProcess: a lock taken through one open file is
// found through another open file of the same inode, with this pid.
func TestLockHolderFindsThisProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held")
	holder, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if pid, ok := LockHolder(other); ok {
		t.Fatalf("unlocked file: LockHolder = %d, true", pid)
	}
	if err := TryLock(holder); err != nil {
		t.Fatal(err)
	}
	if pid, ok := LockHolder(other); !ok || pid != os.Getpid() {
		t.Errorf("LockHolder = %d, %v; want %d, true", pid, ok, os.Getpid())
	}
	if err := Unlock(holder); err != nil {
		t.Fatal(err)
	}
	if pid, ok := LockHolder(other); ok {
		t.Errorf("after Unlock: LockHolder = %d, true", pid)
	}
	other.Close()
	if pid, ok := LockHolder(other); ok {
		t.Errorf("closed file: LockHolder = %d, true", pid)
	}
}
