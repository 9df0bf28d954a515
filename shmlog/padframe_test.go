package shmlog

import (
	"testing"

	"github.com/appendlog/appendlog/frame"
)

// TestPadFrame: the padding frames padFrame cuts a dead run into tile it
// exactly, each a multiple of 8 bytes with a body a frame's length field
// can say, for runs up to a whole file of the largest size.
func TestPadFrame(t *testing.T) {
	for _, r := range []uint64{
		16, 24, 4096,
		frame.HeaderSize + frame.MaxPayload&^7,
		_maxPadFrame - 8, _maxPadFrame, _maxPadFrame + 8, _maxPadFrame + 16, _maxPadFrame + 24,
		2*_maxPadFrame - 8, 2 * _maxPadFrame, 2*_maxPadFrame + 8,
		maxCapacity - 16, maxCapacity,
	} {
		frames := 0
		for o := uint64(0); o < r; frames++ {
			size := padFrame(r - o)
			if size < frame.HeaderSize || size%_align != 0 || size-frame.HeaderSize > frame.MaxPayload || size > r-o {
				t.Fatalf("run of %d bytes: at %d a padding frame of %d bytes", r, o, size)
			}
			o += size
		}
		if want := (r + _maxPadFrame - 1) / _maxPadFrame; frames > int(want)+1 {
			t.Errorf("run of %d bytes: %d padding frames, want at most %d", r, frames, want+1)
		}
	}
}
