package writer

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/appendlog/appendlog/internal/engine/clock"
	"github.com/appendlog/appendlog/internal/payload"
	"github.com/appendlog/appendlog/internal/vfs"
)

// FuzzRingModel decodes its input into a sequence of operations on a Ring
// opened by OpenFile (rotating or not, compressed or not, pruned by
// MaxBackups, MaxAge and MaxTotalBytes, blocking or dropping) and checks
// the files against a model of the package doc's promises after every
// Close: every record a Write accepted and did not drop is in exactly one
// file (a backup, the file, a file renamed away before Reopen, or a
// backup that pruning deleted), whole, once, in order per writer across
// the backups oldest first and the file; the Stats add up; every deletion
// was one the pruning rules allow, and after Close none they demand is
// missing; no file outside the log's own names is created, renamed,
// written or deleted.
//
// The input: one byte of flags, three of limits, then one byte per
// operation (and its arguments), see modelOp.
func FuzzRingModel(f *testing.F) {
	for _, s := range [][]byte{
		// No rotation: writes, Reopen after a rename, a second OpenFile.
		{0x00, 0, 0, 0, 0, 20, 5, 7, 1, 2, 30, 9, 11, 6, 3, 10, 40},
		// Rotation by size, no pruning, a lookalike planted.
		{0x01, 0, 0, 0, 9, 0, 0, 60, 3, 1, 60, 200, 10, 9, 2, 63, 17, 6},
		// MaxBackups 2, gzip, big records, a second OpenFile.
		{0x03, 2, 0, 0, 10, 0, 0, 50, 40, 9, 1, 3, 11, 0, 63, 90, 10, 7, 6, 2, 40, 3},
		// MaxBackups 1, zstd, Reopen with and without a rename, clock steps.
		{0x05, 1, 0, 0, 0, 60, 9, 7, 0, 8, 200, 1, 60, 100, 12, 7, 1, 11, 0, 40, 20},
		// MaxAge 1h with clock steps, MaxTotalBytes, gzip by Compress.
		{0x07, 0, 1, 2, 0, 63, 7, 8, 50, 1, 63, 33, 8, 120, 0, 63, 4, 11, 8, 180, 2, 63, 5},
		// Drop policy, rotation, two writers.
		{0x09, 3, 0, 0, 4, 63, 100, 4, 63, 200, 0, 63, 3, 5, 4, 40, 1},
		// Drop policy with markers: big records back to back.
		{0x29, 0, 0, 0, 4, 255, 4, 255, 4, 255, 4, 255, 4, 200, 0, 63, 9, 4, 255, 4, 255, 11, 4, 255, 4, 250, 0, 20, 1},
		// Every: an hourly schedule with clock steps, MaxTotalBytes small.
		{0x11, 0, 0, 3, 0, 30, 2, 8, 70, 0, 30, 9, 8, 70, 1, 30, 8, 9, 3, 11},
		// copytruncate: refused with ErrTruncated, then OpenFile again.
		{0x01, 0, 0, 0, 0, 40, 3, 14, 9, 0, 20, 1, 14, 5, 0, 30, 7},
		{0x00, 0, 0, 0, 0, 40, 3, 14, 9, 0, 20, 1, 14, 5, 11, 0, 30, 14, 1},
		// A directory and a link under backups' names, MaxBackups 1, gzip.
		{0x03, 1, 0, 0, 9, 12, 9, 13, 0, 63, 3, 0, 63, 9, 11, 0, 30, 2},
		// A record too large, Flush, Sync after Close of a reopened Ring.
		{0x01, 2, 3, 1, 13, 0, 20, 4, 5, 6, 11, 13, 2, 63, 250, 6, 10, 3},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runRingModel(t, data)
	})
}

// modelOp numbers the operations of FuzzRingModel's input (op byte mod
// modelOps).
const (
	opWrite        = iota // n, size: n records by writer 0
	opWrite2              // n, size: two goroutines write n records each
	opWriteA              // as opWrite
	opWriteB              // as opWrite
	opWriteBig            // size: one record of 4 to 40 KiB
	opFlush               // Flush
	opSync                // Sync
	opRenameReopen        // flags: rename the file away, then Reopen
	opClock               // minutes: advance the clock
	opPlant               // which: plant a file that is not a backup
	opRotateAgain         // as opWrite (more writes, more rotations)
	opSession             // Close, check, OpenFile again
	opReopen              // Reopen with nothing renamed
	opTooLarge            // a record larger than MaxRecord
	opTruncate            // size: truncate the file (copytruncate), write, Sync
	modelOps
)

