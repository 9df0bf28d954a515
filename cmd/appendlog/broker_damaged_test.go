package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokerResumeDamagedCheckpoints: a checkpoints.json that does not
// parse stops a --resume with exit status 1 and an error that names the
// file and says it could not be read, not that it could not be recorded,
// and what to do about it. The file is left as it was.
func TestBrokerResumeDamagedCheckpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	args := []string{"broker", "--dir", dir, "--records", "200", "--publishers", "2", "--consumers", "2"}
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", code, out.String(), errb.String())
	}
	path := filepath.Join(dir, _groupMarks)
	damaged := []byte("{\"exact\": tr")
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code := run([]string{"broker", "--dir", dir, "--resume", "--records", "100"}, &out, &errb)
	if code != 1 {
		t.Fatalf("resume with a damaged %s: exit %d, want 1\n%s%s", _groupMarks, code, out.String(), errb.String())
	}
	msg := errb.String()
	for _, want := range []string{path, "read", "remove it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "record the groups' checkpoints") {
		t.Errorf("stderr blames recording the checkpoints for a file that could not be read:\n%s", msg)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, damaged) {
		t.Errorf("%s is now %q (%v), want it left as it was", path, got, err)
	}
}
