package shmlog

// SetAlive replaces how l and the Readers it makes tell whether a process
// lives.
func (l *Log) SetAlive(alive func(pid int, start uint64) bool) { l.alive = alive }

// Slot returns the slot l registered in.
func (l *Log) Slot() int { return l.slot }

// Capacity returns the data bytes of each file.
func (l *Log) Capacity() uint64 { return l.capacity }

// HeaderSize is the size of a file's header page.
const HeaderSize = _hdrSize

// PutHeader and DecodeHeader expose the header page codec to tests.
func PutHeader(b []byte, capacity, index uint64) { putHeader(b, params{capacity, index}) }

func DecodeHeader(name string, b []byte) (capacity, index uint64, err error) {
	p, err := decodeHeader(name, b)
	return p.capacity, p.index, err
}

// FileName returns the name of file idx of the log at path.
func FileName(path string, idx uint64) string { return fileName(path, idx) }

// SetBeforeHeader makes every claim run fn before writing its header.
func (l *Log) SetBeforeHeader(fn func()) { l.beforeHeader = fn }
