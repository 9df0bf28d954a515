// Package peers holds side-by-side benchmarks of appendlog against peer
// libraries: asynchronous log writers (zap's BufferedWriteSyncer, zerolog's
// diode writer, a mutex-guarded bufio.Writer, one os.File.Write per record)
// and write-ahead logs (tidwall/wal, rosedblabs/wal, hashicorp/raft-wal,
// cockroachdb/pebble's record.LogWriter).
//
// It is a separate module, as zap's benchmarks/ is, so that users of
// appendlog never inherit the peers' dependencies. Everything lives in
// _test.go files; see README.md for how to run the benchmarks and what
// each one measures, and RESULTS.md for a recorded run.
//
// Every contender gets the same workload (128-byte records, each naming
// its writer and that writer's sequence number) and the same
// verification: once the timer has stopped, the output is read back (for
// the WALs through each library's own reader) and checked record by
// record for count, content and per-writer order. A mismatch fails the
// benchmark.
package peers
