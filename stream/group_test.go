package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// rec returns the record of publisher p's i-th publish.
func rec(p, i int) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, uint64(p))
	binary.LittleEndian.PutUint64(b[8:], uint64(i))
	return b
}

// markAcked marks seqs acked and returns how many were not before: a
// record that expired while a member held it goes to another member, and
// both may ack it, but it counts once toward the records acked.
func markAcked(acked map[uint64]bool, seqs []uint64) int64 {
	var n int64
	for _, seq := range seqs {
		if !acked[seq] {
			acked[seq] = true
			n++
		}
	}
	return n
}

// TestGroupDelivery: groups of 1, 4 and 20 members under concurrent
// publishing. Members ack in random order, nack some records and leave
// some to expire: every record is delivered until it is acked, acked
// exactly once, and the committed position ends past the last record.
func TestGroupDelivery(t *testing.T) {
	for _, members := range []int{1, 4, 20} {
		t.Run(fmt.Sprintf("members=%d", members), func(t *testing.T) {
			const publishers, perPub = 4, 500
			const total = publishers * perPub
			st := mustOpen(t, t.TempDir(), nil)
			defer st.Close()
			s, err := st.Create("s", &Config{Sync: wal.SyncNever})
			noErr(t, err)
			g, err := s.Group("g", &GroupOptions{AckWait: 50 * time.Millisecond, MaxAckPending: 256})
			noErr(t, err)

			var pubs sync.WaitGroup
			for p := range publishers {
				pubs.Add(1)
				go func() {
					defer pubs.Done()
					for i := range perPub {
						if _, err := s.Publish(rec(p, i)); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}

			var (
				mu         sync.Mutex
				deliveries = make(map[uint64][]int) // seq -> Delivery of each
				data       = make(map[uint64]string)
				acked      = make(map[uint64]bool)
				held       []uint64 // delivered, to be acked later, out of order
			)
			var ackedN atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			for m := range members {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(m), 7))
					var buf []byte
					for ackedN.Load() < total {
						msg, err := g.Next(ctx, buf)
						if err != nil {
							if !errors.Is(err, context.Canceled) {
								t.Error(err)
							}
							return
						}
						buf = msg.Data
						mu.Lock()
						if d, ok := data[msg.Seq]; ok && d != string(msg.Data) {
							t.Errorf("record %d redelivered with other data", msg.Seq)
						}
						data[msg.Seq] = string(msg.Data)
						if acked[msg.Seq] {
							t.Errorf("record %d delivered after it was acked", msg.Seq)
						}
						deliveries[msg.Seq] = append(deliveries[msg.Seq], msg.Delivery)
						var toAck []uint64
						var fresh int64
						switch r := rng.IntN(10); {
						case r == 0 && msg.Delivery < 3:
							// Leave it to expire.
						case r == 1 && msg.Delivery < 3:
							mu.Unlock()
							noErr(t, g.Nack(msg.Seq))
							continue
						default:
							held = append(held, msg.Seq)
							if len(held) >= 8 || rng.IntN(4) == 0 {
								rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
								toAck, held = held, nil
								fresh = markAcked(acked, toAck)
							}
						}
						mu.Unlock()
						for _, seq := range toAck {
							if err := g.Ack(seq); err != nil {
								t.Error(err)
							}
						}
						ackedN.Add(fresh)
					}
					cancel() // release the members still waiting
				}()
			}
			// Members that hold records but wait in Next would hold them
			// forever: ack what is held whenever progress stalls.
			stop := make(chan struct{})
			var flusher sync.WaitGroup
			flusher.Add(1)
			go func() {
				defer flusher.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					mu.Lock()
					toAck := held
					held = nil
					fresh := markAcked(acked, toAck)
					mu.Unlock()
					for _, seq := range toAck {
						noErr(t, g.Ack(seq))
					}
					ackedN.Add(fresh)
					if ackedN.Load() >= total {
						cancel() // the members wait in Next for records that will not come
					}
				}
			}()
			pubs.Wait()
			wg.Wait()
			close(stop)
			flusher.Wait()

			if len(deliveries) != total {
				t.Fatalf("%d records delivered, want %d", len(deliveries), total)
			}
			redelivered := 0
			for seq := uint64(1); seq <= total; seq++ {
				ds := deliveries[seq]
				for i, d := range ds {
					if d != i+1 {
						t.Fatalf("record %d deliveries numbered %v", seq, ds)
					}
				}
				redelivered += len(ds) - 1
				if !acked[seq] {
					t.Fatalf("record %d never acked", seq)
				}
			}
			if redelivered == 0 {
				t.Fatal("no record was redelivered: nacks and expiry were not exercised")
			}
			stats := g.Stats()
			if stats.Acked != total || stats.Committed != total+1 || stats.Delivered != total || stats.Redelivered != uint64(redelivered) || stats.Pending != 0 {
				t.Fatalf("Stats = %+v; want %d acked, committed %d, %d redelivered", stats, total, total+1, redelivered)
			}
			var bytes uint64
			for _, d := range data {
				bytes += uint64(len(d))
			}
			if len(data) != total || stats.ConsumedBytes != bytes {
				t.Fatalf("Stats.ConsumedBytes = %d, want %d (the first deliveries' data)", stats.ConsumedBytes, bytes)
			}
			// Each publisher's records were published in order.
			last := make([]int, publishers)
			for p := range last {
				last[p] = -1
			}
			for seq := uint64(1); seq <= total; seq++ {
				b := []byte(data[seq])
				p, i := int(binary.LittleEndian.Uint64(b)), int(binary.LittleEndian.Uint64(b[8:]))
				if i != last[p]+1 {
					t.Fatalf("publisher %d record %d at seq %d after its record %d", p, i, seq, last[p])
				}
				last[p] = i
			}
			noErr(t, g.Close())
		})
	}
}

