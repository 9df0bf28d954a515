package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// An index file holds a sealed segment's sparse index, so that a Log
// opened later positions Readers in the segment without walking its frame
// headers. It is named after its segment with the suffix .idx
// (00000000000000000001.seg.idx), written by the sealer after the
// segment is sealed, and deleted with the segment, or by a Repair that
// rebuilds the segment (its offsets no longer hold). It is only a hint: it
// is never synced, a missing or damaged one is rebuilt by walking the
// segment, and a Reader checks every frame it points at.
//
//	+---------------------+-------------+-----------+----------------------------------+-------------+
//	| magic "APNDIDX\x00" | version (4) | count (4) | count × (seq 8, offset 8, crc 4) | CRC-32C (4) |
//	+---------------------+-------------+-----------+----------------------------------+-------------+
//
// Integers are little-endian; the CRC-32C covers every byte before it.
// The first entry is the segment's first record at the end of its header
// page; sequence numbers and offsets strictly increase. An entry's crc is
// the checksum field of the frame at its offset (0 in the first entry,
// whose offset starts the data by definition): a Reader takes an entry
// only where that frame is, so that an index file of another segment, or
// of this one before its frames moved, never places it inside a record,
// even on a frame carried in a record's payload with the sequence number
// sought. Version 1 files, without crc, are not read (the segment is
// walked instead).
//
// These constants are part of the file format; they must not change.
const (
	idxSuffix     = ".idx"
	_idxMagic     = "APNDIDX\x00"
	_idxVersion   = 2
	_idxFixed     = len(_idxMagic) + 4 + 4 + 4
	_idxEntrySize = 20
	// _idxMaxEntries bounds an index file's entries (and what a decoder
	// allocates): a 1 GiB segment at one entry per _indexEvery bytes.
	_idxMaxEntries = (1 << 30) / _indexEvery
)

// encodeIndex returns the index file content for entries (seqs[i],
// offs[i], crcs[i]).
func encodeIndex(seqs []uint64, offs []int64, crcs []uint32) []byte {
	b := make([]byte, 0, _idxFixed+_idxEntrySize*len(seqs))
	b = append(b, _idxMagic...)
	b = binary.LittleEndian.AppendUint32(b, _idxVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(seqs)))
	for i := range seqs {
		b = binary.LittleEndian.AppendUint64(b, seqs[i])
		b = binary.LittleEndian.AppendUint64(b, uint64(offs[i]))
		b = binary.LittleEndian.AppendUint32(b, crcs[i])
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, _castagnoli))
}

// decodeIndex decodes an index file of a segment whose first record is
// firstSeq and whose frames end before size. It never panics.
func decodeIndex(b []byte, firstSeq uint64, size int64) (seqs []uint64, offs []int64, crcs []uint32, err error) {
	o := len(_idxMagic)
	if len(b) < _idxFixed || string(b[:o]) != _idxMagic {
		return nil, nil, nil, errors.New("not an index file")
	}
	if v := binary.LittleEndian.Uint32(b[o:]); v != _idxVersion {
		return nil, nil, nil, fmt.Errorf("version %d, want %d", v, _idxVersion)
	}
	n := binary.LittleEndian.Uint32(b[o+4:])
	if n == 0 || n > _idxMaxEntries || len(b) != _idxFixed+_idxEntrySize*int(n) {
		return nil, nil, nil, fmt.Errorf("%d bytes do not hold %d entries", len(b), n)
	}
	end := len(b) - 4
	if crc32.Checksum(b[:end], _castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return nil, nil, nil, errors.New("checksum mismatch")
	}
	seqs, offs, crcs = make([]uint64, n), make([]int64, n), make([]uint32, n)
	p := b[o+8 : end]
	for i := range seqs {
		seqs[i] = binary.LittleEndian.Uint64(p[i*_idxEntrySize:])
		u := binary.LittleEndian.Uint64(p[i*_idxEntrySize+8:])
		if u >= uint64(size) {
			return nil, nil, nil, fmt.Errorf("entry %d: offset %d past the segment's end %d", i, u, size)
		}
		offs[i] = int64(u)
		crcs[i] = binary.LittleEndian.Uint32(p[i*_idxEntrySize+16:])
		if i == 0 && (seqs[0] != firstSeq || offs[0] != headerPage) {
			return nil, nil, nil, fmt.Errorf("first entry (%d, %d) is not the segment's first record (%d, %d)", seqs[0], offs[0], firstSeq, headerPage)
		}
		if i > 0 && (seqs[i] <= seqs[i-1] || offs[i] <= offs[i-1]) {
			return nil, nil, nil, fmt.Errorf("entry %d does not follow entry %d", i, i-1)
		}
	}
	return seqs, offs, crcs, nil
}

// writeIndexFile writes the index file of sealed segment s (on the
// sealer), unless retention deleted s meanwhile. A failure only costs a
// later walk. It holds s.idx.mu while it writes, so that a deletion
// (removeIndexFile) removes the file after it or finds it not written.
func (t *segTable) writeIndexFile(s *liveSeg) error {
	x := &s.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.started || x.stuck || x.deleted {
		return nil
	}
	b := encodeIndex(x.seqs, x.offs, x.crcs)
	path := filepath.Join(t.dir, s.name+idxSuffix)
	f, err := t.fsys.OpenRegular(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeIndexFile removes the index file of segment s, which retention
// deleted, and keeps the sealer from writing it later.
func (t *segTable) removeIndexFile(s *liveSeg) {
	x := &s.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleted = true
	_ = t.fsys.Remove(filepath.Join(t.dir, s.name+idxSuffix)) // a hint, and maybe never written
}

// loadIndexFile fills the index of sealed segment s from its index file,
// if there is a valid one whose last entry names the frame there (a walk
// resumes from it). REQUIRES: s.idx.mu held, index not started, a
// reference to s held.
func (t *segTable) loadIndexFile(s *liveSeg, size int64) bool {
	f, err := t.fsys.OpenRegular(filepath.Join(t.dir, s.name+idxSuffix), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil || n > int64(_idxFixed+_idxEntrySize*_idxMaxEntries) {
		return false
	}
	b := make([]byte, n)
	if k, err := f.ReadAt(b, 0); k != len(b) && !(errors.Is(err, io.EOF) && k == len(b)) {
		return false
	}
	seqs, offs, crcs, err := decodeIndex(b, s.firstSeq, size)
	if err != nil {
		return false
	}
	k := len(seqs) - 1
	if k > 0 && !s.frameIs(offs[k], seqs[k], crcs[k]) {
		return false // another segment's index, or this one's from before its frames moved
	}
	x := &s.idx
	x.seqs, x.offs, x.crcs = seqs, offs, crcs
	x.started, x.seq, x.off = true, seqs[k], offs[k]
	return true
}
