package ship

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShipKeyedPartitionsAddedLoseNothing: a keyed shipper gives up on the
// records of partition 0 of 3 (Kafka took those of the others), then the
// topic gets a fourth partition. A record's partition is its key's hash
// modulo the count, so the records sent again go elsewhere now, and the
// read-back of the last record of each partition no longer says which of
// them Kafka holds: key3's records went to partition 0 and were not
// taken, and go to partition 1 now, whose last record is past them. The
// shipper skipped them as shipped; it now sends every record from its
// cursor again (at least once, as the package documentation says), and a
// later run, the count unchanged, is exact again.
func TestShipKeyedPartitionsAddedLoseNothing(t *testing.T) {
	c := cluster(t, 3)
	refuse := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{0}, Err: kerr.NotEnoughReplicas, Count: -1})
	const n = 300
	l := openLog(t, n)
	o := opts(c)
	o.Key = func(rec []byte) []byte { return rec[:4] }
	o.FlushTimeout = 2 * time.Second // for Kafka to take the other partitions' records
	o.ClientOptions = []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)}
	s, err := NewKafka(l, o)
	noErr(t, err)
	if err := s.Run(context.Background()); !errors.Is(err, ErrFlushTimeout) {
		t.Fatalf("Run while Kafka refuses partition 0 for now: %v, want ErrFlushTimeout", err)
	}
	waitFor(t, "the client to give up on the records in flight", func() bool { return s.Stats().InFlight == 0 })
	o.FlushTimeout = 0
	first := s.Stats()
	noErr(t, s.Close())
	if first.Shipped == 0 || first.Committed != 3 {
		t.Fatalf("after the give-up: %+v, want records shipped, the cursor at record 3 (key3, partition 0)", first)
	}
	refuse.Remove()
	adm := kadm.NewClient(mustClient(t, c))
	rs, err := adm.CreatePartitions(context.Background(), 1, "t")
	noErr(t, err)
	for _, r := range rs {
		noErr(t, r.Err)
	}
	st := runOnce(t, l, o)
	if st.Committed != n+1 {
		t.Fatalf("the run after a partition was added: %+v, want committed %d", st, n+1)
	}
	got := readTopic(t, c, "src-1", topicRecords(t, adm))
	held := make(map[uint64]int)
	for _, seqs := range got {
		for _, seq := range seqs {
			held[seq]++
		}
	}
	for seq := uint64(1); seq <= n; seq++ {
		if held[seq] == 0 {
			t.Fatalf("record %d (key%d) is not in Kafka", seq, seq%7)
		}
	}
	// Exact again: a lost checkpoint sends nothing twice.
	appendN(t, l, 100)
	noErr(t, ToKafka(context.Background(), l, o))
	before := topicRecords(t, adm)
	rewind(t, l, n+1)
	if st := runOnce(t, l, o); st.Skipped != 100 || st.Shipped != 0 {
		t.Fatalf("a lost checkpoint, the count unchanged: %+v, want the 100 records skipped", st)
	}
	if after := topicRecords(t, adm); after != before {
		t.Fatalf("the topic held %d records, then %d", before, after)
	}
}

// topicRecords returns the number of records topic t holds.
func topicRecords(t *testing.T, adm *kadm.Client) int {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), "t")
	noErr(t, err)
	n := 0
	ends.Each(func(o kadm.ListedOffset) {
		noErr(t, o.Err)
		n += int(o.Offset)
	})
	return n
}

// TestShipUnkeyedAfterKeyedLosesNothing: a keyed shipper gives up on the
// records of partition 0 of 3 (Kafka took those of the others), and the
// next run of the log is not keyed: every record goes to one partition,
// whose last record, the keyed shipper's, is past the ones Kafka did not
// take. They were skipped as shipped; they are now sent again.
func TestShipUnkeyedAfterKeyedLosesNothing(t *testing.T) {
	c := cluster(t, 3)
	refuse := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{0}, Err: kerr.NotEnoughReplicas, Count: -1})
	const n = 300
	l := openLog(t, n)
	o := opts(c)
	o.Key = func(rec []byte) []byte { return rec[:4] }
	o.FlushTimeout = 2 * time.Second // for Kafka to take the other partitions' records
	o.ClientOptions = []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)}
	s, err := NewKafka(l, o)
	noErr(t, err)
	if err := s.Run(context.Background()); !errors.Is(err, ErrFlushTimeout) {
		t.Fatalf("Run while Kafka refuses partition 0 for now: %v, want ErrFlushTimeout", err)
	}
	waitFor(t, "the client to give up on the records in flight", func() bool { return s.Stats().InFlight == 0 })
	o.FlushTimeout = 0
	noErr(t, s.Close())
	refuse.Remove()
	o.Key, o.Partition = nil, 1
	if st := runOnce(t, l, o); st.Committed != n+1 {
		t.Fatalf("the run not keyed: %+v, want committed %d", st, n+1)
	}
	got := readTopic(t, c, "src-1", topicRecords(t, kadm.NewClient(mustClient(t, c))))
	held := make(map[uint64]int)
	for _, seqs := range got {
		for _, seq := range seqs {
			held[seq]++
		}
	}
	for seq := uint64(1); seq <= n; seq++ {
		if held[seq] == 0 {
			t.Fatalf("record %d (key%d) is not in Kafka", seq, seq%7)
		}
	}
}
