//go:build linux

package sys

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func procStart(pid int) (uint64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
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
