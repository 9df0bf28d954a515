package ship

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShipCancelAtEachPhase: a Run whose ctx is cancelled while it waits
// on each kind of request it makes (the topic's metadata, its offsets,
// the read-back, the producer ID, a produce, a commit) returns without an
// error, and a Run of the same Shipper, then of a new one, ships every
// record once, for a log and a stream's group, idempotent and
// transactional.
func TestShipCancelAtEachPhase(t *testing.T) {
	keys := []kmsg.Key{kmsg.Metadata, kmsg.ListOffsets, kmsg.Fetch, kmsg.InitProducerID, kmsg.Produce, kmsg.EndTxn}
	for _, txn := range []bool{false, true} {
		for _, group := range []bool{false, true} {
			for _, key := range keys {
				if key == kmsg.EndTxn && !txn {
					continue
				}
				if key == kmsg.InitProducerID && !txn {
					continue
				}
				t.Run(fmt.Sprintf("txn=%v/group=%v/%s", txn, group, key.Name()), func(t *testing.T) {
					c := cluster(t, 1)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					var armed atomic.Bool
					c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
						c.KeepControl()
						if armed.Swap(false) {
							cancel()
						}
						return nil, nil, false
					})
					const n = 300
					o := opts(c)
					o.Transactional = txn
					o.MaxInFlightRecords = 64
					var newShipper func() *Shipper
					var more func()
					if group {
						s := openStream(t, n/2)
						o.Source = "src-1"
						newShipper = func() *Shipper {
							sh, err := NewKafkaFromGroup(s, o)
							noErr(t, err)
							return sh
						}
						more = func() {
							for seq := uint64(n/2 + 1); seq <= n; seq++ {
								_, err := s.Publish(record(seq))
								noErr(t, err)
							}
						}
					} else {
						l := openLog(t, n/2)
						newShipper = func() *Shipper {
							sh, err := NewKafka(l, o)
							noErr(t, err)
							return sh
						}
						more = func() { appendN(t, l, n/2) }
					}
					// Kafka holds records of the source: the read-back
					// fetches.
					sh := newShipper()
					noErr(t, sh.Run(context.Background()))
					noErr(t, sh.Close())
					more()
					armed.Store(true)
					sh = newShipper()
					done := make(chan error, 1)
					go func() { done <- sh.Run(ctx) }()
					select {
					case err := <-done:
						noErr(t, err)
					case <-time.After(time.Minute):
						t.Fatalf("Run did not return after its ctx was cancelled: %+v", sh.Stats())
					}
					if armed.Load() {
						t.Fatalf("Run made no %s request", key.Name())
					}
					noErr(t, sh.Run(context.Background()))
					st := sh.Stats()
					noErr(t, sh.Close())
					if st.Committed != n+1 {
						t.Fatalf("after Run again: %+v", st)
					}
					sh = newShipper()
					noErr(t, sh.Run(context.Background()))
					noErr(t, sh.Close())
					exactlyOnce(t, readTopic(t, c, "src-1", n), n)
				})
			}
		}
	}
}