// modelLookalikes are names beside app.log that rotation never writes:
// the Ring must never touch them.
var modelLookalikes = []string{
	"app-2020-01-01T00-00-00,000.log",        // comma before the milliseconds
	"app-2020-01-01T00-00-00,000.log.gz",     // the same, compressed
	"app-2020-01-01T00-00-00.000.log.bak",    // another suffix
	"app-2020-13-01T00-00-00.000.log",        // no such month
	"app-2020-01-01T00-00-00.00.log",         // two digits of milliseconds
	"other-2020-01-01T00-00-00.000.log",      // another log's backup
	"app-2020-01-01T00-00-00.000.log.gz.old", // not a temporary file
	"app-2020-01-01T00-00-00.000.txt",        // another extension
	"app.log.1",                              // logrotate's name
	"app-2020-01-01T00-00-00.000.log.zst.tmp.1",
	"app-2020-01-01T24-00-00.000.log", // hour 24
	"app-2020-01-01t00-00-00.000.log", // lowercase t
}

// modelRec is what the model knows of one record Write accepted.
type modelRec struct {
	seq  uint64 // order of acceptance (per writer; across writers only between ops)
	size int
}

// ringModel is the state FuzzRingModel checks the files against.
type ringModel struct {
	t    *testing.T
	dir  string
	path string
	opts RingOptions
	rot  *Rotate
	clk  *clock.Fake
	fsys *watchFS

	r       *Ring
	session struct {
		accepted, bytes uint64 // Write calls that returned len(p), nil
		renamed         bool   // a file was renamed away without a Flush first
		// truncated is one more than the seq of the first record
		// written after the file was truncated under the Ring (which
		// then fails with ErrTruncated), or 0.
		truncated uint64
	}
	// unwritten holds [from, to) seq ranges of records accepted after a
	// truncation failed their Ring: they may be in no file.
	unwritten [][2]uint64
	sticky    bool   // a session ended with a sticky error
	written   uint64 // sum of WrittenRecords over closed sessions
	dropped   uint64 // sum of DroppedRecords over closed sessions
	markers   uint64 // sum of Markers over closed sessions

	seq  uint64
	next [3]uint64 // next counter of each writer
	recs map[[2]uint64]modelRec
	// reopens holds the seq at each Reopen that followed a rename, in
	// order; renamed[i] is the file renamed away before reopens[i].
	reopens []uint64
	renamed []string
	// raced[i] is set if the file was renamed with records not yet
	// written: a rotation may then find it gone and start a new file at
	// the path, which then holds records from before Reopen i and is
	// renamed away at the next.
	raced   []bool
	planted map[string][]byte
	buf     []byte
}

func runRingModel(t *testing.T, data []byte) {
	in := modelInput{b: data}
	flags := in.byte()
	limits := [3]byte{in.byte(), in.byte(), in.byte()}
	dir := t.TempDir()
	m := &ringModel{
		t:       t,
		dir:     dir,
		path:    filepath.Join(dir, "app.log"),
		clk:     newFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		recs:    make(map[[2]uint64]modelRec),
		planted: make(map[string][]byte),
	}
	m.fsys = &watchFS{FS: vfs.OS(), m: m}
	m.opts = RingOptions{Size: 64 << 10, clock: m.clk, fsys: m.fsys}
	if flags&0x08 != 0 {
		m.opts.Full = Drop
		m.opts.DropMarkers = flags&0x20 != 0
	}
	if flags&0x01 != 0 {
		m.rot = &Rotate{
			MaxBytes:      MinRotateBytes,
			MaxBackups:    int(limits[0] % 4),
			MaxAge:        []time.Duration{0, time.Hour, 3 * time.Hour, 30 * time.Minute}[limits[1]%4],
			MaxTotalBytes: []int64{0, 40 << 10, 100 << 10, 20 << 10}[limits[2]%4],
		}
		switch flags >> 1 & 3 {
		case 1:
			m.rot.Compression = Gzip
		case 2:
			m.rot.Compression = Zstd
		case 3:
			m.rot.Compress = true
		}
		if flags&0x10 != 0 {
			m.rot.Every = time.Hour
		}
		m.opts.Rotate = m.rot
	}
	m.open()
	t.Cleanup(func() {
		if m.r != nil {
			m.r.Close()
		}
	})
	for ops := 0; !in.done() && ops < 48; ops++ {
		m.step(&in)
	}
	m.closeAndCheck()
	// One more OpenFile and Close: the pruning at open must apply MaxAge
	// to every backup left.
	m.open()
	m.closeAndCheck()
}

