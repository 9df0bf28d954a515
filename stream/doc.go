// Package stream is the store a message broker embeds: many named streams
// in one directory, each an append-only log (a wal.Log), with consumer
// groups whose acks are kept in memory and whose positions are
// checkpointed.
//
//	st, err := stream.Open(dir, nil)
//	s, err := st.Create("orders", &stream.Config{Retention: stream.Retention{UntilAcked: true}})
//	seq, err := s.Publish(p)          // any number of goroutines
//	err = s.WaitDurable(ctx, seq)     // the confirm: group commit
//
//	g, err := s.Group("billing", nil) // any number of members
//	m, err := g.Next(ctx, buf)        // each record to one member
//	err = g.Ack(m.Seq)                // in memory, any order
//
// # Delivery
//
// A group delivers each record to one member at a time, in stream order.
// A record nacked, or not acked within AckWait, goes out again before any
// fresh record; Group.NackMsg nacks one delivery (Msg.Delivery), so that
// a member whose delivery expired cannot send the record out again from
// under the member now holding it. An unacked record goes out no sooner
// than AckWait after its delivery, and within two of the group's deadline
// checks after that: it checks every AckWait/4 (at least 1 ms apart, at
// most CheckpointEvery and 1 s), and delivering reads no clock. The
// group's committed position is the lowest record not acked; it is
// written (checkpointed) every CheckpointEvery and by Close, never past
// what is durable in the stream. After a crash a group resumes at its
// last checkpoint: delivery is at least once, and no record acked
// before that checkpoint comes again. One concept covers Kafka-style
// consumers (a group with one member, or one per partition of work) and
// AMQP-style work queues (one group, many members).
//
// # Files
//
// The store's metadata are small JSON files, each replaced atomically;
// creating and deleting a stream are single renames, so a crash leaves a
// stream whole or absent. A group's file is written before its position
// (and deleted after it), so a crash leaves a group absent or listed by
// Stream.Groups, never a position holding records for no group. A stream's log is opened on first use and closed
// after Options.IdleTimeout without use, so a store's memory is bounded by
// the streams in use, not the streams it holds.
//
// Every fdatasync and directory fsync of a store is parked (see
// wal.Options.ParkedSync) unless Options.DirectSync says otherwise: many
// streams sync at once, and a goroutine blocked in the system call would
// hold a P that the store's publishers and consumers need.
package stream
