//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package sys

import "os"

func lockWait(*os.File, bool) error { return nil }
