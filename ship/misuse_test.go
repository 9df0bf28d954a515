package ship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

// waitFor waits, with a generous deadline, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runResult waits, with a generous deadline, for a Run started on a
// goroutine to return.
func runResult(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: Run did not return", what)
		return nil
	}
}

// TestShipCloseDuringRun: Close of a Shipper whose Run is following the
// log stops that Run as a done ctx would (it commits what Kafka acked)
// and waits for it. Before, Close closed the cursor under Run's Next,
// and Run waited for new records forever.
func TestShipCloseDuringRun(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 1000)
	o := opts(c)
	o.Follow = true
	s, err := NewKafka(l, o)
	noErr(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	waitFor(t, "1000 records shipped", func() bool { return s.Stats().Shipped == 1000 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	noErr(t, runResult(t, done, "Close during Run"))
	select {
	case err := <-closed:
		noErr(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Close did not return")
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	noErr(t, s.Close())
	infos, err := l.Cursors()
	noErr(t, err)
	if len(infos) != 1 || infos[0].Committed != 1001 {
		t.Fatalf("cursor after Close during Run: %+v, want committed 1001", infos)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 1000), 1000)
}

// TestShipRunMisuse: a second Run while one runs is refused at once (two
// Runs read one cursor: they raced, and one hung); Run on a closed
// Shipper is ErrClosed, not "cannot reach Kafka: client closed"; a nil
// ctx is an error, not a panic; Run may run again once it returned.
func TestShipRunMisuse(t *testing.T) {
	c := cluster(t, 1)
	l := openLog(t, 100)
	o := opts(c)
	o.Follow = true
	s, err := NewKafka(l, o)
	noErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "100 records shipped", func() bool { return s.Stats().Shipped == 100 })
	second := make(chan error, 1)
	go func() { second <- s.Run(context.Background()) }()
	if err := runResult(t, second, "a second Run"); err == nil || !strings.Contains(err.Error(), "another Run") {
		t.Fatalf("a second Run while one runs: %v", err)
	}
	cancel()
	noErr(t, runResult(t, done, "the first Run"))

	//lint:ignore SA1012 a nil ctx is the misuse tested
	if err := s.Run(nil); err == nil {
		t.Fatal("Run(nil) succeeded")
	}
	// Run again, on new records, after the first returned.
	appendN(t, l, 50)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() { done <- s.Run(ctx2) }()
	waitFor(t, "150 records shipped", func() bool { return s.Stats().Committed == 151 || s.Stats().Shipped == 150 })
	cancel2()
	noErr(t, runResult(t, done, "Run again"))
	noErr(t, s.Close())
	if err := s.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	exactlyOnce(t, readTopic(t, c, "src-1", 150), 150)
}

// TestShipEmptyBroker: an empty entry in Brokers (a trailing comma in a
// list) is refused: the client took it for localhost:9092 and shipped to
// whatever Kafka listens there.
func TestShipEmptyBroker(t *testing.T) {
	l := openLog(t, 1)
	for _, brokers := range [][]string{{""}, {"127.0.0.1:9092", ""}, {" "}} {
		s, err := NewKafka(l, &KafkaOptions{Brokers: brokers, Topic: "t"})
		if err == nil {
			s.Close()
			t.Fatalf("NewKafka with Brokers %q succeeded", brokers)
		}
		if !strings.Contains(err.Error(), "Brokers[") {
			t.Fatalf("NewKafka with Brokers %q: %v", brokers, err)
		}
	}
}

// TestShipLogEndingInGap: a log whose last records were lost to damage
// and cut by a forced repair ends in a recorded gap. A Run without Follow
// ships the records before it and returns; it waited for a record past
// the gap forever (appendlog ship without --follow hung).
func TestShipLogEndingInGap(t *testing.T) {
	c := cluster(t, 1)
	dir := t.TempDir()
	o := &wal.Options{SegmentSize: 64 << 10, BufferSize: 64 << 10}
	l, err := wal.Open(dir, o)
	noErr(t, err)
	// Append until a third segment is made: it holds no record yet.
	segs := func() []string {
		m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
		noErr(t, err)
		return m
	}
	for len(segs()) < 3 {
		_, err := l.Append(bytes.Repeat([]byte{'r'}, 1000))
		noErr(t, err)
		noErr(t, l.Sync(context.Background()))
	}
	next := l.NextSeq()
	noErr(t, l.Close())
	m := segs()
	if last := filepath.Base(m[2]); last != fmt.Sprintf("%020d.seg", next) {
		t.Fatalf("the last segment %s holds records (next seq %d): the log does not end in the gap", last, next)
	}
	// Damage the last record of the second segment (before its footer).
	b, err := os.ReadFile(m[1])
	noErr(t, err)
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	b[end-200] ^= 0xff
	noErr(t, os.WriteFile(m[1], b, 0o644))
	rep, err := wal.Repair(dir, true, nil)
	noErr(t, err)
	if len(rep.Gaps) != 1 || rep.Gaps[0].End != next {
		t.Fatalf("repair: gaps %+v, want one ending at %d", rep.Gaps, next)
	}
	lost := rep.Gaps[0].End - rep.Gaps[0].First

	l, err = wal.Open(dir, o)
	noErr(t, err)
	defer l.Close()
	for _, from := range []string{"log", "dir"} {
		ko := opts(c)
		ko.Cursor = "ship-" + from
		var s *Shipper
		if from == "log" {
			s, err = NewKafka(l, ko)
		} else {
			ko.Source = "src-2"
			s, err = NewKafkaFromDir(dir, nil, ko)
		}
		noErr(t, err)
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- s.Run(ctx) }()
		select {
		case err := <-done:
			noErr(t, err)
		case <-time.After(time.Minute):
			cancel()
			<-done
			t.Fatalf("from the %s: Run without Follow did not return at the gap that ends the log: %+v", from, s.Stats())
		}
		cancel()
		st := s.Stats()
		noErr(t, s.Close())
		if want := next - 1 - lost; st.Shipped != want || st.Committed != next {
			t.Fatalf("from the %s: shipped %d (want %d), committed %d (want %d)", from, st.Shipped, want, st.Committed, next)
		}
	}
}

// TestShipStreamEndingInGap is TestShipLogEndingInGap for a stream
// shipped through its group, which steps over the gap without a record:
// Run without Follow returns once the committed position reaches the
// end it started with.
func TestShipStreamEndingInGap(t *testing.T) {
	c := cluster(t, 1)
	dir := t.TempDir()
	st, err := stream.Open(dir, nil)
	noErr(t, err)
	s, err := st.Create("x", &stream.Config{SegmentSize: 64 << 10})
	noErr(t, err)
	infos, err := stream.Describe(dir)
	noErr(t, err)
	logDir := infos[0].LogDir
	rec := make([]byte, 1000)
	for {
		seq, err := s.Publish(rec)
		noErr(t, err)
		noErr(t, s.WaitDurable(context.Background(), seq))
		m, err := filepath.Glob(filepath.Join(logDir, "*.seg"))
		noErr(t, err)
		if len(m) >= 3 {
			break
		}
	}
	next := s.NextSeq()
	noErr(t, st.Close())
	m, _ := filepath.Glob(filepath.Join(logDir, "*.seg"))
	if last := filepath.Base(m[2]); last != fmt.Sprintf("%020d.seg", next) {
		t.Fatalf("the last segment %s holds records (next seq %d): the stream does not end in the gap", last, next)
	}
	p := m[1]
	b, err := os.ReadFile(p)
	noErr(t, err)
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	b[end-200] ^= 0xff
	noErr(t, os.WriteFile(p, b, 0o644))
	rep, err := wal.Repair(logDir, true, nil)
	noErr(t, err)
	if len(rep.Gaps) != 1 || rep.Gaps[0].End != next {
		t.Fatalf("repair: gaps %+v, want one ending at %d", rep.Gaps, next)
	}
	st, err = stream.Open(dir, nil)
	noErr(t, err)
	defer st.Close()
	s, err = st.Stream("x")
	noErr(t, err)
	sh, err := NewKafkaFromGroup(s, opts(c))
	noErr(t, err)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- sh.Run(ctx) }()
	select {
	case err := <-done:
		noErr(t, err)
	case <-time.After(time.Minute):
		cancel()
		<-done
		t.Fatalf("Run without Follow did not return at the gap that ends the stream: %+v", sh.Stats())
	}
	cancel()
	if st := sh.Stats(); st.Committed != next || st.Shipped != next-2 {
		t.Fatalf("shipped %d (want %d), committed %d (want %d)", st.Shipped, next-2, st.Committed, next)
	}
	noErr(t, sh.Close())
}