// modelInput reads an input byte by byte; past its end it reads zeros.
type modelInput struct {
	b []byte
	i int
}

func (in *modelInput) byte() byte {
	if in.i >= len(in.b) {
		in.i++
		return 0
	}
	in.i++
	return in.b[in.i-1]
}

func (in *modelInput) done() bool { return in.i >= len(in.b) }

func (m *ringModel) open() {
	m.t.Helper()
	m.fsys.openedAt = m.clk.Now()
	m.fsys.before = m.backupNames()
	r, err := OpenFile(m.path, &m.opts)
	if err != nil {
		m.t.Fatalf("OpenFile: %v", err)
	}
	m.r = r
	m.session.accepted, m.session.bytes, m.session.renamed, m.session.truncated = 0, 0, false, 0
}

func (m *ringModel) step(in *modelInput) {
	t := m.t
	t.Helper()
	switch op := in.byte() % modelOps; op {
	case opWrite, opWriteA, opWriteB, opRotateAgain:
		n, size := int(in.byte()%64)+1, in.byte()
		for i := range n {
			m.write(0, 27+(int(size)*37+i*101)%1200)
		}
	case opWrite2:
		n, size := int(in.byte()%64)+1, in.byte()
		var wg sync.WaitGroup
		errs := make([]error, 3)
		sizes := func(w, i int) int { return 27 + (int(size)*13+i*59+w*7)%900 }
		// The model's counters and seq are taken before the goroutines
		// start: within the op the two writers' records may come in any
		// order, but each writer's own come in order.
		base := [3]uint64{}
		for w := 1; w <= 2; w++ {
			base[w] = m.next[w]
			for i := range n {
				m.recs[[2]uint64{uint64(w), m.next[w]}] = modelRec{seq: m.seq, size: sizes(w, i)}
				m.next[w]++
			}
		}
		m.seq++
		var accepted [3]uint64
		var acceptedBytes [3]uint64
		for w := 1; w <= 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var buf []byte
				for i := range n {
					buf, _ = payload.Append(buf[:0], w, base[w]+uint64(i), sizes(w, i))
					k, err := m.r.Write(buf)
					if err != nil || k != len(buf) {
						errs[w] = fmt.Errorf("writer %d: Write = %d, %v", w, k, err)
						return
					}
					accepted[w]++
					acceptedBytes[w] += uint64(len(buf))
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		m.session.accepted += accepted[1] + accepted[2]
		m.session.bytes += acceptedBytes[1] + acceptedBytes[2]
	case opWriteBig:
		m.write(0, 4<<10+int(in.byte())*144)
	case opFlush:
		if err := m.r.Flush(context.Background()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	case opSync:
		if err := m.r.Sync(); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	case opRenameReopen:
		flags := in.byte()
		if flags&1 == 0 {
			// Without a Flush first, the flusher may find the file gone
			// when it rotates: a rotation error the doc allows.
			if err := m.r.Flush(context.Background()); err != nil {
				t.Fatalf("Flush: %v", err)
			}
		} else {
			m.session.renamed = true
		}
		name := fmt.Sprintf("app.log.r%d", len(m.renamed)+1)
		err := os.Rename(m.path, filepath.Join(m.dir, name))
		if errors.Is(err, fs.ErrNotExist) && flags&1 != 0 {
			// A rotation in progress: between its rename and its new
			// file the path names nothing. It is done by when Flush
			// returns.
			if err := m.r.Flush(context.Background()); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			err = os.Rename(m.path, filepath.Join(m.dir, name))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := m.r.Reopen(); err != nil {
			t.Fatalf("Reopen after a rename: %v", err)
		}
		m.renamed = append(m.renamed, name)
		m.reopens = append(m.reopens, m.seq)
		m.raced = append(m.raced, flags&1 != 0)
		m.seq++
	case opReopen:
		if err := m.r.Reopen(); err != nil {
			t.Fatalf("Reopen: %v", err)
		}
	case opClock:
		m.clk.Advance(time.Duration(int(in.byte())+1) * time.Minute)
	case opPlant:
		m.plant(int(in.byte()) % (len(modelLookalikes) + 2))
	case opSession:
		m.closeAndCheck()
		m.open()
	case opTruncate:
		m.truncate(27 + int(in.byte())*3)
	case opTooLarge:
		p := make([]byte, m.r.MaxRecord()+1)
		if n, err := m.r.Write(p); n != 0 || !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Write of %d bytes (MaxRecord %d) = %d, %v; want ErrTooLarge", len(p), m.r.MaxRecord(), n, err)
		}
	}
}

// truncate truncates the file under the Ring, as logrotate's copytruncate
// does, then writes a record and syncs: the Ring must refuse to write on
// at its offset, with a sticky error wrapping ErrTruncated that names the
// file, unless a rotation started a new file first. The records the
// file held leave the log (the model keeps them as pruned ones).
func (m *ringModel) truncate(size int) {
	t := m.t
	t.Helper()
	if m.session.truncated != 0 {
		return
	}
	if err := m.r.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	data := readFile(t, m.path)
	if len(data) == 0 {
		return // nothing to refuse: the Ring's offset is 0
	}
	rotations := m.r.Stats().Rotations
	if err := os.Truncate(m.path, 0); err != nil {
		t.Fatal(err)
	}
	m.fsys.mu.Lock()
	m.fsys.pruned = append(m.fsys.pruned, prunedFile{name: "app.log (truncated)", data: data})
	m.fsys.mu.Unlock()
	seq := m.seq
	m.write(0, size)
	err := m.r.Sync()
	switch {
	case err == nil:
		if m.r.Stats().Rotations == rotations {
			t.Fatalf("Sync after the file was truncated from %d bytes: nil, want ErrTruncated", len(data))
		}
	case !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), m.path):
		t.Fatalf("Sync after the file was truncated = %v, want ErrTruncated naming %s", err, m.path)
	default:
		m.session.truncated = seq + 1
		if n, err := m.r.Write([]byte("after\n")); n != 0 || !errors.Is(err, ErrTruncated) {
			t.Fatalf("Write after ErrTruncated = %d, %v", n, err)
		}
		if err := m.r.Flush(context.Background()); !errors.Is(err, ErrTruncated) {
			t.Fatalf("Flush after ErrTruncated = %v", err)
		}
		// The Ring is done for: the operations go on with the next.
		m.closeAndCheck()
		m.open()
	}
}

