package wal_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
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

// A forced Repair keeps every intact record and records the ones lost to
// damage as a gap. A Reader stops at the gap, names it in Err, and goes on
// after it.
func ExampleGapError() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := l.Append(fmt.Appendf(nil, "record %d", i)); err != nil {
			log.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}
	// Damage record 3 on disk: its payload starts after the 4096-byte
	// header page, two 24-byte frames and its own 16-byte header.
	f, err := os.OpenFile(filepath.Join(dir, "00000000000000000001.seg"), os.O_RDWR, 0)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 4096+2*24+16); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	if _, err := wal.Repair(dir, false, nil); wal.IsCorrupt(err) {
		fmt.Println("repair without force refuses: the damage is in acknowledged data")
	}
	if _, err := wal.Repair(dir, true, nil); err != nil {
		log.Fatal(err)
	}

	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		for r.Next() {
			fmt.Printf("%d: %s\n", r.Seq(), r.Record())
		}
		var gap *wal.GapError
		if !errors.As(r.Err(), &gap) {
			break
		}
		fmt.Println("lost:", gap.Range())
	}
	if err := r.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// repair without force refuses: the damage is in acknowledged data
	// 1: record 1
	// 2: record 2
	// lost: record 3 (1 record)
	// 4: record 4
	// 5: record 5
}
