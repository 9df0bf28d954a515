package ship_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/appendlog/appendlog/ship"
	"github.com/appendlog/appendlog/wal"
)

// Ship a log to Kafka as it grows, until SIGINT: the records in flight are
// acknowledged and the cursor committed before ToKafka returns. The
// service appends to l meanwhile, from its own goroutines. (Compiled, not
// run: it needs a broker.)
func Example() {
	l, err := wal.Open("/var/lib/app/log", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err = ship.ToKafka(ctx, l, &ship.KafkaOptions{
		Brokers: []string{"127.0.0.1:9092"},
		Topic:   "events",
		Follow:  true,
	})
	if err != nil {
		log.Fatal(err)
	}
}
