package shmlog

import (
	"fmt"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/sys"
)

// Recovery says what Open did to a log that no other process had open.
type Recovery struct {
	// Padded counts the unfinished frames it padded over (their writers
	// are gone).
	Padded int
	// Damage, if not nil, is the first frame that did not decode (a torn
	// write of a power cut, or corruption): a *CorruptError naming the
	// file and offset. Everything from there on was cut.
	Damage error
	// Cut counts the non-zero bytes it zeroed after the end of the valid
	// frames (a torn tail, or stale claims), in 8-byte words.
	Cut int64
}

// Recovery returns what Open recovered, if it was the only process with the
// log open; the zero Recovery otherwise.
func (l *Log) Recovery() Recovery { return l.recovery }

// recoverFile makes the active file f appendable again after every process
// that had it open is gone: it walks the frames from the start, pads over
// unfinished frames, stops at the first frame that does not decode, zeroes
// every non-zero word after the last valid frame (to the end of the file,
// unless a clean Close trimmed it) and sets the tail there. Only frames
// after the last valid one are cut; a damaged frame in the middle cuts the
// rest of the file, as the wal cuts a torn tail.
//
// REQUIRES: no other process has the log open; the exclusive lock of
// path.lock.
func recoverFile(f *mfile, capacity uint64) Recovery {
	var rec Recovery
	word := func(o uint64) uint64 { return sys.Uint64At(f.m, _hdrSize+int(o)).Load() }
	tail := min(f.tail.Load(), capacity)
	damage := func(off uint64, format string, args ...any) {
		rec.Damage = corrupt(f.name, int64(_hdrSize+off), fmt.Errorf("%w: "+format, append([]any{ErrFrame}, args...)...))
	}
	off := uint64(0)
scan:
	for capacity-off >= frame.HeaderSize {
		pos := f.idx<<32 | off
		at := _hdrSize + int(off)
		w := word(off)
		if w == 0 {
			x := deadClaimEnd(word, off, pos, tail)
			if x >= tail {
				break // zeros up to the tail: claims whose writers died, and the end
			}
			if x-off < frame.HeaderSize {
				damage(off, "%d-byte hole", x-off)
				break
			}
			for off < x {
				size := padFrame(x - off)
				padOver(f, off, 0, size-frame.HeaderSize)
				rec.Padded++
				off += size
			}
			continue
		}
		n := (w >> 32) & _lenMask
		size := frameSize(int(n))
		if off+size > capacity {
			damage(off, "%d-byte frame runs past the end of the file", size)
			break
		}
		switch w >> _kindShift {
		case 0:
			if !slotOK(w) {
				damage(off, "in-progress word %#x names no slot", w)
				break scan
			}
			padOver(f, off, w, n)
			rec.Padded++
		case _kindRecord:
			p := f.m[at+frame.HeaderSize : at+frame.HeaderSize+int(n)]
			if recordWord(p, pos) != w {
				damage(off, "%w", frame.ErrChecksum)
				break scan
			}
		case _kindPadding:
			if paddingWord(n, pos) != w {
				damage(off, "padding: %w", frame.ErrChecksum)
				break scan
			}
		default:
			damage(off, "%w", frame.ErrKind)
			break scan
		}
		off += size
	}
	limit := capacity
	if f.trimmed {
		limit = max(tail, off) // a clean Close cut the file after the tail
	}
	for o := off; o+8 <= limit; o += 8 {
		if word(o) != 0 {
			sys.Uint64At(f.m, _hdrSize+int(o)).Store(0)
			rec.Cut += 8
		}
	}
	f.tail.Store(off)
	return rec
}

// padOver turns the frame at off, whose first word is w, into a padding
// frame with an n-byte body.
func padOver(f *mfile, off, w, n uint64) {
	pos := f.idx<<32 | off
	at := _hdrSize + int(off)
	putSeq(f.m[at+8:], pos)
	sys.Uint64At(f.m, at).CompareAndSwap(w, paddingWord(n, pos))
}
