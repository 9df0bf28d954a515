package stream

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// Config is a stream's configuration, fixed at Create and kept in the
// stream's stream.json. A zero field means the default.
type Config struct {
	// SegmentSize is the size of the stream's segment files (at least
	// 64 KiB). Default DefaultSegmentSize.
	SegmentSize int64
	// Sync is the durability mode of the stream's log (see wal.SyncMode).
	// Default wal.SyncBatch: group commit, shared by every publisher.
	Sync wal.SyncMode
	// Retention bounds what the stream keeps.
	Retention Retention
	// MaxRecordSize bounds one record's payload: a larger Publish is
	// wal.ErrTooLarge. It is fixed at Create, so that every record the
	// stream holds stays readable however the store's default buffer
	// sizes change (they shrink as the store holds more streams). The
	// stream's write buffer is at least twice it (see
	// Options.BufferSize); at most MaxMaxRecordSize. Default
	// DefaultMaxRecordSize, or a quarter of an explicit
	// Options.BufferSize.
	MaxRecordSize int
}

// Record size bounds.
const (
	// DefaultMaxRecordSize is the default Config.MaxRecordSize: the
	// largest record a default-sized buffer of the smallest size
	// (64 KiB, in a store of 1,024 streams or more) holds.
	DefaultMaxRecordSize = 32 << 10
	// MaxMaxRecordSize is the largest Config.MaxRecordSize.
	MaxMaxRecordSize = 128 << 20
	// _legacyMaxRecord is the bound of a stream whose stream.json
	// predates max_record_size: the largest record a default buffer ever
	// took (DefaultBufferSize/4).
	_legacyMaxRecord = DefaultBufferSize / 4
)

// Retention bounds what a stream keeps. Whole segments, oldest first, are
// deleted; the segment being written never is.
type Retention struct {
	// MaxBytes bounds the size of the stream's segment files.
	MaxBytes int64
	// MaxAge deletes a segment whose last record is older than MaxAge.
	MaxAge time.Duration
	// UntilAcked keeps every record some group has not acked: MaxBytes
	// and MaxAge never delete a record at or after a group's checkpointed
	// position, and records every group has acked are deleted (segment by
	// segment, after each group checkpoint), as a work queue or an
	// interest-based stream does. A stream with no group loses nothing to
	// acks, but only groups hold records from MaxBytes and MaxAge: with no
	// group they delete as they would without UntilAcked.
	// Without it, retention deletes records whether or not groups have
	// consumed them; a group whose position was deleted skips to the first
	// record left and counts what it skipped (GroupStats.Skipped).
	UntilAcked bool
}

// validate reports a Config that cannot be used.
func (c *Config) validate() error {
	if c.MaxRecordSize < 0 || c.MaxRecordSize > MaxMaxRecordSize {
		return fmt.Errorf("MaxRecordSize %d not in [1, %d]", c.MaxRecordSize, MaxMaxRecordSize)
	}
	wo := c.walOptions(&Options{BufferSize: DefaultBufferSize})
	if err := wo.Validate(); err != nil {
		return err
	}
	if c.Retention.MaxBytes < 0 || c.Retention.MaxAge < 0 {
		return fmt.Errorf("negative retention bound (MaxBytes %d, MaxAge %v)", c.Retention.MaxBytes, c.Retention.MaxAge)
	}
	return nil
}

// walOptions returns the options of the stream's log in a store opened
// with o: its buffer is o.BufferSize, or the least power of two at least
// twice MaxRecordSize if that is larger.
func (c *Config) walOptions(o *Options) wal.Options {
	seg := c.SegmentSize
	if seg == 0 {
		seg = DefaultSegmentSize
	}
	maxRec := c.MaxRecordSize
	if maxRec == 0 {
		maxRec = DefaultMaxRecordSize
	}
	buffer := max(o.BufferSize, 1<<bits.Len(uint(2*maxRec-1)))
	return wal.Options{
		SegmentSize:   seg,
		BufferSize:    buffer,
		MaxRecordSize: maxRec,
		ReaderWindow:  o.ReaderWindow,
		Sync:          c.Sync,
		Retention: wal.Retention{
			MaxBytes:      c.Retention.MaxBytes,
			MaxAge:        c.Retention.MaxAge,
			IgnoreCursors: !c.Retention.UntilAcked,
		},
	}
}

// configFile is stream.json.
type configFile struct {
	Version     int    `json:"version"`
	Name        string `json:"name"`
	SegmentSize int64  `json:"segment_size,omitempty"`
	Sync        string `json:"sync,omitempty"`
	MaxBytes    int64  `json:"retention_max_bytes,omitempty"`
	MaxAge      string `json:"retention_max_age,omitempty"`
	UntilAcked  bool   `json:"retention_until_acked,omitempty"`
	// MaxRecordSize is 0 in the files of streams created before it was
	// recorded.
	MaxRecordSize int `json:"max_record_size,omitempty"`
}

const _configVersion = 1

// file returns the stream.json content of stream name.
func (c *Config) file(name string) configFile {
	f := configFile{
		Version:       _configVersion,
		Name:          name,
		SegmentSize:   c.SegmentSize,
		MaxBytes:      c.Retention.MaxBytes,
		UntilAcked:    c.Retention.UntilAcked,
		MaxRecordSize: c.MaxRecordSize,
	}
	if c.Sync != 0 {
		f.Sync = c.Sync.String()
	}
	if c.Retention.MaxAge != 0 {
		f.MaxAge = c.Retention.MaxAge.String()
	}
	return f
}

// config decodes f, or says what is wrong with it.
func (f *configFile) config() (Config, string) {
	if f.Version != _configVersion {
		return Config{}, fmt.Sprintf("version %d, this build reads version %d", f.Version, _configVersion)
	}
	c := Config{SegmentSize: f.SegmentSize, MaxRecordSize: f.MaxRecordSize, Retention: Retention{MaxBytes: f.MaxBytes, UntilAcked: f.UntilAcked}}
	if f.Sync != "" {
		m, err := wal.ParseSyncMode(f.Sync)
		if err != nil {
			return Config{}, fmt.Sprintf("sync: %v", err)
		}
		c.Sync = m
	}
	if f.MaxAge != "" {
		d, err := time.ParseDuration(f.MaxAge)
		if err != nil {
			return Config{}, fmt.Sprintf("retention_max_age: %v", err)
		}
		c.Retention.MaxAge = d
	}
	if err := c.validate(); err != nil {
		return Config{}, err.Error()
	}
	return c, ""
}
