package main

import "github.com/appendlog/appendlog/wal"

// readOptions are the wal options of the commands that read a log someone
// else wrote (verify, dump, tail, stat, repair, ship): they take any record a
// Log can hold, whatever MaxRecordSize its writer chose (a stream's may
// be up to 128 MiB, the package default is 2 MiB), where the defaults
// would refuse a longer record with wal.ErrTooLarge.
func readOptions() *wal.Options {
	return &wal.Options{BufferSize: wal.MaxBufferSize, MaxRecordSize: wal.MaxBufferSize / 2}
}
