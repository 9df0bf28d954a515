// Package ship copies a wal.Log to an Apache Kafka topic, losing nothing
// and, under the conditions below (KafkaOptions.Transactional, and no other
// writer of the partitions it writes), duplicating nothing.
//
//	l, err := wal.Open(dir, nil)
//	err = ship.ToKafka(ctx, l, &ship.KafkaOptions{Brokers: []string{"127.0.0.1:9092"}, Topic: "events"})
//
// NewKafkaFromDir ships the log in a directory that another process writes
// (a shipper beside a service): it reads the files through wal.OpenCursor,
// never takes the log's lock, and makes the records its checkpoints pass
// durable itself, whatever the writer's sync policy. NewKafkaFromGroup
// ships a stream through a consumer group, which needs the stream's store
// open in this process; to ship a stream beside the process that holds
// its store, give NewKafkaFromDir the stream's log directory
// (stream.Describe's LogDir) and a cursor name no group of the stream
// uses. A stream kept UntilAcked then keeps every record that cursor has
// not passed, as it does for its groups.
//
// The shipper reads the log through a durable wal.Cursor (KafkaOptions.Cursor)
// and produces with github.com/twmb/franz-go: the idempotent producer, acks
// from all in-sync replicas, bounded in-flight records and bytes. Each Kafka
// record carries two headers: HeaderSource, the log's identity
// (KafkaOptions.Source), and HeaderSeq, the record's sequence number in
// decimal; a keyed shipper's (KafkaOptions.Key) carry a third,
// HeaderPartitions, the topic's partition count its partition was chosen
// with. A record is acked on the cursor only once Kafka acknowledged it,
// so the cursor's checkpoint never passes a record Kafka does not hold: a
// crash of the shipper loses nothing, and the log's retention (unless it
// ignores cursors) keeps every record not yet shipped.
//
// # Duplicates
//
// The cursor is checkpointed every wal.Options.CheckpointEvery, so a crash
// leaves records that Kafka acknowledged after the last checkpoint. On
// start the shipper therefore reads back the last record of every partition
// it writes: when that record carries this source's HeaderSource, every
// record of the log destined for that partition up to its HeaderSeq is
// already there, and the shipper skips them (Stats.Skipped) instead of
// sending them again. That record must be the log's: a HeaderSeq at or
// past the log's end, or a payload other than the log's record of that
// sequence number (a log made anew in the directory of one shipped
// before, which has the same default Source), stops Run before anything
// is sent; give each log a Source of its own. Nor may the log have
// deleted, unshipped, the records after it (a cursor deleted or made anew
// once retention had passed them): Run stops naming them, nothing sent.
//
// This is exact when the shipper is the only writer of the partitions it
// writes: the idempotent producer writes each partition's records in the
// order they were sent, retrying transient failures without gaps or
// duplicates, so the last record of a partition says that every earlier
// record for it is there. Where the last record of a partition is another
// writer's, the shipper cannot tell what of its own is there: records of
// that partition from the cursor's checkpoint on are sent again, and
// delivery falls back to at least once. The same holds if the topic's
// partition count changes between runs of a keyed shipper
// (KafkaOptions.Key): a record's partition is its key's hash modulo the
// count, so a record sent again may go to another partition than the
// first time, and a partition's last record no longer tells whether it is
// there. A partition whose last record was not sent as the shipper
// sends makes it skip nothing for it: the records for it from the cursor
// on are sent again. For a keyed shipper that is a last record without
// the topic's count as HeaderPartitions (sent with another count, by a
// shipper that is not keyed, or by a keyed one older than
// HeaderPartitions: its first run after an upgrade sends some records
// again); for one that is not keyed, a keyed shipper's (HeaderPartitions,
// or a key). (An older keyed shipper's record without a key, its Key
// returning nil, cannot be told from one that is not keyed: a shipper
// that is not keyed may then skip records that keyed one gave up on, as
// shipped.) For the same reason Key must
// give a record the same key from run to run. Two shippers of one log at
// once are two writers: a second one on the same cursor (or the same
// stream group, in this process) is refused, but one on another cursor
// sends every record again, under the same Source.
//
// One window is not closed by this alone: a produce request that a killed
// shipper sent just before it died may still be inside the broker
// (received, not yet replicated to every in-sync replica, so not visible)
// when the restarted shipper reads back the last record. It lands
// afterwards, and the records it carries have been sent again by then:
// they appear twice. The window is the broker's replication delay; a new
// process gets a new producer ID, so idempotence cannot catch it. A
// shipper that stalled rather than died (a paused process, a network
// partition) can land records long after a new one started.
//
// KafkaOptions.Transactional closes it. The shipper writes through Kafka
// transactions under a transactional ID that stays the same from run to
// run (by default derived from Topic and Source), and acks a record on
// its cursor only once the transaction holding it committed. A shipper
// that starts first initializes its producer with that ID, which fences
// every earlier one: Kafka completes or aborts the transaction an earlier
// shipper left (so that a commit already under way is visible to the
// read-back, and a transaction left open is not), and refuses whatever
// it sends after. Only then does it read back, as a read_committed
// consumer, the last committed record of each partition, past the
// transaction markers and aborted records after it. The cost: a record
// becomes visible when its transaction commits (every
// KafkaOptions.CommitInterval, or once MaxInFlightRecords records wait in
// it), the user needs Write on the transactional ID, and the topic's
// consumers must read with isolation.level read_committed, since a
// read_uncommitted consumer also reads the records of aborted
// transactions. A record Kafka refuses aborts its transaction, so no
// record after it is visible either. Once a source is shipped
// transactionally, keep it so: a shipper that is not Transactional fences
// nothing, and its read-back (read_committed) stops at a transaction a
// killed one left open until Kafka times it out
// (kgo.TransactionTimeout), so it would send again what that transaction
// holds.
//
// A record too large for the topic (its max.message.bytes, read at start
// when the user may describe the topic's configuration) or for the client
// (ProducerBatchMaxBytes, MaxInFlightBytes) is never sent: the shipper
// stops before it with ErrRecordTooLarge, the records before it shipped
// and committed, so every run stops there until the limits are raised.
// The check is on the record's uncompressed size (as the client's own
// limit is), so a compressible record the broker would take after
// compression is stopped too: a loud stop, never a skipped record.
// Were it sent, Kafka would refuse it after later records had landed, and
// a restart would take it for one that landed. A record Kafka refuses for
// another reason (authorization revoked mid-run, a broker-side validation)
// stops the shipper with an error naming it and the cursor below it;
// records sent after it may be in Kafka already, and a restart would then
// skip it: fix the cause and check the topic before starting again.
// Kafka saying it lost records the shipper wrote (an out-of-order
// sequence number: an unclean leader election) stops it the same way,
// instead of the client renumbering and going on.
package ship
