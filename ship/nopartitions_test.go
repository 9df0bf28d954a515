package ship

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShipTopicWithoutPartitions: metadata that lists the topic with no
// partition (a topic being created or deleted) is an error naming the
// topic, for a keyed shipper too, which would otherwise divide by the
// partition count.
func TestShipTopicWithoutPartitions(t *testing.T) {
	c := cluster(t, 1)
	c.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, a := range c.ListenAddrs() {
			host, port, _ := net.SplitHostPort(a)
			p, _ := strconv.Atoi(port)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = 0, host, int32(p)
			resp.Brokers = append(resp.Brokers, b)
		}
		resp.ControllerID = 0
		for _, rt := range req.Topics {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	l := openLog(t, 10)
	for _, keyed := range []bool{false, true} {
		o := opts(c)
		if keyed {
			o.Key = func(rec []byte) []byte { return rec[:4] }
		}
		s, err := NewKafka(l, o)
		noErr(t, err)
		err = s.Run(context.Background())
		noErr(t, s.Close())
		if err == nil || !strings.Contains(err.Error(), `"t"`) {
			t.Fatalf("keyed %v: Run on a topic without partitions: %v", keyed, err)
		}
	}
}
