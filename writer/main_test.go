package writer

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(_exitChildEnv) != "" {
		exitChild()
		return
	}
	if spec := os.Getenv(_lockChildEnv); spec != "" {
		lockChild(spec)
		return
	}
	if spec := os.Getenv(_crashChildEnv); spec != "" {
		crashChild(spec)
		return
	}
	goleak.VerifyTestMain(m)
}
