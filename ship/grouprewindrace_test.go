package ship

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestShipGroupRewindRacesStatsAndClose: a group Shipper whose Run gave up
// on records in flight runs again, rewinding (closing and opening its
// group again), while Stats is called without pause and Close comes at
// various points of the second Run. Under -race, none of it races; Close
// leaves the group closed (not the old one closed and the new one open),
// and a Shipper of the group made after it ships every record once.
func TestShipGroupRewindRacesStatsAndClose(t *testing.T) {
	c := cluster(t, 1)
	hold := holdProduce(c)
	const n = 200
	s := openStream(t, n)
	for i, wait := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		o := &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second, FlushTimeout: 200 * time.Millisecond}
		sh, err := NewKafkaFromGroup(s, o)
		noErr(t, err)
		hold.Store(true)
		if err := sh.Run(context.Background()); !errors.Is(err, ErrFlushTimeout) && i == 0 {
			t.Fatalf("Run while Kafka holds every record: %v, want ErrFlushTimeout", err)
		}
		hold.Store(false)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					_ = sh.Stats()
				}
			}
		})
		done := make(chan error, 1)
		go func() { done <- sh.Run(context.Background()) }()
		time.Sleep(wait)
		noErr(t, sh.Close())
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("Run closed after %v: %v", wait, err)
		}
		close(stop)
		wg.Wait()
		if _, open := s.GroupStats()[DefaultCursor]; open {
			t.Fatalf("the group is open after the Shipper's Close (%v into its Run)", wait)
		}
	}
	sh, err := NewKafkaFromGroup(s, &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 5 * time.Second})
	noErr(t, err)
	noErr(t, sh.Run(context.Background()))
	noErr(t, sh.Close())
	exactlyOnce(t, readTopic(t, c, "stream:orders", n), n)
}
