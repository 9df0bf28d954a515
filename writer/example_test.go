package writer_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/appendlog/appendlog/writer"
)

// A Ring is an io.Writer, so slog's handlers write straight into it; each
// log record is one Write, hence one whole line in the output.
func ExampleNewRing_slog() {
	ring, err := writer.NewRing(os.Stdout, nil)
	if err != nil {
		panic(err)
	}
	defer ring.Close() // flushes and syncs what is still buffered

	logger := slog.New(slog.NewJSONHandler(ring, &slog.HandlerOptions{
		// Drop the time so the example's output is stable.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	logger.Info("started", "worker", 3)
	logger.Warn("slow request", "ms", 250)
	// Output:
	// {"level":"INFO","msg":"started","worker":3}
	// {"level":"WARN","msg":"slow request","ms":250}
}

// The standard log package works the same way.
func ExampleNewRing_log() {
	ring, err := writer.NewRing(os.Stdout, nil)
	if err != nil {
		panic(err)
	}
	logger := log.New(ring, "app: ", 0)
	logger.Printf("listening on %s", ":8080")
	logger.Print("ready")
	if err := ring.Close(); err != nil {
		panic(err)
	}
	// Output:
	// app: listening on :8080
	// app: ready
}

// OpenFile appends to a file; Sync makes what was written durable, Close
// writes and syncs the rest. Stats counts every record.
func ExampleOpenFile() {
	dir, err := os.MkdirTemp("", "appendlog-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.log")

	ring, err := writer.OpenFile(path, &writer.RingOptions{
		Full:        writer.Drop, // never block the program on a slow disk
		DropMarkers: true,        // say in the file where records went missing
	})
	if err != nil {
		panic(err)
	}
	logger := slog.New(slog.NewTextHandler(ring, nil))
	for i := range 3 {
		logger.Info("tick", "i", i)
	}
	if err := ring.Sync(); err != nil { // durable: fdatasync done
		panic(err)
	}
	if err := ring.Close(); err != nil {
		panic(err)
	}
	s := ring.Stats()
	fmt.Printf("records %d, written %d, dropped %d\n", s.Records, s.WrittenRecords, s.DroppedRecords)
	// Output:
	// records 3, written 3, dropped 0
}

// Exit replaces os.Exit and log.Fatal in programs that log through a Ring:
// os.Exit skips deferred calls, so the records still buffered would be
// lost. Exit closes the writers (flush, sync, join) first.
func ExampleExit() {
	ring, err := writer.OpenFile(filepath.Join(os.TempDir(), "app.log"), nil)
	if err != nil {
		log.Fatal(err) // nothing buffered yet
	}
	logger := log.New(ring, "", log.LstdFlags)

	if err := run(); err != nil {
		logger.Print("fatal: ", err)
		writer.Exit(1, ring) // instead of logger.Fatal(err)
	}
	if err := ring.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err) // the records may not all be on disk
	}
}

// Closing on a signal: stop on SIGINT/SIGTERM, then Close, so the last
// records reach the file before the process ends.
func ExampleRing_Close_signal() {
	ring, err := writer.OpenFile(filepath.Join(os.TempDir(), "app.log"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ring.Close()
	logger := slog.New(slog.NewJSONHandler(ring, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serve(ctx, logger) // returns when a signal arrives
	logger.Info("shutting down")
	// The deferred Close writes and syncs "shutting down" and the rest.
}

func run() error                                { return nil }
func serve(ctx context.Context, l *slog.Logger) {}
