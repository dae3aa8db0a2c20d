package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/agent"
)

// Produce records durably, wait until the sink has them, and read them
// back.
func Example() {
	sinkDir, _ := os.MkdirTemp("", "sink")
	spoolDir, _ := os.MkdirTemp("", "spool")
	defer os.RemoveAll(sinkDir)
	defer os.RemoveAll(spoolDir)
	sink := startSink(sinkDir, "127.0.0.1:0")
	defer sink.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p, err := client.NewProducer(client.SinkAddrs(sink.addr), client.SpoolDir(spoolDir), client.Logger(quiet))
	if err != nil {
		fmt.Println(err)
		return
	}
	// Produce returns once the records are fsynced in the spool.
	if err := p.Produce(ctx, []byte("hello"), []byte("world")); err != nil {
		fmt.Println(err)
	}
	// Flush returns once the sink has stored them.
	if err := p.Flush(ctx); err != nil {
		fmt.Println(err)
	}
	p.Close()

	c, err := client.NewConsumer(client.SinkAddrs(sink.addr))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	for r, err := range c.Records(ctx) {
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Printf("%d/%d %s\n", r.Offset, r.Index, r.Value)
	}
	// Output:
	// 0/0 hello
	// 0/1 world
}

// A retried call with the same producer id and sequence number is spooled
// once.
func ExampleProducer_ProduceIdempotent() {
	sinkDir, _ := os.MkdirTemp("", "sink")
	spoolDir, _ := os.MkdirTemp("", "spool")
	defer os.RemoveAll(sinkDir)
	defer os.RemoveAll(spoolDir)
	sink := startSink(sinkDir, "127.0.0.1:0")
	defer sink.stop()
	ctx := context.Background()

	p, err := client.NewProducer(client.SinkAddrs(sink.addr), client.SpoolDir(spoolDir), client.Logger(quiet))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	for range 2 {
		dup, err := p.ProduceIdempotent(ctx, "orders-7", 1, []byte("order 1"))
		fmt.Println("duplicate:", dup, err)
	}
	// Output:
	// duplicate: false <nil>
	// duplicate: true <nil>
}

// A consumer group resumes where its last Commit left it.
func ExampleConsumer_Commit() {
	sinkDir, _ := os.MkdirTemp("", "sink")
	spoolDir, _ := os.MkdirTemp("", "spool")
	defer os.RemoveAll(sinkDir)
	defer os.RemoveAll(spoolDir)
	sink := startSink(sinkDir, "127.0.0.1:0")
	defer sink.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p, err := client.NewProducer(client.SinkAddrs(sink.addr), client.SpoolDir(spoolDir), client.Logger(quiet))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range []string{"a", "b", "c"} {
		p.Produce(ctx, []byte(r)) // one message each: a call returns once its message is spooled
	}
	p.Flush(ctx)
	p.Close()

	read := func(n int) {
		c, err := client.NewConsumer(client.SinkAddrs(sink.addr), client.Group("tsdb"))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer c.Close()
		for range n {
			r, err := c.Next(ctx)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println(string(r.Value))
		}
		if err := c.Commit(ctx); err != nil {
			fmt.Println(err)
		}
	}
	read(2)
	fmt.Println("--")
	read(1)
	// Output:
	// a
	// b
	// --
	// c
}

// An HTTPProducer hands records to a running agent (`sluice agent
// --ingest ADDR`); here an in-process one.
func ExampleHTTPProducer() {
	sinkDir, _ := os.MkdirTemp("", "sink")
	spoolDir, _ := os.MkdirTemp("", "spool")
	defer os.RemoveAll(sinkDir)
	defer os.RemoveAll(spoolDir)
	sink := startSink(sinkDir, "127.0.0.1:0")
	defer sink.stop()
	a, err := agent.New(agent.Config{SinkAddr: sink.addr, SpoolDir: spoolDir, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	ingest := httptest.NewServer(a.Handler())
	defer ingest.Close()

	p, err := client.NewHTTPProducer(ingest.URL, client.Gzip())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	err = p.Produce(context.Background(), []byte(`{"level":"info"}`), []byte(`{"level":"warn"}`))
	fmt.Println(err)
	// Output:
	// <nil>
}
