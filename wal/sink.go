package wal

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/internal/vfs"
)

// segWriter is the engine's Sink: it lays the committed byte stream into
// segment files. All its methods run on the engine's flusher goroutine,
// except the atomic fields, which any goroutine may read.
//
// It walks the frame headers as the bytes go by (they arrive in claim order,
// cut at arbitrary points) so that it knows where each record ends: segments
// are sealed only at a record boundary, the durable mark names the end of
// the last whole record, and durable sequence numbers are exact.
type segWriter struct {
	fsys    vfs.FS
	dir     string
	segSize int64
	maxRec  int

	f        vfs.File
	name     string
	firstSeq uint64 // first sequence number of the current segment
	count    uint64 // whole records in the current segment
	startPos uint64 // engine position of file offset startOff
	startOff int64

	// Frame walker state.
	frameStart uint64 // engine position of the frame being walked
	inFrame    bool   // header parsed; frameEnd valid
	frameEnd   uint64
	frameSeq   uint64
	hdr        [frame.HeaderSize]byte
	nhdr       int
	nextSeq    uint64 // sequence number after the last whole record written

	// Durable-mark bookkeeping: mark is what the last completed sync made
	// durable in this segment; it is written into the header by the next
	// sync (so the header never claims more than a completed sync covered).
	mark        frame.Mark
	markWritten frame.Mark
	markBuf     [frame.MarkSize]byte

	// durable is the sequence number after the last durable record.
	durable atomic.Uint64
	// segments counts segments created (for stats and tests).
	segments atomic.Int64
}

// fileOff returns the segment file offset of engine position pos.
func (w *segWriter) fileOff(pos uint64) int64 {
	return w.startOff + int64(pos-w.startPos)
}

// Write implements engine.Sink.
func (w *segWriter) Write(pos uint64, a, b []byte) error {
	for _, chunk := range [2][]byte{a, b} {
		for len(chunk) > 0 {
			n, rotate, err := w.walk(chunk, pos)
			if err != nil {
				return err
			}
			if _, err := w.f.WriteAt(chunk[:n], w.fileOff(pos)); err != nil {
				return fmt.Errorf("wal: write %s at %d: %w", w.name, w.fileOff(pos), err)
			}
			pos += uint64(n)
			chunk = chunk[n:]
			if rotate {
				if err := w.rotate(pos); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// walk advances the frame walker over p (at engine position pos). It returns
// how many bytes of p belong to the current segment: all of p, or the bytes
// up to the end of the record that filled the segment (rotate true).
func (w *segWriter) walk(p []byte, pos uint64) (n int, rotate bool, err error) {
	end := pos + uint64(len(p))
	at := pos
	for at < end {
		if !w.inFrame {
			k := copy(w.hdr[w.nhdr:], p[at-pos:])
			w.nhdr += k
			at += uint64(k)
			if w.nhdr < frame.HeaderSize {
				break
			}
			w.nhdr = 0
			word := binary.LittleEndian.Uint32(w.hdr[4:8])
			length := word & (1<<30 - 1)
			if frame.Kind(word>>30) != frame.KindRecord || int(length) > w.maxRec {
				// We encoded every frame ourselves: this is a bug, and
				// writing on would lay garbage into the log.
				return 0, false, fmt.Errorf("wal: internal error: bad frame at log position %d (word %#x)", w.frameStart, word)
			}
			w.frameSeq = binary.LittleEndian.Uint64(w.hdr[8:16])
			w.frameEnd = w.frameStart + frame.HeaderSize + uint64(length)
			w.inFrame = true
		}
		if w.frameEnd > end {
			break
		}
		at = w.frameEnd
		w.inFrame = false
		w.frameStart = w.frameEnd
		w.nextSeq = w.frameSeq + 1
		w.count++
		if w.fileOff(at) >= w.segSize-frame.FooterSize {
			return int(at - pos), true, nil
		}
	}
	return len(p), false, nil
}

// rotate seals the current segment at engine position pos (a record
// boundary) and starts the next one.
func (w *segWriter) rotate(pos uint64) error {
	dataEnd := w.fileOff(pos)
	var ft [frame.FooterSize]byte
	frame.PutFooter(ft[:], frame.Footer{FirstSeq: w.firstSeq, Count: w.count, DataEnd: dataEnd})
	if _, err := w.f.WriteAt(ft[:], dataEnd); err != nil {
		return fmt.Errorf("wal: seal %s: %w", w.name, err)
	}
	if err := w.f.Truncate(dataEnd + frame.FooterSize); err != nil {
		return fmt.Errorf("wal: seal %s: %w", w.name, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("wal: seal %s: fdatasync: %w", w.name, err)
	}
	// Every record of the sealed segment is durable now.
	w.durable.Store(w.nextSeq)
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", w.name, err)
	}
	w.f = nil
	f, name, err := createSegment(w.fsys, w.dir, w.nextSeq, w.segSize)
	if err != nil {
		return err
	}
	w.segments.Add(1)
	w.f, w.name = f, name
	w.firstSeq, w.count = w.nextSeq, 0
	w.startPos, w.startOff = pos, headerPage
	w.mark, w.markWritten = frame.Mark{}, frame.Mark{}
	return nil
}

// Sync implements engine.Sink: it writes the mark of the previous sync into
// the header, then fdatasyncs the segment.
func (w *segWriter) Sync() error {
	if w.mark != w.markWritten {
		frame.PutMark(w.markBuf[:], w.mark)
		if _, err := w.f.WriteAt(w.markBuf[:], frame.MarkOffset); err != nil {
			return fmt.Errorf("wal: write mark %s: %w", w.name, err)
		}
		w.markWritten = w.mark
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("wal: fdatasync %s: %w", w.name, err)
	}
	// Only whole records count: frameStart is the end of the last one.
	w.mark = frame.Mark{DurableEnd: w.fileOff(w.frameStart), NextSeq: w.nextSeq}
	w.durable.Store(w.nextSeq)
	return nil
}

// closeFile writes the final mark (everything written is durable after the
// engine's last sync), syncs it and closes the file. Called after the
// engine has stopped.
func (w *segWriter) closeFile(synced bool) error {
	if w.f == nil {
		return nil
	}
	var err error
	if synced && w.mark != w.markWritten {
		frame.PutMark(w.markBuf[:], w.mark)
		if _, err = w.f.WriteAt(w.markBuf[:], frame.MarkOffset); err == nil {
			err = w.f.Sync()
		}
		if err != nil {
			err = fmt.Errorf("wal: write final mark %s: %w", w.name, err)
		}
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: close %s: %w", w.name, cerr)
	}
	w.f = nil
	return err
}
