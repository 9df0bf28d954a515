package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/wal"
)

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"load", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"load", "extra"}, "extra"},
		{[]string{"load", "--records", "many"}, "--records"},
		{[]string{"load", "--records", "-1"}, "--records must not be negative"},
		{[]string{"load", "--size", "26"}, "--size must be at least 27"},
		{[]string{"load", "--size", "300000000"}, "--size must be at most"},
		{[]string{"load", "--writers", "0"}, "--writers must be between"},
		{[]string{"load", "--sync", "sometimes"}, `--sync must be never, interval, batch or always, got "sometimes"`},
		{[]string{"load", "--sync-every", "0s"}, "--sync-every must be positive"},
		// --sync-every with a sync mode that has no period: the log would
		// not sync as asked.
		{[]string{"load", "--sync-every", "5ms"}, "--sync-every is the period of --sync interval; --sync batch does not sync on a timer"},
		{[]string{"load", "--sync", "never", "--sync-every", "5ms"}, "--sync never does not sync on a timer"},
		// An empty --dir (an unset variable in a script) ran in a
		// temporary directory, removed at the end.
		{[]string{"load", "--dir", "", "--records", "10"}, "--dir: empty name"},
		{[]string{"broker", "--dir", "", "--records", "10"}, "--dir: empty name"},
		{[]string{"load", "--sync-every", "soon"}, "--sync-every"},
		{[]string{"load", "--segment-size", "-5"}, `invalid argument "-5" for "--segment-size" flag: negative size`},
		{[]string{"load", "--segment-size", "100"}, "SegmentSize 100"},
		{[]string{"verify"}, "missing log directory argument"},
		{[]string{"verify", dir, dir}, "want one log directory, got 2 arguments"},
		{[]string{"verify", ""}, "empty log directory argument"},
		{[]string{"verify", "--bogus", dir}, "unknown flag: --bogus"},
		{[]string{"verify", "--payloads=maybe", dir}, "--payloads"},
		{[]string{"dump"}, "missing log directory argument"},
		{[]string{"dump", "--from", "-1", dir}, "--from"},
		{[]string{"dump", "--from", "x", dir}, "--from"},
		{[]string{"dump", "--bogus", dir}, "unknown flag: --bogus"},
		{[]string{"repair"}, "missing log directory argument"},
		{[]string{"repair", "--bogus", dir}, "unknown flag: --bogus"},
		{[]string{"repair", "-f", dir}, "unknown shorthand flag: 'f'"},
		// help with a topic that names no command.
		{[]string{"help", "frob"}, `unknown help topic "frob"`},
		{[]string{"help", "verify", "extra"}, `unknown help topic "verify extra"`},
		{[]string{"help", "shm", "frob"}, `unknown help topic "shm frob"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runInProcess(tt.args...)
			checkNoCrash(t, r)
			expect(t, r, exitUsage, tt.want, "--help")
			if r.stdout != "" {
				t.Fatalf("usage error printed to stdout:\n%s", r)
			}
		})
	}
	// The same through the binary, for a few of them.
	for _, args := range [][]string{{"frob"}, {"verify", "--bogus", dir}, {"load", "--size", "1"}, {"dump"}} {
		expect(t, cli(t, args...), exitUsage)
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range []string{"load", "verify", "dump", "repair"} {
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}} {
			r := runInProcess(args...)
			checkNoCrash(t, r)
			expect(t, r, exitOK, "Usage:", "appendlog "+cmd)
		}
	}
	expect(t, runInProcess("--help"), exitOK, "Exit status: 0", "load", "verify", "dump", "repair")
	expect(t, runInProcess("help"), exitOK, "Exit status: 0", "load", "verify", "dump", "repair")
	expect(t, runInProcess("help", "shm", "load"), exitOK, "Usage:", "appendlog shm load", "--processes")
	expect(t, runInProcess("help", "help"), exitOK, "Usage:", "appendlog help")
	expect(t, cli(t, "verify", "--help"), exitOK, "Exit status", "--payloads")
	expect(t, cli(t, "load", "--help"), exitOK, "MiB = 2^20 bytes", "always")
}

// loadJSON runs load with args plus --json and returns its JSON result.
func loadJSON(t testing.TB, args ...string) map[string]any {
	t.Helper()
	r := cli(t, append([]string{"load", "--json"}, args...)...)
	expect(t, r, exitOK, "records/s", "MB/s", "MiB/s", "MB = 10^6 bytes", "MiB = 2^20 bytes")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	var res map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last stdout line is not JSON: %v\n%s", err, r)
	}
	return res
}

func TestLoadVerifyDump(t *testing.T) {
	const size = 64
	for _, tt := range []struct {
		sync    string
		records int
	}{
		{"never", 20000},
		{"interval", 20000},
		{"batch", 20000},
		{"always", 3000},
	} {
		t.Run("sync="+tt.sync, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			res := loadJSON(t, "--dir", dir, "--records", strconv.Itoa(tt.records), "--size", strconv.Itoa(size),
				"--writers", "4", "--sync", tt.sync)
			want := map[string]any{
				"records": float64(tt.records), "bytes": float64(tt.records * size),
				"writers": 4.0, "size": float64(size), "sync": tt.sync, "dir": dir,
				"first_seq": 1.0, "last_seq": float64(tt.records), "durable_seq": float64(tt.records),
			}
			for k, v := range want {
				if res[k] != v {
					t.Errorf("JSON %s = %v (%T), want %v", k, res[k], res[k], v)
				}
			}
			for _, k := range []string{"seconds", "records_per_sec", "mb_per_sec", "mib_per_sec"} {
				if v, ok := res[k].(float64); !ok || v <= 0 {
					t.Errorf("JSON %s = %v, want a positive number", k, res[k])
				}
			}
			if rps, s := res["records_per_sec"].(float64), res["seconds"].(float64); rps*s < float64(tt.records)*0.99 || rps*s > float64(tt.records)*1.01 {
				t.Errorf("records_per_sec × seconds = %v, want %d", rps*s, tt.records)
			}
			if mbps, s := res["mb_per_sec"].(float64), res["seconds"].(float64); mbps*s*1e6 < float64(tt.records*size)*0.99 {
				t.Errorf("mb_per_sec × seconds = %v MB, want %v", mbps*s, float64(tt.records*size)/1e6)
			}

			expect(t, cli(t, "verify", "--payloads", dir), exitOK, "clean", fmt.Sprintf("%d records", tt.records),
				fmt.Sprintf("All %d payloads check out: 4 writers", tt.records))
			r := cli(t, "dump", "--count", dir)
			expect(t, r, exitOK)
			if got := strings.TrimSpace(r.stdout); got != strconv.Itoa(tt.records) {
				t.Fatalf("dump --count printed %q, want %d", got, tt.records)
			}
			r = cli(t, "dump", "--count", "--from", strconv.Itoa(tt.records-9), dir)
			if got := strings.TrimSpace(r.stdout); got != "10" {
				t.Fatalf("dump --count --from printed %q, want 10", got)
			}
			r = cli(t, "dump", "--from", strconv.Itoa(tt.records-1), dir)
			expect(t, r, exitOK)
			lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], strconv.Itoa(tt.records-1)+"\t") ||
				!strings.HasPrefix(lines[1], strconv.Itoa(tt.records)+"\t") || len(lines[1]) != len(strconv.Itoa(tt.records))+1+2*size {
				t.Fatalf("dump --from printed unexpected lines:\n%s", r)
			}

			// A second run appends to the same log, and verify --payloads
			// takes the restarted counters as a second run.
			res = loadJSON(t, "--dir", dir, "--records", "100", "--size", strconv.Itoa(size), "--sync", tt.sync)
			if res["first_seq"] != float64(tt.records+1) {
				t.Fatalf("second load first_seq = %v, want %d", res["first_seq"], tt.records+1)
			}
			expect(t, cli(t, "verify", "--payloads", dir), exitOK, fmt.Sprintf("%d records", tt.records+100), "counter restarts")
		})
	}
}

func TestLoadTempDir(t *testing.T) {
	res := loadJSON(t, "--records", "1000", "--writers", "2")
	dir, _ := res["dir"].(string)
	if dir == "" || res["kept"] != false {
		t.Fatalf("dir = %q, kept = %v; want a temporary directory, not kept", dir, res["kept"])
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temporary directory %s not removed: %v", dir, err)
	}

	res = loadJSON(t, "--records", "1000", "--writers", "2", "--keep")
	dir, _ = res["dir"].(string)
	if dir == "" || res["kept"] != true {
		t.Fatalf("dir = %q, kept = %v; want a kept temporary directory", dir, res["kept"])
	}
	defer os.RemoveAll(dir)
	expect(t, cli(t, "verify", "--payloads", dir), exitOK, "1000 records")
}

func TestLoadInProcess(t *testing.T) {
	// The binary covers load under the race detector only when the test
	// does; this run covers it in the test process, with --acks.
	dir := filepath.Join(t.TempDir(), "log")
	r := runInProcess("load", "--dir", dir, "--records", "5000", "--writers", "5", "--size", "27", "--sync", "always", "--acks", "--json")
	checkNoCrash(t, r)
	expect(t, r, exitOK, "durable 5000\n")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	var last uint64
	for _, l := range lines[:len(lines)-1] {
		n, err := strconv.ParseUint(strings.TrimPrefix(l, "durable "), 10, 64)
		if err != nil || !strings.HasPrefix(l, "durable ") || n < last {
			t.Fatalf("bad ack line %q after %d\n%s", l, last, r)
		}
		last = n
	}
	if last != 5000 {
		t.Fatalf("last ack %d, want 5000", last)
	}
	expect(t, cli(t, "verify", "--payloads", dir), exitOK, "5000 records", "5 writers")
}

func TestVerifyPayloadsCatchesFlippedByte(t *testing.T) {
	const size, records = 100, 2000
	dir := filepath.Join(t.TempDir(), "log")
	loadJSON(t, "--dir", dir, "--records", strconv.Itoa(records), "--size", strconv.Itoa(size), "--sync", "never")
	segs := segments(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	// Flip a filler byte of record 10 and re-encode its frame, so that
	// the frame is valid and only the payload check can tell.
	const seq = 10
	path := filepath.Join(dir, segs[0])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := frame.FileHeaderSize + (seq-1)*(frame.HeaderSize+size)
	fr := b[off : off+frame.HeaderSize+size]
	if got := frame.Encode(make([]byte, len(fr)), seq, fr[frame.HeaderSize:]); got != len(fr) {
		t.Fatalf("frame size %d, want %d", got, len(fr))
	}
	fr[frame.HeaderSize+40] ^= 0x20
	frame.Encode(fr, seq, fr[frame.HeaderSize:])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	expect(t, cli(t, "verify", dir), exitOK, "clean", "2000 records")
	expect(t, cli(t, "verify", "--payloads", dir), exitFailure, "seq 10:", "payload filler mismatch", "byte 40 of 100")
}

func TestDumpFormats(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	l, err := wal.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := []string{"hello world", "tab\there", "\xff\x00\x01", "", "héllo ✓", "line\n", "\x7f"}
	for _, rec := range recs {
		if _, err := l.Append([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "dump", dir)
	expect(t, r, exitOK)
	want := "1\thello world\n2\t7461620968657265\n3\tff0001\n4\t\n5\théllo ✓\n6\t6c696e650a\n7\t7f\n"
	if r.stdout != want {
		t.Fatalf("dump printed\n%q\nwant\n%q", r.stdout, want)
	}
	r = cli(t, "dump", "--hex", "--from", "5", dir)
	if want := "5\t68c3a96c6c6f20e29c93\n6\t6c696e650a\n7\t7f\n"; r.stdout != want {
		t.Fatalf("dump --hex --from 5 printed %q, want %q", r.stdout, want)
	}
	r = cli(t, "dump", "--from", "100", dir)
	expect(t, r, exitOK)
	if r.stdout != "" {
		t.Fatalf("dump --from past the end printed %q", r.stdout)
	}
	r = cli(t, "dump", "--count", "--from", "0", dir)
	if strings.TrimSpace(r.stdout) != "7" {
		t.Fatalf("dump --count --from 0 printed %q, want 7", r.stdout)
	}
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"", true}, {"abc XYZ 123 !~", true}, {"héllo ✓ 日本", true},
		{"a\tb", false}, {"a\nb", false}, {"\x00", false}, {"\x7f", false},
		{"\xff", false}, {"\xe2\x9c", false}, {"\u200b", false}, {"\u0085", false},
	} {
		if got := printable([]byte(tt.in)); got != tt.want {
			t.Errorf("printable(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// fullWriter fails every write, as standard output on a full disk does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestOutputLost: a command whose output cannot be written fails with exit
// status 1 naming the error, also where it prints a summary or a report
// without checking the write (stat, verify, repair, help): exit status 0
// would tell a script its report is there.
func TestOutputLost(t *testing.T) {
	d := filepath.Join(t.TempDir(), "log")
	smallLog(t, d, 20)
	file := filepath.Join(t.TempDir(), "shm")
	shmAppend(t, file, 0, 10)
	for _, args := range [][]string{
		{"stat", d}, {"stat", "--json", d}, {"verify", d}, {"repair", d}, {"dump", d}, {"dump", "--count", d},
		{"tail", d}, {"verify", file}, {"shm", "verify", file}, {"dump", file}, {"tail", file}, {"stat", "--help"},
	} {
		var stderr bytes.Buffer
		r := result{args: args, code: run(args, fullWriter{}, &stderr)}
		r.stderr = stderr.String()
		checkNoCrash(t, r)
		expect(t, r, exitFailure, "no space left on device")
	}
}
