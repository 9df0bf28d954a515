// Package metrics exports the Stats of appendlog's parts as Prometheus
// metrics: a prometheus.Collector per part, which reads the part's Stats
// when scraped. Nothing is counted twice: the parts count on their own
// paths (atomics they keep anyway), and a scrape takes one Stats snapshot.
//
//	ring, _ := writer.OpenFile("/var/log/app.log", nil)
//	prometheus.MustRegister(metrics.NewRingCollector(ring, prometheus.Labels{"log": "app"}))
//	http.Handle("/metrics", promhttp.Handler())
//
// # Writer metrics (NewRingCollector)
//
// Every writer of package writer has Stats; the names are
// appendlog_writer_*: records_total, bytes_total (accepted Write calls),
// written_records_total, written_bytes_total, dropped_records_total,
// dropped_bytes_total, markers_total, queued_bytes (gauge), flushes_total,
// flush_duration_seconds (histogram, with its sum; the bucket bounds are
// powers of two nanoseconds), syncs_total, blocked_waits_total,
// blocked_seconds_total, retries_total, rotations_total,
// rotation_errors_total, reopens_total, and failed (gauge: 1 once the
// writer has a sticky error, for writers with an Err method).
//
// # Write-ahead log metrics (NewLogCollector)
//
// appendlog_wal_*: appended_bytes_total, written_bytes_total (frames
// included), writes_total, syncs_total (fdatasync), sync_duration_seconds
// (histogram, bounds as above), synced_records_total, inline_syncs_total
// (the syncs a lone waiting caller ran on its own goroutine), next_seq and
// durable_seq (gauges: the next sequence number, the highest durable one),
// segments_created_total, segments_deleted_total,
// retention_skipped_total, and failed (gauge: 1 once a write or sync
// failed the log).
//
// # Shared-memory log metrics (NewShmCollector)
//
// appendlog_shmlog_*: claims_total (this process's), active_file,
// active_file_bytes and file_capacity_bytes (gauges), and
// padded_frames_total. A closed Log exports none.
//
// # Stream store metrics (NewStoreCollector)
//
// appendlog_stream_*, labelled stream: first_seq, next_seq and durable_seq
// (gauges), published_records_total, published_bytes_total (since the
// store opened), disk_bytes, open (1 while the stream's log is open) and
// groups (open groups). appendlog_stream_group_*, labelled stream and
// group, for each open group: committed_seq, delivered_total,
// redelivered_total, acked_total, nacked_total, dead_total,
// skipped_total, pending, lag_records, lag_bytes and
// oldest_unacked_seconds.
//
// The shipper's collector is in package metrics/shipmetrics, so that
// exporting these does not link the Kafka client.
package metrics
