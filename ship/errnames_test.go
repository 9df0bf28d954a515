package ship

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShipErrorsNameTopicPartitionOffset: a record Kafka refused names
// the partition it was sent to, and a last record in Kafka that is not the
// log's names its offset too: which record of the topic to look at.
func TestShipErrorsNameTopicPartitionOffset(t *testing.T) {
	c := cluster(t, 2)
	l := openLog(t, 20)
	o := opts(c)
	o.Partition = 1
	runOnce(t, l, o)
	other := openLog(t, 0)
	for i := range 30 {
		_, err := other.Append(fmt.Appendf(nil, "another log, record %d", i+1))
		noErr(t, err)
	}
	noErr(t, other.Sync(context.Background())) // visible to the read-back's comparison
	s, err := NewKafka(other, o)
	noErr(t, err)
	err = s.Run(context.Background())
	noErr(t, s.Close())
	if err == nil || !strings.Contains(err.Error(), "the last record of t/1 (offset 19) is record 20") {
		t.Fatalf("Run of another log under the same Source: %v; %+v", err, s.Stats())
	}

	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceError(r, kerr.InvalidRecord), nil, true
	})
	appendN(t, l, 1)
	o.FlushTimeout = 5 * time.Second
	s, err = NewKafka(l, o)
	noErr(t, err)
	err = s.Run(context.Background())
	noErr(t, s.Close())
	if !errors.Is(err, kerr.InvalidRecord) || !strings.Contains(err.Error(), "Kafka refused record 21 of "+l.Dir()+", sent to t/1:") {
		t.Fatalf("Run with record 21 refused: %v", err)
	}
}
