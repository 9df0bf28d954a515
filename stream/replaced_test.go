package stream

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirReplacedByFile: a stream whose directory, or log directory, was
// replaced by a file outside the store while its log was open is shut by
// the janitor's next pass, as one whose directory was removed: its log
// wrote on into unlinked files, and a Publish confirmed durable
// (WaitDurable nil) was lost.
func TestDirReplacedByFile(t *testing.T) {
	for _, which := range []string{"stream", "log"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			st := mustOpen(t, dir, &Options{IdleTimeout: -1}) // the test makes the janitor's pass
			defer st.Close()
			s, err := st.Create("s", nil)
			noErr(t, err)
			g, err := s.Group("g", nil)
			noErr(t, err)
			seq, err := s.Publish([]byte("x"))
			noErr(t, err)
			noErr(t, s.WaitDurable(context.Background(), seq))
			gone := filepath.Join(dir, _streamsDir, "s")
			if which == "log" {
				gone = filepath.Join(gone, _logDir)
			}
			noErr(t, os.RemoveAll(gone))
			noErr(t, os.WriteFile(gone, []byte("not a directory\n"), 0o644))
			s.checkDir()
			seq, err = s.Publish([]byte("y"))
			if err == nil {
				err = s.WaitDurable(context.Background(), seq)
			}
			if err == nil || !strings.Contains(err.Error(), gone) {
				t.Fatalf("Publish and WaitDurable after %s was replaced by a file = %v, want an error naming it", gone, err)
			}
			if _, err := g.Next(context.Background(), nil); err == nil || !strings.Contains(err.Error(), gone) {
				t.Fatalf("Next after %s was replaced by a file = %v, want an error naming it", gone, err)
			}
		})
	}
}