// TestOrderedConsumer: a one-member group that acks everything gets every
// record once, in stream order, while publishing goes on.
func TestOrderedConsumer(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{Sync: wal.SyncNever})
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	const n = 5000
	go func() {
		for i := range n {
			if _, err := s.Publish(rec(0, i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var buf []byte
	for i := range n {
		m, err := g.Next(context.Background(), buf)
		noErr(t, err)
		buf = m.Data
		if m.Seq != uint64(i+1) || binary.LittleEndian.Uint64(m.Data[8:]) != uint64(i) || m.Delivery != 1 {
			t.Fatalf("delivery %d = seq %d record %d (delivery %d)", i, m.Seq, binary.LittleEndian.Uint64(m.Data[8:]), m.Delivery)
		}
		noErr(t, g.Ack(m.Seq))
	}
	if s := g.Stats(); s.LagRecords != 0 || s.Committed != n+1 {
		t.Fatalf("Stats at the end = %+v", s)
	}
}

// TestAckWaitNeverEarly: a record left unacked goes out again no sooner
// than AckWait after its delivery (its deadline is set by the group's
// timer after the delivery), and not much later; OldestUnacked grows with
// the wait. The deliveries are spread over the timer's periods.
func TestAckWaitNeverEarly(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{Sync: wal.SyncNever})
	noErr(t, err)
	const n, wait = 12, 60 * time.Millisecond
	for i := range n {
		_, err := s.Publish(rec(0, i))
		noErr(t, err)
	}
	g, err := s.Group("g", &GroupOptions{AckWait: wait})
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// One record first, to watch OldestUnacked grow.
	before := time.Now()
	m, err := g.Next(ctx, nil)
	noErr(t, err)
	delivered := map[uint64]time.Time{m.Seq: time.Now()} // after the delivery: a bound on the safe side
	// OldestUnacked counts from the timer's first pass after the delivery:
	// never more than the real wait, and growing with it.
	for {
		st, age := g.Stats(), time.Since(before)
		if st.Pending != 1 || st.OldestUnacked > age {
			t.Fatalf("Stats %v after a delivery = %+v, want 1 pending and OldestUnacked at most that", age, st)
		}
		if st.OldestUnacked >= wait/4 {
			break
		}
		if age > 5*time.Second {
			t.Fatalf("OldestUnacked %v after %v", st.OldestUnacked, age)
		}
		time.Sleep(time.Millisecond)
	}
	// Every record delivered twice, the second time acked; a machine slow
	// enough may redeliver some before the last first delivery.
	for again := 0; again < n; {
		m, err := g.Next(ctx, nil)
		noErr(t, err)
		switch m.Delivery {
		case 1:
			delivered[m.Seq] = time.Now()
			time.Sleep(time.Duration(len(delivered)%4) * wait / 16)
		case 2:
			since := time.Since(delivered[m.Seq])
			if since < wait {
				t.Fatalf("record %d delivered again %v after its first delivery, want no sooner than AckWait %v", m.Seq, since, wait)
			}
			if since > wait+2*wait/4+2*time.Second { // seconds of slack for a loaded machine
				t.Fatalf("record %d delivered again %v after its first delivery, AckWait %v", m.Seq, since, wait)
			}
			noErr(t, g.Ack(m.Seq))
			again++
		default:
			t.Fatalf("record %d: delivery %d", m.Seq, m.Delivery)
		}
	}
	if len(delivered) != n {
		t.Fatalf("%d records delivered, want %d", len(delivered), n)
	}
}

// TestMaxDeliverAndAckErrors: a record nacked MaxDeliver times dies (it is
// acked, counted and reported); acks of records not delivered are errors;
// Next returns when its context ends or the group closes.
func TestMaxDeliverAndAckErrors(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	var deadSeq, deadN atomic.Int64
	g, err := s.Group("g", &GroupOptions{MaxDeliver: 3, OnDead: func(seq uint64, n int) {
		deadSeq.Store(int64(seq))
		deadN.Store(int64(n))
	}})
	noErr(t, err)
	ctx := context.Background()
	for range 2 {
		_, err := s.Publish([]byte("x"))
		noErr(t, err)
	}
	if err := g.Ack(1); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("Ack before delivery = %v, want ErrNotDelivered", err)
	}
	for want := 1; want <= 3; want++ {
		m, err := g.Next(ctx, nil)
		noErr(t, err)
		if m.Seq != 1 || m.Delivery != want {
			t.Fatalf("delivery %d = %+v", want, m)
		}
		noErr(t, g.Nack(1))
	}
	if deadSeq.Load() != 1 || deadN.Load() != 3 || g.Stats().Dead != 1 {
		t.Fatalf("after 3 nacks with MaxDeliver 3: OnDead(%d, %d), Stats %+v", deadSeq.Load(), deadN.Load(), g.Stats())
	}
	if err := g.Nack(1); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("Nack of a dead record = %v, want ErrNotDelivered", err)
	}
	m, err := g.Next(ctx, nil)
	noErr(t, err)
	if m.Seq != 2 {
		t.Fatalf("after the dead record, got %+v", m)
	}
	noErr(t, g.Ack(2))
	noErr(t, g.Ack(2)) // twice is fine
	if g.Committed() != 3 {
		t.Fatalf("Committed = %d, want 3", g.Committed())
	}
	if err := g.Ack(3); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("Ack of an unpublished record = %v, want ErrNotDelivered", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := g.Next(tctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on a drained stream = %v, want DeadlineExceeded", err)
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if _, err := g.Next(nil, nil); err == nil {
		t.Fatal("Next(nil) succeeded")
	}
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := g.Next(ctx, nil)
			errc <- err
		}()
	}
	noErr(t, g.Close())
	for range 2 {
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Fatalf("Next across Close = %v, want ErrClosed", err)
		}
	}
	if _, err := g.Next(ctx, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
}

