package writer_test

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/appendlog/appendlog/writer"
)

// A Ring that rotates its file itself: at about 16 KiB the file is renamed
// to app-<time>.log and a new app.log begins, always between two lines;
// the three newest backups are kept, gzipped.
func ExampleRotate() {
	dir, err := os.MkdirTemp("", "rotate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ring, err := writer.OpenFile(filepath.Join(dir, "app.log"), &writer.RingOptions{
		Rotate: &writer.Rotate{MaxBytes: writer.MinRotateBytes, MaxBackups: 3, Compress: true},
	})
	if err != nil {
		log.Fatal(err)
	}
	logger := log.New(ring, "", 0)
	for i := range 5000 {
		logger.Printf("request %d served", i)
	}
	if err := ring.Close(); err != nil { // waits for the compression and pruning too
		log.Fatal(err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	backups := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "app-") && strings.HasSuffix(e.Name(), ".log.gz") {
			backups++
		}
	}
	fmt.Println("rotations:", ring.Stats().Rotations, "backups kept:", backups)
	// Output: rotations: 8 backups kept: 3
}

// Reopen after logrotate (create mode) renamed the file: a SIGHUP handler.
func ExampleRing_Reopen() {
	ring, err := writer.OpenFile(filepath.Join(os.TempDir(), "app.log"), nil)
	if err != nil {
		log.Fatal(err)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range hup {
			if err := ring.Reopen(); err != nil {
				log.Print(err)
			}
		}
	}()
	// ... the service logs through ring ...

	signal.Stop(hup)
	close(hup)
	<-done
	ring.Close()
}
