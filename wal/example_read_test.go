package wal_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/appendlog/appendlog/wal"
)

// A Reader from OpenReader follows a log that another process writes
// (here, for the example, a Log in this process): it takes no lock and
// never writes, and Wait follows the files (inotify on Linux) until a
// record past the last one read is there.
func ExampleOpenReader_follow() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, nil) // the writer
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append([]byte("created")); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Flush(ctx); err != nil { // hand it to the OS: other processes see it
		log.Fatal(err)
	}

	r, err := wal.OpenReader(dir, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range []string{"paid", "shipped"} {
			if _, err := l.Append([]byte(p)); err != nil {
				log.Fatal(err)
			}
			if err := l.Flush(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}()
	for read := 0; read < 3; {
		for r.Next() {
			fmt.Println(r.Seq(), string(r.Record()))
			read++
		}
		if err := r.Err(); err != nil {
			log.Fatal(err) // damage, or a *wal.TruncatedError: records deleted before they were read
		}
		if read < 3 {
			if err := r.Wait(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	<-done
	// Output:
	// 1 created
	// 2 paid
	// 3 shipped
}

// A live reader follows an open log: Next returns what is visible, and Wait
// blocks until more is (a waiting reader makes the flusher write at once).
func ExampleLog_NewReader() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	r, err := l.NewReader(1, nil) // ReadWritten: visible once handed to the OS
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range []string{"created", "paid", "shipped"} {
			if _, err := l.Append([]byte(p)); err != nil {
				log.Fatal(err)
			}
		}
	}()
	ctx := context.Background()
	for read := 0; read < 3; {
		for r.Next() {
			fmt.Println(r.Seq(), string(r.Record())) // Record is valid until the next call
			read++
		}
		if err := r.Err(); err != nil {
			log.Fatal(err)
		}
		if read < 3 {
			if err := r.Wait(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	<-done
	// Output:
	// 1 created
	// 2 paid
	// 3 shipped
}

// A cursor is a durable consumer position: Ack is in memory, the committed
// position is checkpointed (never past durable records), and a reopened
// cursor resumes after the last committed record.
func ExampleLog_Cursor() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	l, err := wal.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range []string{"a", "b", "c", "d"} {
		if _, err := l.Append([]byte(p)); err != nil {
			log.Fatal(err)
		}
	}
	c, err := l.Cursor("billing")
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		seq, rec, err := c.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("consumed", seq, string(rec))
		if err := c.Ack(seq); err != nil {
			log.Fatal(err)
		}
	}
	if err := c.Commit(ctx); err != nil { // or wait for Options.CheckpointEvery
		log.Fatal(err)
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	l, err = wal.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	c, err = l.Cursor("billing")
	if err != nil {
		log.Fatal(err)
	}
	seq, rec, err := c.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after reopen", seq, string(rec))
	// Output:
	// consumed 1 a
	// consumed 2 b
	// after reopen 3 c
}
