package sys

// ProcStart reports whether process pid is alive (it exists and is not a
// zombie) and, if so, its start time in clock ticks since boot (field 22 of
// /proc/PID/stat on Linux). A pid and its start time together name one
// process: pids are reused, start times tell the reuse apart. Where the
// platform cannot tell, every pid is reported alive with start time 0.
func ProcStart(pid int) (start uint64, alive bool) {
	return procStart(pid)
}
