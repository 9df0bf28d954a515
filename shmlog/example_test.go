package shmlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/appendlog/appendlog/shmlog"
)

// Every process that opens the same path appends to the same log; a reader
// follows the records as they are committed.
func Example() {
	dir, _ := os.MkdirTemp("", "shmlog-example")
	defer os.RemoveAll(dir)
	l, err := shmlog.Open(filepath.Join(dir, "events"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	l.Append([]byte("hello"))
	r, _ := l.Reserve(5) // zero-copy: fill the claimed bytes, then commit
	copy(r.Bytes(), "world")
	r.Commit()

	rd, err := l.NewReader(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for range 2 {
		if err := rd.Wait(ctx); err != nil {
			fmt.Println(err)
			return
		}
		rec, _, _ := rd.Next()
		fmt.Printf("%#x %s\n", rec.Pos, rec.Payload)
	}
	if err := l.Sync(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0x0 hello
	// 0x18 world
}
