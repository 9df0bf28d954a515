// Package bench is appendlog's write-strategy benchmark: the library behind
// "appendlog bench". It writes generated records through each write
// strategy (one write(2) per record, writev batches, bufio, O_DIRECT, the
// writer package's Ring, Slab, Buffered and Mmap, the wal package, io_uring),
// checks every byte that reached the file, and reports throughput, latency
// and allocations next to a ceiling measured on the same directory in the
// same run.
//
// The package owns no mutable globals: everything lives in a Config and the
// values Run returns. Concurrent Runs are safe (each writes in its own new
// directory) but perturb each other's numbers.
//
// # What is measured
//
// A case is one strategy, one record size and one number of writer
// goroutines. Each case runs Config.Runs times (at least 3) after one
// unmeasured warm-up run that also calibrates the record count (so that a
// run lasts about Config.RunTime, within Config.MaxBytes). Every run writes
// a new file (or wal directory) and is timed from the moment the writer
// goroutines are released to the moment every accepted record has been
// handed on: the last Write returned and the strategy's Flush returned (for
// buffered strategies, bytes still in a user-space buffer were not written),
// or, for wal-batch, the final Sync returned. Close runs after the clock
// stops; a run's numbers are reported only if the file it left verifies.
//
//	ns/op       elapsed / records, all writers together (the cost of one record
//	            in aggregate throughput, not a per-call latency)
//	MB/s        record bytes / elapsed, MB = 10^6 bytes (wal frame headers and
//	            O_DIRECT padding not counted)
//	records/s   records / elapsed
//	allocs/op   runtime.MemStats.Mallocs delta over the timed region / records
//	p50/p99/    latency of single Write calls: one call in N is timed, at random
//	p99.9       gaps (uniform in [1, 2N-1]) so that sampling cannot lock onto a
//	            periodic event such as a buffer flush every N records; N is a
//	            power of two chosen so that reading the clock costs at most ~1%
//	            of the throughput; each sample includes the cost of one clock
//	            read (Machine.ClockReadNs), the floor below which calls cannot
//	            be told apart; samples go into a histogram with 8 buckets per
//	            power of two; quantiles are the upper edge of their bucket
//	            (≤ 12.5% high); p99 needs 100 samples, p99.9 1000
//
// Median, min and max are taken over the runs. The ceiling is large
// sequential writes of CeilingWrite (4 MiB) on the same directory, measured
// the same way: buffered pwrite(2) calls (the page-cache ceiling, against
// which buffered strategies are shown as a percentage) and aligned O_DIRECT
// writes (the device ceiling, for the O_DIRECT strategies), each measured
// Config.Runs times (Config.MaxBytes each, rounded down to whole writes)
// before the cases, after a warm-up, and
// Config.Runs times after them, so that drift on a shared machine shows in
// the ceiling's spread; a strategy may still beat the median. The
// O_DIRECT ceiling keeps one write in flight, as the O_DIRECT strategies do;
// a device that needs parallel requests to reach its rated speed shows less.
// Every ceiling file is checked afterwards (its size, and its first, middle
// and last write), so a write path that silently writes nothing cannot pass
// for a fast one.
//
// # Records
//
// All records of a case have the same size. Records of MinFramedSize (27)
// bytes or more are package internal/payload's verifiable records, one
// printable line each:
//
//	+--------+---+-------------+---+------- ... -------+---+----------+----+
//	| writer | ␠ | counter     | ␠ | filler            | ␠ | check    | \n |
//	| 4 hex  |   | 12 hex      |   | fixed by position |   | 8 hex    |    |
//	+--------+---+-------------+---+------- ... -------+---+----------+----+
//	0        4   5             17  18                 n-10 n-9        n-1  n
//
// Every byte is fixed by (writer, counter, size), and the check is a hash of
// the three, so the verifier checks every byte of every record: a writer id
// below the number of writers, every filler byte, the check (a damaged head
// or a record spliced from two fails it) and the final newline; per writer,
// counters 0, 1, 2, ... in file order with none missing, repeated or out of
// order; and the total count and the file length. A writer goroutine
// encodes its record once and then rewrites only the counter and check
// (payload.Stamp), so the cost per record does not grow with its size.
//
// Records of 1 to 26 bytes cannot hold that head. Each of their bytes is
// one tag, 1 + w*m + c mod m, for writer w and counter c, where m =
// 255 / writers (so 0 never occurs: zero-filled holes and padding are caught).
// The verifier checks: the file length; every byte of a record is the same
// tag (a torn record is caught); no byte is 0 or names a writer that does
// not exist (foreign bytes); per writer, the exact record count, and that
// consecutive records follow each other modulo m (a missing or reordered
// record is caught unless whole multiples of m vanish or trade places,
// which the count then catches, except a swap of two records of one writer
// whose counters differ by a multiple of m); with m = 1 (more than 127
// writers) only counts and tags are checked. There is no checksum: content
// beyond the tag cannot be checked at these sizes.
//
// wal strategies store the same records as payloads; they are read back with
// wal.OpenReader, which checks the frames' checksums and sequence numbers,
// and each payload is then checked as above. A case whose output fails any
// check is reported as failed, with where and what, never as a speed.
//
// # Regimes
//
// Buffered strategies measure the path into the page cache: a run writes at
// most Config.MaxBytes, far below the kernel's dirty-page thresholds on a
// machine with gigabytes of RAM, so the disk's sustained write rate is not
// what limits them. O_DIRECT strategies (direct, ring-direct) and the
// device ceiling reach the device. wal-batch fdatasyncs as it goes (group
// commit) and its clock stops after the final Sync: it is durable.
package bench
