package ship

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/appendlog/appendlog/wal"
)

// TestShipNewLogSameSourceUnflushed: as TestShipNewLogSameSource, a log
// made anew under the Source of one shipped before, whose records Run
// starts on before the log handed them to the OS (they wait in its
// buffer, FlushInterval long). The read-back compared Kafka's last record
// of the source (record 20 of the old log) with nothing, took it for the
// new log's, and skipped records 1 to 20 of the new log as shipped; it
// now waits for record 20 to be readable, finds it is not the same, and
// sends nothing.
func TestShipNewLogSameSourceUnflushed(t *testing.T) {
	c := cluster(t, 1)
	o := opts(c)
	runOnce(t, openLog(t, 20), o)
	l, err := wal.Open(t.TempDir(), &wal.Options{FlushInterval: time.Hour})
	noErr(t, err)
	defer l.Close()
	for i := range 30 {
		_, err := l.Append(fmt.Appendf(nil, "new log, record %d", i+1))
		noErr(t, err)
	}
	s, err := NewKafka(l, o)
	noErr(t, err)
	err = s.Run(context.Background())
	st := s.Stats()
	noErr(t, s.Close())
	if err == nil || !strings.Contains(err.Error(), "is not the same") || st.Skipped != 0 || st.Shipped != 0 {
		t.Fatalf("a new log under the source of an old one, not yet flushed: %v; %+v", err, st)
	}
}