// write writes one record of size bytes as writer w's next.
func (m *ringModel) write(w, size int) {
	m.t.Helper()
	c := m.next[w]
	var err error
	m.buf, err = payload.Append(m.buf[:0], w, c, size)
	if err != nil {
		m.t.Fatal(err)
	}
	n, err := m.r.Write(m.buf)
	if err != nil || n != size {
		m.t.Fatalf("Write of %d bytes = %d, %v", size, n, err)
	}
	m.recs[[2]uint64{uint64(w), c}] = modelRec{seq: m.seq, size: size}
	m.seq++
	m.next[w]++
	m.session.accepted++
	m.session.bytes += uint64(size)
}

// closeAndCheck closes the Ring and checks the Stats and the directory
// against the model.
func (m *ringModel) closeAndCheck() {
	t := m.t
	t.Helper()
	r := m.r
	err := r.Close()
	m.r = nil
	// After a sticky error every call returns it, Close and the calls
	// after Close too.
	want := ErrClosed
	if m.session.truncated != 0 {
		want = ErrTruncated
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("Close after ErrTruncated = %v", err)
		}
		m.unwritten = append(m.unwritten, [2]uint64{m.session.truncated - 1, m.seq})
		m.sticky = true
	} else if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err2 := r.Close(); err2 != err {
		t.Errorf("second Close: %v, first %v", err2, err)
	}
	if n, err := r.Write([]byte("late\n")); n != 0 || !errors.Is(err, want) {
		t.Errorf("Write after Close = %d, %v; want %v", n, err, want)
	}
	if err := r.Flush(context.Background()); !errors.Is(err, want) {
		t.Errorf("Flush after Close = %v; want %v", err, want)
	}
	if err := r.Sync(); !errors.Is(err, want) {
		t.Errorf("Sync after Close = %v; want %v", err, want)
	}
	if err := r.Reopen(); !errors.Is(err, want) {
		t.Errorf("Reopen after Close = %v; want %v", err, want)
	}
	st := r.Stats()
	if st.Records != m.session.accepted || st.Bytes != m.session.bytes {
		t.Errorf("Stats: %d records, %d bytes; %d and %d accepted", st.Records, st.Bytes, m.session.accepted, m.session.bytes)
	}
	if m.session.truncated != 0 {
		// The records still buffered are lost: QueuedBytes counts them.
		if st.Records < st.WrittenRecords+st.DroppedRecords || st.QueuedBytes == 0 {
			t.Errorf("Stats after ErrTruncated: %d records, %d written, %d dropped, %d bytes queued",
				st.Records, st.WrittenRecords, st.DroppedRecords, st.QueuedBytes)
		}
	} else if st.Records != st.WrittenRecords+st.DroppedRecords || st.Bytes != st.WrittenBytes+st.DroppedBytes {
		t.Errorf("Stats after Close: %d records = %d written + %d dropped? %d bytes = %d + %d?",
			st.Records, st.WrittenRecords, st.DroppedRecords, st.Bytes, st.WrittenBytes, st.DroppedBytes)
	}
	if m.opts.Full != Drop && st.DroppedRecords != 0 {
		t.Errorf("%d records dropped by a blocking Ring", st.DroppedRecords)
	}
	if st.QueuedBytes != 0 && m.session.truncated == 0 {
		t.Errorf("%d bytes queued after Close", st.QueuedBytes)
	}
	if m.rot == nil && (st.Rotations != 0 || st.RotationErrors != 0) {
		t.Errorf("%d rotations, %d rotation errors without Rotate", st.Rotations, st.RotationErrors)
	}
	if st.RotationErrors != 0 && !m.session.renamed {
		t.Errorf("%d rotation errors", st.RotationErrors)
	}
	m.written += st.WrittenRecords
	m.dropped += st.DroppedRecords
	m.markers += st.Markers
	if !m.opts.DropMarkers && st.Markers != 0 {
		t.Errorf("%d drop markers without DropMarkers", st.Markers)
	}
	t.Logf("session: %d records (%d dropped), %d rotations, %d reopens, %d rotation errors, %d renamed, %d pruned",
		st.Records, st.DroppedRecords, st.Rotations, st.Reopens, st.RotationErrors, len(m.renamed), len(m.fsys.pruned))
	m.fsys.mu.Lock()
	for _, v := range m.fsys.violations {
		t.Error(v)
	}
	m.fsys.violations = nil
	m.fsys.mu.Unlock()
	m.checkPlanted()
	if t.Failed() {
		t.FailNow()
	}
	m.checkPruned()
	m.checkRecords()
}

