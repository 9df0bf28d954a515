//go:build linux

package sys

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func procStart(pid int) (uint64, bool) { return procStartIn("/proc", pid) }

// procStartIn is procStart with proc as the mount point of procfs.
func procStartIn(proc string, pid int) (uint64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// procfs hides other users' processes when mounted with hidepid,
		// and may not be mounted at all: a missing file is not a gone
		// process. Ask kill(2) whether the pid exists (EPERM: it does, as
		// another user's); its start time is then unknown, 0.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			if err := unix.Kill(pid, 0); err == nil || err == unix.EPERM {
				return 0, true
			}
		}
		return 0, false
	}
	return parseStat(b)
}

// parseStat returns the start time and liveness from the contents of a
// /proc/PID/stat file: "pid (comm) state ppid ... starttime ...". comm may
// hold spaces and parentheses, so fields are counted after the last ')'.
func parseStat(b []byte) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 {
		return 0, false
	}
	switch f[0][0] {
	case 'Z', 'X', 'x':
		return 0, false
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return st, true
}

func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
