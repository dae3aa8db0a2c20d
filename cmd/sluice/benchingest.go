package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/metricsgen"
	"github.com/sluicehq/sluice/internal/sink"
)

func init() {
	register("bench ingest", "agent → sink (embedded store) vs agent → sink (Kafka store) vs a Kafka producer", runBenchIngest)
}

func runBenchIngest(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench ingest", "[--kafka HOST:PORT] [flags]", stderr)
	kafka := fs.String("kafka", "", "Kafka bootstrap address (default: start a broker with scripts/kafka.sh)")
	dur := fs.Duration("duration", 10*time.Second, "feeding time of each run")
	feeders := fs.Int("feeders", 16, "concurrent producers")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	if *kafka == "" {
		addr, stopKafka, err := startKafka(stderr)
		if err != nil {
			return fmt.Errorf("starting Kafka (or pass --kafka): %w", err)
		}
		defer stopKafka()
		*kafka = addr
	}
	var suffix [4]byte
	rand.Read(suffix[:])
	topic := "sluice-bench-" + hex.EncodeToString(suffix[:])
	// The same records for every run: metrics lines in collector batches.
	source := func(i int) bench.Source {
		g, err := metricsgen.New(metricsgen.Config{Seed: int64(i + 1)})
		if err != nil {
			panic(err) // fixed valid config
		}
		return bench.Source(g.NextMessage)
	}
	pipe := func(name string, scfg sink.Config) (bench.PipelineResult, error) {
		fmt.Fprintf(stderr, "%s: %s ...\n", name, *dur)
		res, err := bench.RunPipeline(ctx, bench.PipelineConfig{Duration: *dur, Feeders: *feeders, NewSource: source,
			Agent: agent.Config{}, Sink: scfg, Progress: stderr, Drain: 2 * time.Minute})
		if err == nil && !res.Drained {
			err = errors.New("did not drain")
		}
		return res, err
	}
	embedded, err := pipe("agent → sink, embedded store", sink.Config{})
	if err != nil {
		return err
	}
	viaKafka, err := pipe("agent → sink, Kafka store", sink.Config{Store: "kafka://" + *kafka + "/" + topic + "-sink"})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "franz-go producer, acks=all: %s ...\n", *dur)
	prod, err := bench.RunKafkaProducer(ctx, []string{*kafka}, topic+"-producer", *dur, *feeders, source, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\n| run | records/s | MB/s | producer ack p50 | producer ack p99 | delivered ack p50 | delivered ack p99 | vs Kafka producer |")
	fmt.Fprintln(stdout, "|---|---:|---:|---:|---:|---:|---:|---:|")
	row := func(name string, r bench.PipelineResult) {
		st := r.Agent
		mb := float64(st.AckedRawBytes) / r.Elapsed.Seconds() / 1e6
		fmt.Fprintf(stdout, "| %s | %.0f | %.1f | %s | %s | %s | %s | %.2f× |\n", name, r.RecordsPerSec(), mb,
			r.IngestP50.Round(10*time.Microsecond), r.IngestP99.Round(10*time.Microsecond),
			st.LatencyP50.Round(10*time.Microsecond), st.LatencyP99.Round(10*time.Microsecond), r.RecordsPerSec()/prod.RecordsPerSec())
	}
	row("(a) agent → sink, embedded store, fsync before ack", embedded)
	row("(b) agent → sink → Kafka (acks=all)", viaKafka)
	fmt.Fprintf(stdout, "| (c) franz-go producer → Kafka, acks=all | %.0f | %.1f | %s | %s | | | 1.00× |\n",
		prod.RecordsPerSec(), prod.MBps(), prod.AckP50.Round(10*time.Microsecond), prod.AckP99.Round(10*time.Microsecond))
	fmt.Fprintln(stdout, "\nrecords/s: records durably stored (sink fsync, or Kafka acks=all) per second, end to end.")
	fmt.Fprintln(stdout, "producer ack: how long a producer waits (agent: until its records are fsync'ed in the spool).")
	fmt.Fprintln(stdout, "delivered ack: from spooled to acknowledged by the sink (after its store's fsync or Kafka's acks).")
	return nil
}

// startKafka runs scripts/kafka.sh start in a fresh directory (found by
// walking up from the working directory) and returns the bootstrap
// address and a function that stops the broker.
func startKafka(stderr io.Writer) (string, func(), error) {
	script, err := findUp("scripts/kafka.sh")
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-kafka-")
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintln(stderr, "starting Kafka with", script, "(the first run downloads it from Maven Central) ...")
	cmd := exec.Command("bash", script, "start", "--dir", dir, "--watch-pid", strconv.Itoa(os.Getpid()))
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	addr := ""
	for sc.Scan() {
		addr = strings.TrimSpace(sc.Text())
	}
	stop := func() {
		exec.Command("bash", script, "stop", "--dir", dir).Run()
		os.RemoveAll(dir)
	}
	if addr == "" {
		stop()
		return "", nil, errors.New("scripts/kafka.sh printed no address")
	}
	return addr, stop, nil
}

func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found above the working directory; run from the repository", rel)
		}
		dir = parent
	}
}
