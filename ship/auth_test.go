package ship

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestShipAuthorization: a user Kafka does not let write the topic, and a
// wrong password, are clear errors; nothing is acked on the cursor.
func TestShipAuthorization(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin-pw"),
		kfake.User("PLAIN", "reader", "reader-pw",
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "t", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true},
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "t", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Allow: true}),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	noErr(t, err)
	defer c.Close()
	l := openLog(t, 10)
	as := func(user, pass string) *KafkaOptions {
		return &KafkaOptions{Brokers: c.ListenAddrs(), Topic: "t", ConnectTimeout: 3 * time.Second, FlushTimeout: 3 * time.Second,
			ClientOptions: []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())}}
	}
	err = ToKafka(context.Background(), l, as("reader", "reader-pw"))
	t.Logf("no write permission: %v", err)
	if !errors.Is(err, ErrNotAuthorized) || !strings.Contains(err.Error(), "Write") {
		t.Fatalf("a user without write permission: %v", err)
	}
	o := as("reader", "reader-pw")
	o.Topic = "secret"
	if err := ToKafka(context.Background(), l, o); !errors.Is(err, ErrNotAuthorized) || !strings.Contains(err.Error(), `"secret"`) {
		t.Fatalf("a topic the user may not describe: %v", err)
	}
	err = ToKafka(context.Background(), l, as("reader", "wrong"))
	t.Logf("wrong password: %v", err)
	// kfake drops the connection on a failed SASL handshake (a real broker
	// answers SASL_AUTHENTICATION_FAILED, which the message then carries).
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), c.ListenAddrs()[0]) {
		t.Fatalf("a wrong password: %v", err)
	}
	infos, err := l.Cursors()
	noErr(t, err)
	for _, in := range infos {
		if in.Committed != 1 {
			t.Fatalf("cursor after refused runs: %+v", in)
		}
	}
}
