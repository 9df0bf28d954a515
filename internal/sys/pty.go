package sys

import "os"

// OpenPTY opens a new pseudo-terminal: the master side and the terminal
// side, which a child process can take as its standard error so that it
// sees a terminal (tests of progress bars). Where there are none it
// returns an error wrapping errors.ErrUnsupported.
func OpenPTY() (master, tty *os.File, err error) { return openPTY() }
