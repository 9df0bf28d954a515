package wal_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/appendlog/appendlog/wal"
)

// Append from several goroutines, wait for durability (the waiters share
// fdatasyncs), then read the log back.
func Example() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir, nil) // SyncBatch: group commit
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			seq, err := l.Append(fmt.Appendf(nil, "order %d accepted", g))
			if err != nil {
				log.Fatal(err)
			}
			// Acknowledge only once the record survived fdatasync.
			if err := l.WaitDurable(context.Background(), seq); err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	n := 0
	for r.Next() {
		n++
	}
	if err := r.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "records, last seq", r.NextSeq()-1)
	// Output: 4 records, last seq 4
}

// After a crash, Open cuts a torn tail and says so; corruption of data a
// completed sync covered is an error naming segment and offset instead.
func ExampleLog_Recovery() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, nil)
	if err != nil {
		if wal.IsCorrupt(err) {
			log.Fatalf("refusing to guess: %v (see appendlog repair)", err)
		}
		log.Fatal(err)
	}
	defer l.Close()
	rec := l.Recovery()
	if rec.TruncatedBytes > 0 {
		log.Printf("cut a torn tail of %d bytes at %s:%d", rec.TruncatedBytes, rec.TailSegment, rec.TruncatedAt)
	}
	fmt.Println("next seq", rec.NextSeq)
	// Output: next seq 1
}
