// Command appendlog loads, verifies, dumps and repairs appendlog
// write-ahead logs (package wal).
//
// Run "appendlog help" for the commands. Exit status: 0 on success, 1 on
// failure or damage found, 2 on usage errors.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
