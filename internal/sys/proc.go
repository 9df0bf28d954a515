package sys

import "os/exec"

// ProcStart reports whether process pid is alive (it exists and is not a
// zombie) and, if so, its start time in clock ticks since boot (field 22 of
// /proc/PID/stat on Linux). A pid and its start time together name one
// process: pids are reused, start times tell the reuse apart. A start time
// of 0 means unknown: where the platform cannot tell, every pid is reported
// alive with start time 0, and so is, on Linux, a live process whose
// /proc entry cannot be read (procfs mounted with hidepid, or not mounted).
func ProcStart(pid int) (start uint64, alive bool) {
	return procStart(pid)
}

// DieWithParent arranges for the process cmd will start to be killed
// (SIGKILL) when the thread that starts it exits, so that a helper a test
// starts never outlives a test process that was killed. Where the platform
// cannot (anything but Linux), it does nothing. Call it before cmd.Start.
func DieWithParent(cmd *exec.Cmd) { dieWithParent(cmd) }
