package peers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/appendlog/appendlog/writer"
)

// A writer.Ring is a zapcore.WriteSyncer as it is: no AddSync, no Lock.
// logger.Sync flushes and fdatasyncs through it.
func Example_zap() {
	dir, _ := os.MkdirTemp("", "ring-zap")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.log")
	ring, err := writer.OpenFile(path, nil)
	if err != nil {
		panic(err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "" // deterministic output for the example
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), ring, zap.InfoLevel))
	logger.Info("order accepted", zap.Int("id", 42))
	if err := logger.Sync(); err != nil {
		panic(err)
	}
	if err := ring.Close(); err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output: {"level":"info","msg":"order accepted","id":42}
}

// zerolog writes each event with one Write call: one record in the Ring.
func Example_zerolog() {
	dir, _ := os.MkdirTemp("", "ring-zerolog")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.log")
	ring, err := writer.OpenFile(path, nil)
	if err != nil {
		panic(err)
	}
	logger := zerolog.New(ring)
	logger.Info().Int("id", 42).Msg("order accepted")
	if err := ring.Close(); err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(path)
	fmt.Print(strings.TrimSpace(string(b)))
	// Output: {"level":"info","id":42,"message":"order accepted"}
}
