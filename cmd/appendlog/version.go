package main

import (
	"runtime"
	"runtime/debug"
)

// version returns the module version the binary was built from, as go
// install records it (v1.2.3, or a pseudo-version), "(devel)" for a build
// from a work tree, with the VCS revision when the build recorded one,
// and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (" + runtime.Version() + ")"
	}
	return versionOf(info)
}

// versionOf formats info as version does.
func versionOf(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev + modified
	}
	return v + " (" + info.GoVersion + ")"
}