// TestShipGroupRetentionIsLoud: records of a stream deleted by its
// retention (not UntilAcked) before the shipper's group delivered them
// make Run fail, naming them: the group went on after them silently.
func TestShipGroupRetentionIsLoud(t *testing.T) {
	c := cluster(t, 1)
	st, err := stream.Open(t.TempDir(), nil)
	noErr(t, err)
	defer st.Close()
	s, err := st.Create("x", &stream.Config{SegmentSize: 64 << 10, Retention: stream.Retention{MaxBytes: 256 << 10}})
	noErr(t, err)
	sh, err := NewKafkaFromGroup(s, opts(c)) // the group starts at record 1
	noErr(t, err)
	noErr(t, sh.Close())
	rec := bytes.Repeat([]byte{'r'}, 1000)
	waitFor(t, "retention to delete record 1", func() bool {
		for range 100 {
			_, err := s.Publish(rec)
			noErr(t, err)
		}
		return s.Stats().FirstSeq > 1
	})
	first := s.Stats().FirstSeq
	sh, err = NewKafkaFromGroup(s, opts(c))
	noErr(t, err)
	err = sh.Run(context.Background())
	noErr(t, sh.Close())
	if err == nil || !strings.Contains(err.Error(), "deleted by its retention before they were shipped") {
		t.Fatalf("Run over records retention deleted (first is %d): %v", first, err)
	}
}