// plant puts a file in the directory that is not a backup: lookalike i,
// or, past them, a directory or a symbolic link (to a file elsewhere)
// under a backup's name. Only rotation makes backups, and only regular
// files.
func (m *ringModel) plant(i int) {
	t := m.t
	t.Helper()
	var name string
	switch i - len(modelLookalikes) {
	case 0:
		name = "app-2020-01-01T00-00-00.000.log"
	case 1:
		name = "app-2020-01-02T00-00-00.000.log"
	default:
		name = modelLookalikes[i]
	}
	if _, ok := m.planted[name]; ok {
		return
	}
	content := []byte("not a backup: " + name + "\n")
	full := filepath.Join(m.dir, name)
	var err error
	switch i - len(modelLookalikes) {
	case 0:
		err = os.Mkdir(full, 0o755)
		content = nil
	case 1:
		target := filepath.Join(t.TempDir(), "elsewhere.log")
		if err := os.WriteFile(target, content, 0o644); err != nil {
			t.Fatal(err)
		}
		err = os.Symlink(target, full)
	default:
		err = os.WriteFile(full, content, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	m.planted[name] = content
}

// checkPlanted checks that every planted file is still there, unchanged:
// directories are directories, links links to a file that is unchanged.
func (m *ringModel) checkPlanted() {
	for name, want := range m.planted {
		full := filepath.Join(m.dir, name)
		fi, err := os.Lstat(full)
		if err != nil {
			m.t.Errorf("planted %s: %v", name, err)
			continue
		}
		if want == nil {
			if !fi.IsDir() {
				m.t.Errorf("planted directory %s: now %v", name, fi.Mode())
			}
			continue
		}
		got, err := os.ReadFile(full)
		if err != nil || !bytes.Equal(got, want) {
			m.t.Errorf("planted %s: %q, %v", name, got, err)
		}
	}
}

// modelBackup is a backup in the directory.
type modelBackup struct {
	name string // base name
	t    time.Time
	size int64
}

// backups returns the backups in the directory, newest first.
func (m *ringModel) backups() []modelBackup {
	m.t.Helper()
	bs, err := listBackups(m.path)
	if err != nil {
		m.t.Fatal(err)
	}
	return bs
}

// listBackups returns the backups of the log at path, newest first.
func listBackups(path string) ([]modelBackup, error) {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	var bs []modelBackup
	for _, e := range ents {
		bt, ok := backupTime(path, e.Name(), false)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		bs = append(bs, modelBackup{name: e.Name(), t: bt, size: fi.Size()})
	}
	slices.SortFunc(bs, func(x, y modelBackup) int { return -x.t.Compare(y.t) })
	return bs, nil
}

func (m *ringModel) backupNames() map[string]bool {
	names := make(map[string]bool)
	if m.rot == nil {
		return names
	}
	for _, b := range m.backups() {
		names[b.name] = true
	}
	return names
}

// checkPruned checks that, after Close, the backups left are a fixed point
// of the pruning rules: the janitor pruned after the last rotation, and
// the pruning at OpenFile saw every backup from before it at a time no
// earlier than the clock's then.
func (m *ringModel) checkPruned() {
	if m.rot == nil {
		return
	}
	bs := m.backups()
	r := m.rot
	if r.MaxBackups > 0 && len(bs) > r.MaxBackups {
		m.t.Errorf("%d backups kept, MaxBackups %d: %v", len(bs), r.MaxBackups, bs)
	}
	var total int64
	for _, b := range bs {
		total += b.size
		if r.Compression != NoCompression || r.Compress {
			if _, ok := trimCompressed(b.name); !ok {
				m.t.Errorf("backup %s left uncompressed", b.name)
			}
		}
		if r.MaxAge > 0 && m.fsys.before[b.name] && m.fsys.openedAt.Sub(b.t) > r.MaxAge {
			m.t.Errorf("backup %s was %v old when OpenFile pruned, MaxAge %v", b.name, m.fsys.openedAt.Sub(b.t), r.MaxAge)
		}
	}
	if r.MaxTotalBytes > 0 && total > r.MaxTotalBytes {
		m.t.Errorf("backups take %d bytes, MaxTotalBytes %d: %v", total, r.MaxTotalBytes, bs)
	}
}

// modelFile is a file holding records.
type modelFile struct {
	name string
	recs [][2]uint64
	data []byte
	// markers counts the drop marker lines, and dropped the drops they
	// report.
	markers, dropped uint64
}

// checkRecords checks every record in the files (and in the backups
// pruning deleted) against the records accepted.
func (m *ringModel) checkRecords() {
	t := m.t
	t.Helper()
	var chain []modelFile // backups oldest first, then the file
	if m.rot != nil {
		bs := m.backups()
		slices.Reverse(bs)
		for _, b := range bs {
			chain = append(chain, m.parse(b.name, readDecompressed(t, filepath.Join(m.dir, b.name))))
		}
	}
	chain = append(chain, m.parse("app.log", readFile(t, m.path)))
	seen := make(map[[2]uint64]string)
	var markers, dropped uint64
	count := func(f modelFile) {
		markers += f.markers
		dropped += f.dropped
		for _, k := range f.recs {
			if prev, ok := seen[k]; ok {
				t.Fatalf("record %d/%d in %s and %s", k[0], k[1], prev, f.name)
			}
			seen[k] = f.name
		}
	}
	// Each writer's records in order across the backups, oldest first,
	// and the file.
	last := [3]int64{-1, -1, -1}
	for _, f := range chain {
		count(f)
		if m.rot != nil && int64(len(f.data)) > m.rot.MaxBytes {
			longest := 0
			for _, k := range f.recs {
				longest = max(longest, m.recs[k].size)
			}
			if int64(longest) <= m.rot.MaxBytes {
				t.Errorf("%s holds %d bytes, MaxBytes %d, its longest record %d bytes", f.name, len(f.data), m.rot.MaxBytes, longest)
			}
		}
		for _, k := range f.recs {
			if int64(k[1]) <= last[k[0]] {
				t.Fatalf("%s: record %d/%d after %d/%d (backups oldest first, then the file)", f.name, k[0], k[1], k[0], last[k[0]])
			}
			last[k[0]] = int64(k[1])
		}
	}
	// Files renamed away before Reopen: records accepted after the
	// previous such Reopen and before this one.
	for i, name := range m.renamed {
		f := m.parse(name, readFile(t, filepath.Join(m.dir, name)))
		count(f)
		var lo uint64
		for j := i - 1; j >= 0; j-- {
			if !m.raced[j] {
				lo = m.reopens[j]
				break
			}
		}
		for j, k := range f.recs {
			if s := m.recs[k].seq; s < lo || s >= m.reopens[i] {
				t.Errorf("%s holds record %d/%d, accepted %s", name, k[0], k[1], map[bool]string{true: "before the previous Reopen", false: "after its Reopen"}[s < lo])
			}
			if j > 0 && f.recs[j-1][0] == k[0] && f.recs[j-1][1] >= k[1] {
				t.Errorf("%s: record %d/%d after %d/%d", name, k[0], k[1], k[0], f.recs[j-1][1])
			}
		}
	}
	m.fsys.mu.Lock()
	pruned := slices.Clone(m.fsys.pruned)
	m.fsys.mu.Unlock()
	for _, p := range pruned {
		count(m.parse(p.name+" (pruned)", p.data))
	}
	if uint64(len(seen)) != m.written {
		t.Errorf("%d records in the files, %d written (Stats)", len(seen), m.written)
	}
	// One goroutine closes, with no drop racing it: every drop is
	// reported, by a marker before the next record or at Close.
	if !m.sticky && (markers != m.markers || m.opts.DropMarkers && dropped != m.dropped) {
		t.Errorf("%d markers reporting %d drops in the files; Stats: %d markers, %d drops", markers, dropped, m.markers, m.dropped)
	}
	if m.opts.Full != Drop {
		for k, rec := range m.recs {
			if slices.ContainsFunc(m.unwritten, func(u [2]uint64) bool { return u[0] <= rec.seq && rec.seq < u[1] }) {
				continue
			}
			if _, ok := seen[k]; !ok {
				t.Fatalf("record %d/%d accepted and not dropped is in no file", k[0], k[1])
			}
		}
	}
}

// parse splits data into records, each one the model accepted, whole.
func (m *ringModel) parse(name string, data []byte) modelFile {
	t := m.t
	t.Helper()
	f := modelFile{name: name, data: data}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			t.Fatalf("%s ends inside a record: %q", name, data[:min(len(data), 40)])
		}
		line := data[:i+1]
		data = data[i+1:]
		if n, ok := parseMarker(line); ok {
			f.markers++
			f.dropped += n
			continue
		}
		w, c, err := payload.Decode(line)
		if err != nil {
			t.Fatalf("%s: %v: %q", name, err, line[:min(len(line), 40)])
		}
		k := [2]uint64{uint64(w), c}
		rec, ok := m.recs[k]
		if !ok || rec.size != len(line) {
			t.Fatalf("%s: record %d/%d of %d bytes was never written", name, w, c, len(line))
		}
		f.recs = append(f.recs, k)
	}
	return f
}

