//go:build !linux

package sys

import (
	"errors"
	"os"
)

func openPTY() (master, tty *os.File, err error) { return nil, nil, errors.ErrUnsupported }
