//go:build !linux

package sys

import "errors"

// MaxRSS returns the peak resident set size of this process in bytes. It is
// only implemented on Linux.
func MaxRSS() (int64, error) {
	return 0, errors.ErrUnsupported
}