// TestGroupCheckpointResume: a group reopened resumes at its committed
// position, and StartAt places a new group.
func TestGroupCheckpointResume(t *testing.T) {
	dir := t.TempDir()
	st := mustOpen(t, dir, nil)
	s, err := st.Create("s", nil)
	noErr(t, err)
	for i := range 100 {
		_, err := s.Publish(rec(0, i))
		noErr(t, err)
	}
	g, err := s.Group("g", &GroupOptions{CheckpointEvery: time.Hour})
	noErr(t, err)
	ctx := context.Background()
	for range 60 {
		m, err := g.Next(ctx, nil)
		noErr(t, err)
		if m.Seq != 41 { // 41 stays unacked
			noErr(t, g.Ack(m.Seq))
		}
	}
	if g.Committed() != 41 {
		t.Fatalf("Committed = %d, want 41", g.Committed())
	}
	h, err := s.Group("h", &GroupOptions{StartAt: 90})
	noErr(t, err)
	if m, err := h.Next(ctx, nil); err != nil || m.Seq != 90 {
		t.Fatalf("first record of a group started at 90 = %+v, %v", m, err)
	}
	noErr(t, st.Close()) // checkpoints the groups

	st = mustOpen(t, dir, nil)
	defer st.Close()
	s, err = st.Stream("s")
	noErr(t, err)
	g, err = s.Group("g", nil)
	noErr(t, err)
	if g.opts.CheckpointEvery != time.Hour {
		t.Fatalf("reopened group's options = %+v, want the stored ones", g.opts)
	}
	m, err := g.Next(ctx, nil)
	noErr(t, err)
	if m.Seq != 41 {
		t.Fatalf("reopened group resumed at %d, want 41", m.Seq)
	}
	h, err = s.Group("h", &GroupOptions{StartAt: 5}) // exists: StartAt ignored
	noErr(t, err)
	if m, err := h.Next(ctx, nil); err != nil || m.Seq != 90 {
		t.Fatalf("reopened group h resumed at %+v, %v; want 90", m, err)
	}
}

