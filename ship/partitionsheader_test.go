package ship

import (
	"context"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShipLastRecordCountUnknownSkipsNothing: the last record of this
// source in a partition of a 3-partition topic is record 30, and no other
// record of the log is in Kafka. A shipper that trusted it would skip the
// records up to 30 that go to that partition, as shipped. It may only
// when the record says it was sent as this shipper sends: keyed, with the
// topic's count as HeaderPartitions in decimal. A HeaderPartitions that is
// no count (a foreign writer's), or none on a keyed record (a keyed
// shipper older than HeaderPartitions: the count may have changed since),
// makes it skip nothing there; the shipper sends all 30 records.
func TestShipLastRecordCountUnknownSkipsNothing(t *testing.T) {
	const n = 30
	hdr := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	for _, tc := range []struct {
		name  string
		keyed bool   // the shipper
		key   string // the planted record's Kafka key
		extra []kgo.RecordHeader
		skips bool // the shipper may skip by it
	}{
		{"keyed, count 3", true, "key2", []kgo.RecordHeader{hdr(HeaderPartitions, "3")}, true},
		{"keyed, count not a number", true, "key2", []kgo.RecordHeader{hdr(HeaderPartitions, "three")}, false},
		{"keyed, count empty", true, "key2", []kgo.RecordHeader{hdr(HeaderPartitions, "")}, false},
		{"keyed, count out of range", true, "key2", []kgo.RecordHeader{hdr(HeaderPartitions, "99999999999999999999")}, false},
		{"keyed, an older keyed shipper's", true, "key2", nil, false},
		{"not keyed, an older keyed shipper's", false, "key2", nil, false},
		{"not keyed, count not a number", false, "", []kgo.RecordHeader{hdr(HeaderPartitions, "x")}, false},
		{"not keyed, an unkeyed shipper's", false, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(t, 3)
			l := openLog(t, n)
			o := opts(c)
			part := int32(1)
			if tc.keyed {
				o.Key = func(rec []byte) []byte { return rec[:4] }
			} else {
				o.Partition = part
			}
			r := &kgo.Record{Topic: "t", Partition: part, Value: record(n),
				Headers: append([]kgo.RecordHeader{hdr(HeaderSource, "src-1")}, append(tc.extra, hdr(HeaderSeq, strconv.Itoa(n)))...)}
			if tc.key != "" {
				r.Key = []byte(tc.key)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			noErr(t, err)
			noErr(t, cl.ProduceSync(context.Background(), r).FirstErr())
			cl.Close()
			st := runOnce(t, l, o)
			if tc.skips {
				if st.Skipped == 0 {
					t.Fatalf("%+v: want records skipped by the last record (the test's premise)", st)
				}
				return
			}
			if st.Skipped != 0 || st.Shipped != n {
				t.Fatalf("%+v: want nothing skipped, %d shipped", st, n)
			}
		})
	}
}