// parseMarker returns the number of drops a drop marker line reports.
func parseMarker(line []byte) (n uint64, ok bool) {
	rest, ok := bytes.CutPrefix(line, []byte("appendlog: "))
	if !ok {
		return 0, false
	}
	if _, err := fmt.Sscanf(string(rest), "%d records dropped\n", &n); err != nil || n == 0 {
		return 0, false
	}
	return n, bytes.Equal(appendMarker(nil, n), line)
}

// readDecompressed reads a backup, decompressing it by its suffix.
func readDecompressed(t testing.TB, path string) []byte {
	t.Helper()
	b, err := decompressed(path, readFile(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// decompressed returns b, the content of the file name, gunzipped or
// zstd-decoded if name says it is compressed.
func decompressed(name string, b []byte) ([]byte, error) {
	switch {
	case strings.HasSuffix(name, ".gz"):
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	case strings.HasSuffix(name, ".zst"):
		zr, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		return io.ReadAll(zr)
	}
	return b, nil
}

// watchFS is the Ring's file system in FuzzRingModel: the real one, with
// every change the Ring makes in the directory checked as it happens.
// Names the Ring may change: app.log, its backups (compressed or not) and
// their temporary compressed copies. A backup's removal is a compression's
// (its compressed copy is in place, with the same content) or a pruning's,
// which the rules must call for; a pruned backup's records are kept for
// the record check.
type watchFS struct {
	vfs.FS
	m *ringModel

	mu         sync.Mutex
	violations []string
	pruned     []prunedFile
	// openedAt is the clock at the last OpenFile, before which the
	// backups were before.
	openedAt time.Time
	before   map[string]bool
}

type prunedFile struct {
	name string
	size int64  // on disk
	data []byte // decompressed
}

// bs0time returns the time of the backup named base in bs.
func bs0time(bs []modelBackup, base string) time.Time {
	for _, b := range bs {
		if b.name == base {
			return b.t
		}
	}
	return time.Time{}
}

func (w *watchFS) violate(format string, args ...any) {
	w.mu.Lock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// own reports whether name is one of the log's files: app.log, a backup,
// or a backup's temporary compressed copy.
func (w *watchFS) own(name string) bool {
	if filepath.Dir(name) != w.m.dir {
		return false
	}
	base := filepath.Base(name)
	if base == "app.log" {
		return true
	}
	if w.m.rot == nil {
		return false
	}
	if tmp, ok := strings.CutSuffix(base, ".tmp"); ok {
		b, compressed := trimCompressed(tmp)
		_, ok := backupTime(w.m.path, b, false)
		return ok && compressed
	}
	_, ok := backupTime(w.m.path, base, false)
	return ok
}

func (w *watchFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 && !w.own(name) {
		w.violate("opened %s for writing (flags %#x)", name, flag)
	}
	return w.FS.OpenFile(name, flag, perm)
}

func (w *watchFS) OpenRegular(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 && !w.own(name) {
		w.violate("opened %s for writing (flags %#x)", name, flag)
	}
	return w.FS.OpenRegular(name, flag, perm)
}

func (w *watchFS) Rename(oldname, newname string) error {
	switch {
	case !w.own(oldname) || !w.own(newname):
		w.violate("renamed %s to %s", oldname, newname)
	case oldname == w.m.path:
		if _, err := os.Lstat(newname); err == nil {
			w.violate("rotation renamed %s over %s", oldname, newname)
		}
	case strings.HasSuffix(oldname, ".tmp"):
		if newname != strings.TrimSuffix(oldname, ".tmp") {
			w.violate("renamed %s to %s", oldname, newname)
		}
	default:
		w.violate("renamed %s to %s", oldname, newname)
	}
	return w.FS.Rename(oldname, newname)
}

func (w *watchFS) Remove(name string) error {
	base := filepath.Base(name)
	switch {
	case !w.own(name) || base == "app.log":
		w.violate("removed %s", name)
	case strings.HasSuffix(base, ".tmp"):
	default:
		w.removeBackup(name)
	}
	return w.FS.Remove(name)
}

// removeBackup checks the removal of a backup: a compressed backup's
// original, or one the pruning rules call for.
func (w *watchFS) removeBackup(name string) {
	data, err := os.ReadFile(name)
	if err != nil {
		return // the Ring's Remove will say
	}
	if _, compressed := trimCompressed(name); !compressed {
		for _, ext := range compressedExts {
			if ext == "" {
				continue
			}
			z, err := os.ReadFile(name + ext)
			if err != nil {
				continue
			}
			if d, err := decompressed(name+ext, z); err != nil || !bytes.Equal(d, data) {
				w.violate("removed %s, its compressed copy %s%s differs (%v)", name, name, ext, err)
			}
			return
		}
	}
	// Pruning: the rules must call for it, in the directory as it is now
	// (newer backups may have come since the janitor listed it, which only
	// makes the removal more due).
	base := filepath.Base(name)
	r := w.m.rot
	now := w.m.clk.Now()
	bs, err := listBackups(w.m.path)
	if err != nil {
		w.violate("pruned %s: %v", name, err)
		return
	}
	// A pass of pruning deletes newest first, so the newer backups it
	// deleted before this one count as they did when it listed them.
	w.mu.Lock()
	for _, p := range w.pruned {
		if bt, _ := backupTime(w.m.path, p.name, false); bt.After(bs0time(bs, base)) {
			bs = append(bs, modelBackup{name: p.name, t: bt, size: p.size})
		}
	}
	w.mu.Unlock()
	slices.SortFunc(bs, func(x, y modelBackup) int { return -x.t.Compare(y.t) })
	var total int64
	due := false
	for i, b := range bs {
		total += b.size
		if b.name != base {
			continue
		}
		due = r.MaxBackups > 0 && i >= r.MaxBackups ||
			r.MaxAge > 0 && now.Sub(b.t) > r.MaxAge ||
			r.MaxTotalBytes > 0 && total > r.MaxTotalBytes
		if !due {
			w.violate("pruned %s: backup %d of %d, %v old, %d bytes with the newer ones; limits %d backups, %v, %d bytes",
				base, i+1, len(bs), now.Sub(b.t), total, r.MaxBackups, r.MaxAge, r.MaxTotalBytes)
		}
	}
	d, err := decompressed(name, data)
	if err != nil {
		w.violate("pruned %s: %v", name, err)
		return
	}
	w.mu.Lock()
	w.pruned = append(w.pruned, prunedFile{name: base, size: int64(len(data)), data: d})
	w.mu.Unlock()
}
