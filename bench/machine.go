package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/appendlog/appendlog/internal/sys"
)

// Machine describes where the benchmark ran. Fields it could not find are
// empty or zero.
type Machine struct {
	CPU         string `json:"cpu"`
	Cores       int    `json:"cores"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"go_version"`
	// Dir is the directory the runs wrote in; FS its file system type from
	// statfs(2), refined by the mount table where it names one ("ext4"),
	// and Device the mounted device.
	Dir    string `json:"dir"`
	FS     string `json:"fs"`
	Device string `json:"device,omitempty"`
	// DirtyBackgroundBytes is the amount of dirty page cache at which the
	// kernel starts writing back in the background, from
	// vm.dirty_background_bytes or vm.dirty_background_ratio (0 if unknown).
	DirtyBackgroundBytes int64 `json:"dirty_background_bytes,omitempty"`
	// ClockReadNs is what reading the clock once costs.
	ClockReadNs float64 `json:"clock_read_ns"`
}

func describeMachine(dir string) Machine {
	m := Machine{
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		GoVersion:  runtime.Version(),
		Dir:        dir,
	}
	m.CPU = cpuModel()
	m.MemoryBytes = memTotal()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if fs, err := sys.FSType(dir); err == nil {
		m.FS = fs
	} else {
		m.FS = "unknown (" + err.Error() + ")"
	}
	if typ, dev := mountOf(dir); typ != "" {
		if m.FS == "" || strings.Contains(m.FS, "/") || strings.HasPrefix(m.FS, "unknown") {
			m.FS = typ
		}
		m.Device = dev
	}
	m.DirtyBackgroundBytes = dirtyBackground(m.MemoryBytes)
	return m
}

// cpuModel returns the CPU model name from /proc/cpuinfo, or GOARCH.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && (strings.TrimSpace(k) == "model name" || strings.TrimSpace(k) == "Model") {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// memTotal returns MemTotal from /proc/meminfo in bytes, or 0.
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// dirtyBackground returns the dirty page cache size at which background
// writeback starts, or 0 if unknown.
func dirtyBackground(mem int64) int64 {
	read := func(name string) int64 {
		b, err := os.ReadFile(name)
		if err != nil {
			return 0
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	if n := read("/proc/sys/vm/dirty_background_bytes"); n > 0 {
		return n
	}
	if r := read("/proc/sys/vm/dirty_background_ratio"); r > 0 && mem > 0 {
		return mem / 100 * r
	}
	return 0
}

// mountOf returns the file system type and device of the mount holding dir,
// from /proc/self/mountinfo, or "" if unknown.
func mountOf(dir string) (fsType, device string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", ""
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		abs = p
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", ""
	}
	best := -1
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - type source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 2 {
			continue
		}
		mp := unescapeMount(f[4])
		if !within(abs, mp) || len(mp) < best {
			continue
		}
		best = len(mp)
		fsType, device = g[0], g[1]
	}
	return fsType, device
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// defaultDir picks the directory runs write in when Config.Dir is empty:
// the first of os.TempDir(), /var/tmp and the user cache directory that is
// on a disk rather than in RAM. The note says what was chosen and why, or
// is empty when the first choice was used.
func defaultDir() (dir, note string) {
	candidates := []string{os.TempDir(), "/var/tmp"}
	if c, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, c)
	}
	var skipped []string // why each earlier candidate was passed over
	for _, d := range candidates {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			skipped = append(skipped, d+" is not a directory")
			continue
		}
		typ, _ := sys.FSType(d)
		if mt, _ := mountOf(d); mt != "" {
			typ = mt
		}
		if typ == "tmpfs" || typ == "ramfs" {
			skipped = append(skipped, fmt.Sprintf("%s is in RAM (%s)", d, typ))
			continue
		}
		if len(skipped) > 0 {
			note = fmt.Sprintf("%s; wrote in %s instead", strings.Join(skipped, ", "), d)
		}
		return d, note
	}
	return os.TempDir(), fmt.Sprintf("no on-disk temporary directory found: wrote in %s, which may be in RAM; use --dir", os.TempDir())
}
