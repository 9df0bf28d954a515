package ship

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/stream"
)

// TestShipGroupOpenAlreadyRefused: a second Shipper of a stream's group,
// or a Shipper of a group a consumer of this process holds, is refused,
// naming the group: the stream handed it the same open group, whose
// records the two then shared, each shipper's read-back taking the
// other's records for its own, and one's Close closed the group under the
// other. Once the group is closed, a Shipper of it ships every record once.
func TestShipGroupOpenAlreadyRefused(t *testing.T) {
	c := cluster(t, 1)
	const n = 100
	s := openStream(t, n)
	o := &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second}
	refused := func(what string) {
		t.Helper()
		sh, err := NewKafkaFromGroup(s, o)
		if err == nil {
			sh.Close()
			t.Fatalf("%s: a Shipper of the open group", what)
		}
		if !errors.Is(err, stream.ErrGroupOpen) || !strings.Contains(err.Error(), `group "ship-kafka" of stream orders`) {
			t.Fatalf("%s: %v, want stream.ErrGroupOpen naming the group", what, err)
		}
	}
	first, err := NewKafkaFromGroup(s, o)
	noErr(t, err)
	refused("a second Shipper")
	noErr(t, first.Close())
	g, err := s.Group(DefaultCursor, nil)
	noErr(t, err)
	refused("a consumer's group")
	noErr(t, g.Close())
	sh, err := NewKafkaFromGroup(s, o)
	noErr(t, err)
	noErr(t, sh.Run(context.Background()))
	noErr(t, sh.Close())
	exactlyOnce(t, readTopic(t, c, "stream:orders", n), n)
}

// TestShipGroupOtherMemberIsLoud: a consumer of this process that opens
// the shipper's group after it (and so gets the same group) and takes a
// record makes Run fail, naming that record: the shipper went on after
// it, and it never reached Kafka, in silence.
func TestShipGroupOtherMemberIsLoud(t *testing.T) {
	c := cluster(t, 1)
	const n = 20
	s := openStream(t, n)
	sh, err := NewKafkaFromGroup(s, &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second})
	noErr(t, err)
	defer sh.Close()
	g, err := s.Group(DefaultCursor, nil)
	noErr(t, err)
	m, err := g.Next(context.Background(), nil)
	noErr(t, err)
	noErr(t, g.Ack(m.Seq))
	err = sh.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "record 1 of stream orders went to another member of group ship-kafka") {
		t.Fatalf("Run after another member took record 1: %v (%+v)", err, sh.Stats())
	}
}

// TestShipGroupOtherMemberAckedIsLoud: a consumer of this process that
// opens the shipper's group after it takes and acks the record after the
// last the shipper read, between two Runs: the next Run, which starts
// past it, fails naming it. It returned nil, the record never in Kafka.
func TestShipGroupOtherMemberAckedIsLoud(t *testing.T) {
	c := cluster(t, 1)
	const n = 20
	s := openStream(t, n)
	sh, err := NewKafkaFromGroup(s, &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second})
	noErr(t, err)
	defer sh.Close()
	noErr(t, sh.Run(context.Background()))
	_, err = s.Publish(record(n + 1))
	noErr(t, err)
	g, err := s.Group(DefaultCursor, nil)
	noErr(t, err)
	m, err := g.Next(context.Background(), nil)
	noErr(t, err)
	noErr(t, g.Ack(m.Seq))
	err = sh.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "record 21 of stream orders went to another member of group ship-kafka") {
		t.Fatalf("Run after another member took record 21: %v (%+v)", err, sh.Stats())
	}
}

// TestShipGroupOtherMemberAckedDeletedIsLoud: as
// TestShipGroupOtherMemberAckedIsLoud, the other member taking and acking
// every record after the last the shipper read, and the stream, kept
// UntilAcked, deleting them once acked: the shipper, which cannot find
// them to name them (held), still fails the next Run, sending nothing:
// the read-back says Kafka holds records up to 20 and the stream no
// longer holds those after (checkDeleted).
func TestShipGroupOtherMemberAckedDeletedIsLoud(t *testing.T) {
	c := cluster(t, 1)
	st, err := stream.Open(t.TempDir(), nil)
	noErr(t, err)
	defer st.Close()
	s, err := st.Create("orders", &stream.Config{SegmentSize: 64 << 10, Retention: stream.Retention{UntilAcked: true}})
	noErr(t, err)
	const n = 20
	for seq := uint64(1); seq <= n; seq++ {
		_, err := s.Publish(record(seq))
		noErr(t, err)
	}
	sh, err := NewKafkaFromGroup(s, &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second})
	noErr(t, err)
	defer sh.Close()
	noErr(t, sh.Run(context.Background()))
	rec := bytes.Repeat([]byte{'r'}, 1000)
	for range 300 {
		_, err := s.Publish(rec)
		noErr(t, err)
	}
	g, err := s.Group(DefaultCursor, nil)
	noErr(t, err)
	for range 300 {
		m, err := g.Next(context.Background(), nil)
		noErr(t, err)
		noErr(t, g.Ack(m.Seq))
	}
	waitFor(t, "the stream to delete the records the other member acked", func() bool {
		noErr(t, g.Checkpoint())
		return s.Stats().FirstSeq > n+1
	})
	err = sh.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no longer holds records 21 to") || sh.Stats().Shipped != n {
		t.Fatalf("Run after another member took records %d to %d, deleted since: %v (%+v)", n+1, n+300, err, sh.Stats())
	}
}
