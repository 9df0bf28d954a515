package shmlog_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(_childEnv); spec != "" {
		os.Exit(child(spec))
	}
	goleak.VerifyTestMain(m)
}
