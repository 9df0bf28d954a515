package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion: --version prints the module version from the build info
// and exits 0.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if got, want := out.String(), "appendlog version "+version()+"\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}

func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 (go1.26.0)"},
		{debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
		}}, "(devel) 0123456789ab+dirty (go1.26.0)"},
		{debug.BuildInfo{GoVersion: "go1.26.0"}, "(devel) (go1.26.0)"},
	} {
		if got := versionOf(&tc.info); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.info.Main, got, tc.want)
		}
	}
	if !strings.Contains(version(), "go1.") {
		t.Errorf("version() = %q names no Go version", version())
	}
}
