package shmlog_test

import (
	"os"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/frame"
	"github.com/appendlog/appendlog/shmlog"
)

// deadMaxClaim makes a log of files with room for more than a frame's
// length field can say (more than 1 GiB of data): a claim of the largest
// record, frame.MaxPayload bytes, whose writer died before writing its
// header, followed by a committed record. The dead claim's frame is
// frame.MaxPayload+16 bytes rounded up to 8, so a single padding frame
// over it would need a body one byte longer than frame.MaxPayload. It
// returns the path and the committed record's position.
func deadMaxClaim(t *testing.T) (string, uint64) {
	t.Helper()
	if testing.Short() {
		t.Skip("maps and reads more than 1 GiB")
	}
	path := logPath(t)
	o := &shmlog.Options{MaxFileSize: shmlog.HeaderSize + 1<<30 + 8192}
	l, err := shmlog.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Reserve(frame.MaxPayload)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := l.Append([]byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	// Keep the file as it is, as after a crash: no trim.
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	r.Close()
	// The claim's header word and seq were never written.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, frame.HeaderSize), int64(shmlog.HeaderSize+res.Pos())); err != nil {
		t.Fatal(err)
	}
	return path, pos
}

// TestDeadClaimOverMaxPayloadVerify: a reader padding over a dead run
// longer than a frame can be pads it with several frames; one padding
// frame whose length overflows its 30 bits into the kind bits would read
// back as a frame of no kind, damage that stops every reader for good.
func TestDeadClaimOverMaxPayloadVerify(t *testing.T) {
	path, pos := deadMaxClaim(t)
	var got []uint64
	st, err := shmlog.Verify(path, func(r shmlog.Record) error {
		got = append(got, r.Pos)
		return nil
	})
	if err != nil || len(got) != 1 || got[0] != pos || st.Padded < 1 {
		t.Fatalf("Verify: read %#x, %+v, %v; want the record at %#x after padding", got, st, err, pos)
	}
	// The padding reads back the same way.
	if st, err := shmlog.Verify(path, nil); err != nil || st.Records != 1 || st.Padded != 0 {
		t.Fatalf("Verify again: %+v, %v; want 1 record, nothing more padded", st, err)
	}
}

// TestDeadClaimOverMaxPayloadRecover: the same run found by a recovering
// Open is padded over, not taken for damage that cuts the record after it.
func TestDeadClaimOverMaxPayloadRecover(t *testing.T) {
	path, pos := deadMaxClaim(t)
	l, err := shmlog.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := l.Recovery()
	l.Close()
	if rec.Damage != nil || rec.Padded < 1 || rec.Cut != 0 {
		t.Fatalf("Recovery %+v, want the run padded over, no damage, nothing cut", rec)
	}
	var got []uint64
	if _, err := shmlog.Verify(path, func(r shmlog.Record) error {
		got = append(got, r.Pos)
		return nil
	}); err != nil || len(got) != 1 || got[0] != pos {
		t.Fatalf("Verify after recovery: %#x, %v; want the record at %#x", got, err, pos)
	}
}

// TestMaxFileSizeLimit: positions keep a frame's data offset in 32 bits,
// so files of up to 4 GiB are taken and larger ones refused with an error
// naming the limit, before any file is touched.
func TestMaxFileSizeLimit(t *testing.T) {
	path := logPath(t) // no log there: the options are checked first
	for _, tc := range []struct {
		size int64
		ok   bool
	}{
		{1 << 32, true},
		{1<<32 - 8, true},
		{1<<32 + 8, false},
		{1 << 33, false},
	} {
		_, err := shmlog.OpenReader(path, &shmlog.Options{MaxFileSize: tc.size})
		if err == nil {
			t.Fatalf("MaxFileSize %d: OpenReader of a missing log succeeded", tc.size)
		}
		limit := strings.Contains(err.Error(), "MaxFileSize") && strings.Contains(err.Error(), "4294967296")
		if limit == tc.ok {
			t.Errorf("MaxFileSize %d: %v; want it refused: %v", tc.size, err, !tc.ok)
		}
	}
}
