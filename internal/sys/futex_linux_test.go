//go:build linux

package sys

import (
	"os"
	"sync"
	"testing"
	"time"
)

func TestFutex(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "futex")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(4096)
	m, err := Mmap(f, 0, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	defer Munmap(m)
	w := Uint64At(m, 8)
	// A value that differs returns at once.
	start := time.Now()
	FutexWait(m, 8, 1, time.Minute)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("wait on a differing value took %v", d)
	}
	// A timeout returns.
	FutexWait(m, 8, 0, time.Millisecond)
	// A wake releases a waiter that would otherwise wait a minute.
	var wg sync.WaitGroup
	wg.Add(1)
	woke := make(chan time.Duration, 1)
	go func() {
		defer wg.Done()
		start := time.Now()
		for w.Load() == 0 {
			FutexWait(m, 8, 0, time.Minute)
		}
		woke <- time.Since(start)
	}()
	time.Sleep(10 * time.Millisecond) // let the waiter block; a wake before it only costs nothing
	w.Store(1)
	FutexWake(m, 8)
	wg.Wait()
	if d := <-woke; d > 30*time.Second {
		t.Fatalf("woken after %v", d)
	}
}
