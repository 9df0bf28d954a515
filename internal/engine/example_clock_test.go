package engine_test

import (
	"context"
	"fmt"
	"time"

	"github.com/appendlog/appendlog/internal/engine"
	"github.com/appendlog/appendlog/internal/engine/clock"
)

type discard struct{}

func (discard) Write(uint64, []byte, []byte) error { return nil }
func (discard) Sync() error                        { return nil }

// A test drives the engine's timers with a clock.Fake instead of sleeping:
// it waits until the flusher has armed its timer, moves the clock to the
// timer's deadline, and waits on Progress (which, unlike Flush, does not
// wake the flusher) until the record is written.
func Example_fakeClock() {
	clk := clock.NewFake(time.Unix(1e9, 0))
	e, err := engine.New(engine.Config{FlushInterval: 10 * time.Millisecond, Clock: clk}, discard{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	c, err := e.Claim(128, 1)
	if err != nil {
		panic(err)
	}
	e.Put(c, 0, make([]byte, 128))
	e.Commit(c) // wakes the idle flusher, which arms its flush timer

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a guard, not a wait
	defer cancel()
	if err := clk.WaitTimers(ctx, 1); err != nil {
		panic(err)
	}
	start := clk.Now()
	at, _ := clk.Next()
	clk.Advance(at.Sub(clk.Now()))
	for {
		progress := e.Progress() // before the check, so no change is missed
		if e.Written() >= c.Pos+128 {
			break
		}
		select {
		case <-progress:
		case <-ctx.Done():
			panic("not written")
		}
	}
	fmt.Println("written after", clk.Now().Sub(start), "of fake time")
	// Output: written after 10ms of fake time
}
