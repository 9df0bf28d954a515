// Package kafkatest runs a real Apache Kafka broker for tests: one node in
// KRaft mode (broker and controller in one process), listening on
// 127.0.0.1 only, its data in a test's temporary directory.
//
// The broker is built from Maven Central jars (pom.xml beside this file),
// fetched once with `mvn dependency:copy-dependencies` into a cache
// directory ($APPENDLOG_KAFKA_JARS, or the user cache directory's
// appendlog/kafka-VERSION). It needs java (17 or later) and mvn. Where
// either is missing the test is skipped, saying what is missing, unless
// APPENDLOG_REQUIRE_KAFKA is set (as .ci/run sets it): then it fails.
package kafkatest

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/appendlog/appendlog/internal/sys"
)

// Version is the Kafka release the pom fetches.
const Version = "4.1.1"

//go:embed pom.xml
var pom []byte

// SASLUsers are the users (name to password) of Broker.SASLAddr.
var SASLUsers = map[string]string{"shipper": "shipper-pw"}

// Broker is a running Kafka broker.
type Broker struct {
	// Addr is the broker's client listener, 127.0.0.1:PORT.
	Addr string
	// SASLAddr is a second client listener, SASL_PLAINTEXT with the PLAIN
	// mechanism, that knows the users SASLUsers lists.
	SASLAddr string

	t      testing.TB
	jars   string
	dir    string // config and data
	ctrl   string // controller listener
	mu     sync.Mutex
	cmd    *exec.Cmd     // Protected by mu.
	exited chan struct{} // closed when cmd exits. Protected by mu.
	logs   *lockedWriter // its output. Protected by mu.
	// stopping is set by Stop before it signals the broker: an exit
	// before it is the broker dying under the test. Protected by mu.
	stopping bool
}

// Start starts a broker for t and stops it when t ends. It returns once the
// broker answers a metadata request.
func Start(t testing.TB) *Broker {
	t.Helper()
	jars := jarsDir(t)
	b := &Broker{t: t, jars: jars, dir: t.TempDir()}
	b.Addr, b.ctrl, b.SASLAddr = freePort(t), freePort(t), freePort(t)
	var users strings.Builder
	for u, p := range SASLUsers {
		fmt.Fprintf(&users, " user_%s=%q", u, p)
	}
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@%[2]s
listeners=PLAINTEXT://%[1]s,CONTROLLER://%[2]s,SASL_PLAINTEXT://%[4]s
advertised.listeners=PLAINTEXT://%[1]s,SASL_PLAINTEXT://%[4]s
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required%[5]s;
log.dirs=%[3]s
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
num.partitions=1
`, b.Addr, b.ctrl, filepath.Join(b.dir, "data"), b.SASLAddr, users.String())
	cfg := filepath.Join(b.dir, "server.properties")
	if err := os.WriteFile(cfg, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("java", "-cp", filepath.Join(jars, "*"), "kafka.tools.StorageTool", "format",
		"-t", "appendlog-test-cluster-1", "-c", cfg, "--ignore-formatted").CombinedOutput()
	if err != nil {
		t.Fatalf("kafkatest: format the storage: %v\n%s", err, out)
	}
	b.start()
	t.Cleanup(b.Stop)
	b.WaitReady()
	return b
}

// start runs the broker process.
func (b *Broker) start() {
	b.t.Helper()
	cmd := exec.Command("java", "-Xmx512m", "-cp", filepath.Join(b.jars, "*"), "kafka.Kafka", filepath.Join(b.dir, "server.properties"))
	logs := &lockedWriter{}
	cmd.Stdout, cmd.Stderr = logs, logs
	sys.DieWithParent(cmd) // never outlives the test
	// The parent-death signal follows the thread that started the
	// process, not the test process: start it from a thread locked to a
	// goroutine that lives as long as the broker, so that no thread exit
	// kills the broker under a running test.
	started := make(chan error, 1)
	exited := make(chan struct{})
	b.mu.Lock()
	b.stopping = false
	b.mu.Unlock()
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the broker
		if err := cmd.Start(); err != nil {
			started <- err
			close(exited)
			return
		}
		started <- nil
		err := cmd.Wait()
		b.mu.Lock()
		dying := !b.stopping
		b.mu.Unlock()
		if dying {
			// Said here, with its output, since the test then fails
			// with no more than a refused connection.
			b.t.Logf("kafkatest: the broker exited while the test ran (%v):\n%s", err, tail(logs.String()))
		}
		close(exited)
	}()
	if err := <-started; err != nil {
		b.t.Fatalf("kafkatest: start the broker: %v", err)
	}
	b.mu.Lock()
	b.cmd, b.exited, b.logs = cmd, exited, logs
	b.mu.Unlock()
}

// WaitReady waits until the broker answers a metadata request, at most a
// minute.
func (b *Broker) WaitReady() {
	b.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTimeout(time.Second))
	if err != nil {
		b.t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		bs, err := adm.ListBrokers(ctx)
		cancel()
		if err == nil && len(bs) > 0 {
			return
		}
		b.mu.Lock()
		exited, logs := b.exited, b.logs.String()
		b.mu.Unlock()
		select {
		case <-exited:
			b.t.Fatalf("kafkatest: the broker exited while starting:\n%s", tail(logs))
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("kafkatest: the broker did not answer within a minute (last: %v):\n%s", err, tail(logs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the broker (SIGTERM, then SIGKILL after 20 s) and waits for
// it to exit; Restart starts it again on the same ports and data.
func (b *Broker) Stop() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.stopping = true
	b.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart starts a stopped broker again and waits until it is ready.
func (b *Broker) Restart() {
	b.t.Helper()
	b.start()
	b.WaitReady()
}

// CreateTopic creates topic with the given partitions.
func (b *Broker) CreateTopic(topic string, partitions int32) {
	b.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		b.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		b.t.Fatalf("kafkatest: create topic %s: %v", topic, err)
	}
}

// jarsDir returns the directory holding the broker's jars, fetching them
// with mvn if needed; it skips (or fails) t without java or mvn.
func jarsDir(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, fmt.Sprintf("%s is not installed (a real Kafka broker needs java 17+ and mvn to fetch its jars)", tool))
		}
	}
	dir := os.Getenv("APPENDLOG_KAFKA_JARS")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "appendlog", "kafka-"+Version)
	}
	if _, err := os.Stat(filepath.Join(dir, "kafka_2.13-"+Version+".jar")); err == nil {
		return dir
	}
	fetchMu.Lock()
	defer fetchMu.Unlock()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "pom.xml"), pom, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	cmd := exec.Command("mvn", "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory="+tmp)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		missing(t, fmt.Sprintf("mvn could not fetch Kafka %s's jars: %v\n%s", Version, err, tail(string(out))))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

var fetchMu sync.Mutex

// missing skips t, or fails it where a real broker is required.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("APPENDLOG_REQUIRE_KAFKA") != "" {
		t.Fatalf("kafkatest: %s (APPENDLOG_REQUIRE_KAFKA is set)", why)
	}
	t.Skipf("kafkatest: %s", why)
}

// freePort returns 127.0.0.1:PORT for a port free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// lockedWriter is a buffer safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