// TestShipFailureIsSticky: once Kafka refused a record for good, a later
// Run of the same Shipper returns that failure at once and sends nothing.
// It went on shipping the records after the refused one, which a restart
// would then take for proof that the refused one is in Kafka too.
func TestShipFailureIsSticky(t *testing.T) {
	c := cluster(t, 1)
	var refuse atomic.Bool
	refuse.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		return produceError(r, kerr.TopicAuthorizationFailed), nil, true
	})
	l := openLog(t, 10)
	o := opts(c)
	o.FlushTimeout = 5 * time.Second
	s, err := NewKafka(l, o)
	noErr(t, err)
	defer s.Close()
	err = s.Run(context.Background())
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Run with every record refused: %v", err)
	}
	refuse.Store(false)
	appendN(t, l, 10)
	if err2 := s.Run(context.Background()); !errors.Is(err2, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Run after a refused record: %v", err2)
	}
	if st := s.Stats(); st.Shipped != 0 || st.Committed != 1 {
		t.Fatalf("Run after a refused record shipped %d records, committed %d", st.Shipped, st.Committed)
	}
}

// TestShipNewLogSameSource: a log made anew in the directory of one
// already shipped has the same default Source, and Kafka's last record of
// that source (seq 20) names a record of the old log. Run fails saying so
// and sends nothing, whether the new log ends before seq 20 or holds a
// record 20 of its own: it skipped the new log's records up to 20 as
// shipped.
func TestShipNewLogSameSource(t *testing.T) {
	c := cluster(t, 1)
	dir := t.TempDir()
	l, err := wal.Open(dir, nil)
	noErr(t, err)
	appendN(t, l, 20)
	o := opts(c)
	o.Source = ""
	runOnce(t, l, o)
	noErr(t, l.Close())
	for _, tc := range []struct {
		n    int
		want string
	}{
		{10, "is record 20 of source"},
		{30, "record 20 of " + dir + " is not the same"},
	} {
		ents, err := os.ReadDir(dir)
		noErr(t, err)
		for _, e := range ents {
			noErr(t, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
		l, err = wal.Open(dir, nil)
		noErr(t, err)
		for i := range tc.n {
			_, err := l.Append(fmt.Appendf(nil, "new log, record %d", i+1))
			noErr(t, err)
		}
		noErr(t, l.Sync(context.Background()))
		for _, from := range []string{"log", "dir"} {
			var s *Shipper
			if from == "log" {
				s, err = NewKafka(l, o)
			} else {
				s, err = NewKafkaFromDir(dir, nil, o)
			}
			noErr(t, err)
			err = s.Run(context.Background())
			st := s.Stats()
			noErr(t, s.Close())
			if err == nil || !strings.Contains(err.Error(), tc.want) || st.Skipped != 0 || st.Committed != 1 {
				t.Fatalf("from the %s: a new log of %d records under the source of an old one: %v; %+v", from, tc.n, err, st)
			}
		}
		noErr(t, l.Close())
	}
	// The same log, its cursor moved back below what Kafka holds (a lost
	// checkpoint), resumes: its record 20 is the one in Kafka.
	l, err = wal.Open(t.TempDir(), nil)
	noErr(t, err)
	defer l.Close()
	appendN(t, l, 30)
	o = opts(c)
	o.Source = "src-again"
	runOnce(t, l, o)
	rewind(t, l, 5)
	if st := runOnce(t, l, o); st.Skipped != 26 || st.Shipped != 0 {
		t.Fatalf("a rewound cursor: %+v", st)
	}
}
