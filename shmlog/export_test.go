package shmlog

import (
	"os"

	"github.com/appendlog/appendlog/internal/sys"
)

// HeaderSize is the size of a file's header page.
const HeaderSize = _hdrSize

// PutHeader and DecodeHeader expose the header page codec to tests.
func PutHeader(b []byte, capacity, index uint64) {
	putHeader(b, params{capacity: capacity, index: index})
}

func DecodeHeader(name string, b []byte) (capacity, index uint64, err error) {
	p, err := decodeHeader(name, b)
	return p.capacity, p.index, err
}

// SetBeforeHeader makes every claim run fn before writing its header.
func (l *Log) SetBeforeHeader(fn func()) { l.beforeHeader = fn }

// SetFdatasync makes Sync call fn in place of fdatasync(2).
func (l *Log) SetFdatasync(fn func(*os.File) error) { l.fdatasync = fn }

// LockLog takes the exclusive lock of the log's path.lock, as a roll does,
// and returns its unlock.
func (l *Log) LockLog() (unlock func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.lockLog(); err != nil {
		return nil, err
	}
	f := l.lockf
	return func() { sys.Unlock(f) }, nil
}

// SetSlotGen sets the generation of slot s, keeping its pid.
func (l *Log) SetSlotGen(s int, gen uint64) {
	st := l.hdr.slot(s, _slotState)
	st.Store(gen<<32 | uint64(uint32(st.Load())))
}

// Slot returns the index of l's slot.
func (l *Log) Slot() int { return l.slot }

// SlotFirst returns slot s's first word.
func (l *Log) SlotFirst(s int) uint64 { return l.hdr.slot(s, _slotFirst).Load() }

// SetSlotFirst sets slot s's first word, as a process of a binary that
// predates the word leaves it when it takes the slot.
func (l *Log) SetSlotFirst(s int, v uint64) { l.hdr.slot(s, _slotFirst).Store(v) }

// SetBeforeCreate makes every roll that found no next file run fn, with
// the lock of path.lock held, before it creates the file.
func (l *Log) SetBeforeCreate(fn func()) { l.beforeCreate = fn }
