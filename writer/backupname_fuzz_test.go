package writer

import (
	"testing"
	"time"
)

// FuzzBackupTime decodes the names a rotated file's directory may hold.
// A name backupTime takes for a backup (and that retention may then
// delete) must be exactly the name backupName gives for the time it
// parsed, with a compression suffix or none: anything else is some other
// file, never a backup.
func FuzzBackupTime(f *testing.F) {
	const path = "/logs/app.log"
	t0 := time.Date(2026, 11, 26, 15, 4, 5, 6e6, time.UTC)
	f.Add(backupName(path, t0)[len("/logs/"):], false)
	f.Add(backupName(path, t0)[len("/logs/"):]+".gz", false)
	f.Add(backupName(path, t0)[len("/logs/"):]+".zst", true)
	f.Add("app-2026-11-26T1-04-05.0067.log", false)
	f.Add("app-2026-11-26T15-04-05.000.log.gz.gz", false)
	f.Add("app.log", false)
	f.Add("app-.log", false)
	f.Fuzz(func(t *testing.T, name string, local bool) {
		tm, ok := backupTime(path, name, local)
		if !ok {
			return
		}
		base, _ := trimCompressed(name)
		loc := time.UTC
		if local {
			loc = time.Local
		}
		if want := backupName("app.log", tm.In(loc)); base != want {
			t.Fatalf("backupTime(%q) took it for the backup of %v, whose name is %q", name, tm, want)
		}
	})
}
