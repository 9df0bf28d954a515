package shmlog_test

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/shmlog"
)

// killedPadder leaves, in place of record k of five committed records, what
// a process killed between the two stores of padding a dead claim leaves
// there: the frame's seq (its position) in the header's second word and a
// zero first word. A writer whose claim crosses the end of a file, a
// Reader and a recovering Open all store the seq first, then CAS the
// header word. It returns the log's path and the positions.
func killedPadder(t *testing.T, k int) (string, []uint64) {
	t.Helper()
	path := logPath(t)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pos := appendN(t, l, 0, 0, 5)
	// Keep the file untrimmed, as after a crash.
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	r.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, frame.HeaderSize+40)
	binary.LittleEndian.PutUint64(b[8:], pos[k])
	if _, err := f.WriteAt(b, int64(shmlog.HeaderSize+pos[k])); err != nil {
		t.Fatal(err)
	}
	return path, pos
}

// TestKilledPadderVerify: a reader reaching a dead claim whose padding was
// cut short by a kill pads it over and reads on; the seq word is not a
// hole of damage.
func TestKilledPadderVerify(t *testing.T) {
	path, pos := killedPadder(t, 2)
	var got []uint64
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		got = append(got, r.Pos)
		return nil
	})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := []uint64{pos[0], pos[1], pos[3], pos[4]}; st.Padded != 1 || len(got) != len(want) || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("Verify read %#x, padded %d; want %#x, 1 padded", got, st.Padded, want)
	}
}

// TestKilledPadderRecover: Open's recovery pads such a claim over and
// keeps the records committed after it; it must not take it for damage
// and cut them.
func TestKilledPadderRecover(t *testing.T) {
	path, _ := killedPadder(t, 2)
	l, err := shmlog.Open(path, &shmlog.Options{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rec := l.Recovery()
	l.Close()
	if rec.Damage != nil || rec.Padded != 1 {
		t.Fatalf("Recovery %+v, want 1 padded, no damage", rec)
	}
	st, err := shmlog.Verify(path, nil)
	if err != nil || st.Records != 4 {
		t.Fatalf("Verify after recovery: %d records, %v; want 4", st.Records, err)
	}
}

// TestKilledPadderAtFileEnd: a writer whose claim crosses the end of a
// file and is killed between storing the padding frame's seq and its
// header word leaves the same; a reader pads over it and moves on to the
// next file.
func TestKilledPadderAtFileEnd(t *testing.T) {
	path, pos := killedPadder(t, 4)
	// Record 4 is the file's last frame: move the tail past the end as the
	// crossing claim did.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], pos[4]+1<<20)
	f.WriteAt(b[:], 256)
	f.Close()
	st, err := shmlog.Verify(path, nil)
	if err != nil || st.Records != 4 || st.Padded != 1 {
		t.Fatalf("Verify: %+v, %v; want 4 records, 1 padded", st, err)
	}
}