// TestAckNextAllocs: Publish, Ack and a Next with a record ready do not
// allocate.
func TestAckNextAllocs(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", &Config{Sync: wal.SyncNever})
	noErr(t, err)
	g, err := s.Group("g", nil)
	noErr(t, err)
	p := make([]byte, 128)
	buf := make([]byte, 0, 256)
	ctx := context.Background()
	// Warm up: open the reader and map the segment.
	_, err = s.Publish(p)
	noErr(t, err)
	m, err := g.Next(ctx, buf)
	noErr(t, err)
	noErr(t, g.Ack(m.Seq))
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := s.Publish(p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Publish allocates %v objects", n)
	}
	noErr(t, s.cur.Load().Flush(ctx))
	if n := testing.AllocsPerRun(1000, func() {
		m, err := g.Next(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Ack(m.Seq); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Next + Ack allocate %v objects", n)
	}
}

// TestTimerPhase: the groups of a broker started together spread their
// timer passes (deadline checks and checkpoints) over the period.
func TestTimerPhase(t *testing.T) {
	const period = time.Second
	phases := make(map[time.Duration]bool)
	for s := range 20 {
		p := timerPhase(fmt.Sprintf("s%d", s), "g", period)
		if p < 0 || p >= period {
			t.Fatalf("phase %v outside [0, %v)", p, period)
		}
		phases[p/(period/8)] = true
	}
	if len(phases) < 5 {
		t.Fatalf("20 groups' phases fall in %d eighths of the period, want them spread", len(phases))
	}
}

// TestNackStaleDelivery: a member whose delivery expired and went to
// another member cannot nack the record from under it: its late NackMsg
// is ErrNotDelivered, naming the deliveries, and neither queues the record
// a third time nor, with MaxDeliver, makes it dead. The member holding the
// current delivery nacks it; a delivery that was never made is refused.
func TestNackStaleDelivery(t *testing.T) {
	st := mustOpen(t, t.TempDir(), nil)
	defer st.Close()
	s, err := st.Create("s", nil)
	noErr(t, err)
	var deadCalls atomic.Int64
	g, err := s.Group("g", &GroupOptions{AckWait: time.Second, MaxDeliver: 3, OnDead: func(uint64, int) { deadCalls.Add(1) }})
	noErr(t, err)
	defer g.Close()
	_, err = s.Publish([]byte("x"))
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := g.Next(ctx, nil) // member A
	noErr(t, err)
	b, err := g.Next(ctx, nil) // member B, once A's delivery expired
	noErr(t, err)
	if a.Seq != 1 || a.Delivery != 1 || b.Seq != 1 || b.Delivery != 2 {
		t.Fatalf("deliveries %+v and %+v, want record 1 twice", a, b)
	}
	err = g.NackMsg(a) // A, late
	if !errors.Is(err, ErrNotDelivered) || !strings.Contains(err.Error(), "delivery 1") {
		t.Fatalf("NackMsg of a stale delivery = %v, want ErrNotDelivered naming it", err)
	}
	for _, d := range []int{0, -1, 3} {
		m := b
		m.Delivery = d
		if err := g.NackMsg(m); !errors.Is(err, ErrNotDelivered) {
			t.Fatalf("NackMsg of delivery %d = %v, want ErrNotDelivered", d, err)
		}
	}
	if st := g.Stats(); st.Redeliveries != 0 || st.Dead != 0 || st.Nacked != 0 || deadCalls.Load() != 0 {
		t.Fatalf("after a stale nack: %+v, OnDead calls %d", st, deadCalls.Load())
	}
	noErr(t, g.NackMsg(b)) // B's own delivery goes out again
	c, err := g.Next(ctx, nil)
	noErr(t, err)
	if c.Seq != 1 || c.Delivery != 3 {
		t.Fatalf("after B's nack got %+v, want record 1, delivery 3", c)
	}
	if err := g.NackMsg(b); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("B's nack of its delivery, now stale = %v, want ErrNotDelivered", err)
	}
	noErr(t, g.Ack(c.Seq))
	if st := g.Stats(); st.Committed != 2 || st.Dead != 0 || st.Nacked != 1 {
		t.Fatalf("after the ack: %+v", st)
	}
}
