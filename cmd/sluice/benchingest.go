package main

import (
	"bufio"
	"bytes"
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
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/sink"
)

func init() {
	register("bench ingest", "agent → sink (embedded store) vs agent → sink (Kafka store) vs a Kafka producer", runBenchIngest)
}

func runBenchIngest(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench ingest", "[--kafka HOST:PORT] [flags]", stderr)
	kafka := fs.String("kafka", "", "Kafka bootstrap address (default: start a broker with scripts/kafka.sh)")
	dur := fs.Duration("duration", 5*time.Second, "feeding time of each run")
	feeders := fs.Int("feeders", 16, "concurrent producers")
	recSize := byteSize(200)
	fs.Var(&recSize, "record", "record size (metrics lines cut or padded to it), the same for every run")
	msgSize := byteSize(256 << 10)
	fs.Var(&msgSize, "message", "agent message size, also the producers' batch size (batch.size)")
	java := fs.Bool("java", true, "also run Kafka's own Java producer (ProducerPerformance), without and with zstd")
	javaRecords := fs.Int64("java-records", 0, "records per Java producer run (0: sized from the rates measured so far to last about --duration)")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	if *dur <= 0 || *feeders < 1 || recSize < 1 || msgSize < recSize || *javaRecords < 0 {
		return &exitError{code: 2, msg: "--duration, --feeders, --record must be positive, --message at least --record, --java-records not negative"}
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
	// The same records for every run, Java's included: metrics lines cut
	// or padded to --record.
	source := func(i int) bench.Source { return fixedSizeSource(int(recSize), int(msgSize))(i) }
	var jcfg bench.JavaProducerConfig
	if *java {
		var err error
		if jcfg, err = javaProducerSetup(stderr, int(recSize)); err != nil {
			fmt.Fprintf(stderr, "skipping the Java producer: %v\n", err)
			*java = false
		} else {
			defer os.RemoveAll(filepath.Dir(jcfg.PayloadFile))
		}
	}
	type config struct {
		name   string
		params map[string]any
		run    func() (bench.Metrics, error)
	}
	pipe := func(scfg sink.Config) func() (bench.Metrics, error) {
		return func() (bench.Metrics, error) {
			r, err := bench.RunPipeline(ctx, bench.PipelineConfig{Duration: *dur, Feeders: *feeders, NewSource: source,
				Agent: agent.Config{MaxMessageBytes: int(msgSize)}, Sink: scfg, Progress: stderr, Drain: 2 * time.Minute})
			if err == nil && !r.Drained {
				err = errors.New("did not drain")
			}
			st := r.Agent
			return bench.Metrics{"records_per_sec": r.RecordsPerSec(), "mb_per_sec": float64(st.AckedRawBytes) / r.Elapsed.Seconds() / 1e6,
				"producer_ack_p50_s": r.IngestP50.Seconds(), "producer_ack_p99_s": r.IngestP99.Seconds(),
				"delivered_ack_p50_s": st.LatencyP50.Seconds(), "delivered_ack_p99_s": st.LatencyP99.Seconds()}, err
		}
	}
	const (
		nameEmbedded = "(a) agent → sink, embedded store, fsync before ack"
		nameViaKafka = "(b) agent → sink → Kafka (acks=all)"
		nameFranz    = "(c) franz-go producer → Kafka, acks=all, zstd"
		nameJavaNone = "(d) Kafka Java producer, acks=all, no compression"
		nameJavaZstd = "(e) Kafka Java producer, acks=all, zstd"
	)
	var rs bench.Results
	// javaRate sizes a Java run to last about --duration: its own last
	// rate, else franz-go's (rep 0 runs franz-go first), else a guess.
	javaRate := func(name string) float64 {
		for _, n := range []string{name, nameFranz} {
			if r := rs.Row(n); r != nil {
				return r.Reps[len(r.Reps)-1]["records_per_sec"]
			}
		}
		return 200_000
	}
	javaRun := func(name, compression string) func() (bench.Metrics, error) {
		return func() (bench.Metrics, error) {
			c := jcfg
			c.Topic, c.Compression, c.BatchBytes, c.Brokers = topic+"-java-"+compression, compression, int(msgSize), *kafka
			c.Records = *javaRecords
			if c.Records == 0 {
				c.Records = min(max(int64(javaRate(name)*dur.Seconds()), 10_000), 50_000_000)
			}
			c.Timeout = 10**dur + 2*time.Minute
			fmt.Fprintf(stderr, "  %d records\n", c.Records)
			r, err := bench.RunJavaProducer(ctx, c)
			return bench.Metrics{"records_per_sec": r.RecordsPerSec, "mb_per_sec": r.RecordsPerSec * float64(recSize) / 1e6,
				"records": float64(r.Records), "producer_ack_avg_s": r.AvgLatency.Seconds(), "producer_ack_max_s": r.MaxLatency.Seconds(),
				"producer_ack_p50_s": r.P50.Seconds(), "producer_ack_p99_s": r.P99.Seconds()}, err
		}
	}
	configs := []config{
		{nameEmbedded, map[string]any{"store": "embedded", "compression": "zstd"}, pipe(sink.Config{})},
		{nameViaKafka, map[string]any{"store": "kafka", "compression": "zstd"}, pipe(sink.Config{Store: "kafka://" + *kafka + "/" + topic + "-sink"})},
		{nameFranz, map[string]any{"producer": "franz-go", "compression": "zstd"}, func() (bench.Metrics, error) {
			p, err := bench.RunKafkaProducer(ctx, []string{*kafka}, topic+"-producer", *dur, *feeders, int(msgSize), source, stderr)
			return bench.Metrics{"records_per_sec": p.RecordsPerSec(), "mb_per_sec": p.MBps(),
				"producer_ack_p50_s": p.AckP50.Seconds(), "producer_ack_p99_s": p.AckP99.Seconds()}, err
		}},
	}
	if *java {
		configs = append(configs,
			config{nameJavaNone, map[string]any{"producer": "kafka-java", "compression": "none"}, javaRun(nameJavaNone, "none")},
			config{nameJavaZstd, map[string]any{"producer": "kafka-java", "compression": "zstd"}, javaRun(nameJavaZstd, "zstd")})
	}
	for _, step := range bench.RepOrder(bf.reps, len(configs)) {
		c := configs[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s: %s ...\n", step.Rep+1, bf.reps, c.name, *dur)
		m, err := c.run()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		rs.Add(c.name, c.params, m)
	}
	// Ratios pair each rep with the baseline's run of the same rep.
	ratio := func(base, key string) {
		b := rs.Row(base)
		if b == nil {
			return
		}
		for _, r := range rs.Rows {
			for i, m := range r.Reps {
				m[key] = m["records_per_sec"] / b.Reps[i]["records_per_sec"]
			}
		}
	}
	ratio(nameFranz, "vs_franz_go")
	ratio(nameJavaZstd, "vs_java_zstd")
	ratio(nameJavaNone, "vs_java_none")

	fmt.Fprintf(stdout, "\n%s; %s records, %s batches, %d feeders, %s per run\n\n", repsLine(bf.reps), bench.SizeName(int(recSize)), bench.SizeName(int(msgSize)), *feeders, *dur)
	fmt.Fprint(stdout, "| run | records/s | MB/s | producer ack p50 | producer ack p99 | delivered ack p50 | delivered ack p99 | vs franz-go |")
	if *java {
		fmt.Fprint(stdout, " vs Java producer (zstd) |")
	}
	fmt.Fprint(stdout, "\n|---|---:|---:|---:|---:|---:|---:|---:|")
	if *java {
		fmt.Fprint(stdout, "---:|")
	}
	fmt.Fprintln(stdout)
	d := func(r *bench.Row, k string) string {
		if _, ok := r.Reps[0][k]; !ok {
			return ""
		}
		return r.Stat(k).FormatDuration()
	}
	x := func(r *bench.Row, k string) string {
		s := r.Stat(k)
		if s.N == 0 {
			return ""
		}
		return s.FormatUnit(2, "×")
	}
	for _, c := range configs {
		r := rs.Row(c.name)
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s | %s |", r.Name, r.Stat("records_per_sec").Format(0), r.Stat("mb_per_sec").Format(1),
			d(r, "producer_ack_p50_s"), d(r, "producer_ack_p99_s"), d(r, "delivered_ack_p50_s"), d(r, "delivered_ack_p99_s"), x(r, "vs_franz_go"))
		if *java {
			fmt.Fprintf(stdout, " %s |", x(r, "vs_java_zstd"))
		}
		fmt.Fprintln(stdout)
	}
	var notes []string
	if *java {
		for _, name := range []string{nameEmbedded, nameViaKafka} {
			r := rs.Row(name)
			notes = append(notes, fmt.Sprintf("sluice %s / Java producer: %.2f× of zstd, %.2f× of no compression (records/s, medians of per-rep ratios)",
				name[:3], r.Stat("vs_java_zstd").Median, r.Stat("vs_java_none").Median))
		}
	}
	fmt.Fprintln(stdout, "\nrecords/s: records durably stored (sink fsync, or Kafka acks=all) per second, end to end.")
	fmt.Fprintln(stdout, "producer ack: how long a producer waits (agent: until its records are fsync'ed in the spool; franz-go: its batch's acks;")
	fmt.Fprintln(stdout, "  Java: per record, send to ack, open loop, so it includes queueing in the producer's 32 MiB buffer).")
	fmt.Fprintln(stdout, "delivered ack: from spooled to acknowledged by the sink (after its store's fsync or Kafka's acks).")
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	return bf.write("bench ingest", args, map[string]any{"record_bytes": int(recSize), "message_bytes": int(msgSize),
		"duration_s": dur.Seconds(), "feeders": *feeders, "linger_ms": 5}, rs, notes)
}

// javaProducerSetup finds Java and Kafka's tools jars (scripts/kafka.sh
// tools-env fetches them once) and writes the payload file: the metrics
// lines the other runs send, one per line.
func javaProducerSetup(stderr io.Writer, recSize int) (bench.JavaProducerConfig, error) {
	script, err := findUp("scripts/kafka.sh")
	if err != nil {
		return bench.JavaProducerConfig{}, err
	}
	cmd := exec.Command("bash", script, "tools-env")
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return bench.JavaProducerConfig{}, fmt.Errorf("%s tools-env: %w", script, err)
	}
	cfg := bench.JavaProducerConfig{Linger: 5 * time.Millisecond, Progress: stderr,
		Log4jConfig: filepath.Join(filepath.Dir(script), "kafka", "tools-log4j2.properties")}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "KAFKA_JAVA="); ok {
			cfg.Java = v
		} else if v, ok := strings.CutPrefix(line, "KAFKA_TOOLS_LIBS="); ok {
			cfg.Libs = v
		}
	}
	if cfg.Java == "" || cfg.Libs == "" {
		return cfg, fmt.Errorf("%s tools-env printed no KAFKA_JAVA or KAFKA_TOOLS_LIBS", script)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-java-")
	if err != nil {
		return cfg, err
	}
	cfg.PayloadFile = filepath.Join(dir, "payload.txt")
	if err := writePayloadFile(cfg.PayloadFile, recSize, 20_000); err != nil {
		os.RemoveAll(dir)
		return cfg, err
	}
	return cfg, nil
}

// writePayloadFile writes n records of the bench's metrics lines, one per
// line; ProducerPerformance sends them in random order.
func writePayloadFile(path string, recSize, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	src := fixedSizeSource(recSize, 256<<10)(0)
	var batch [][]byte
	for written := 0; written < n; {
		batch = src(batch[:0])
		for _, r := range batch {
			if written == n {
				break
			}
			w.Write(bytes.ReplaceAll(r, []byte{'\n'}, []byte{' '}))
			w.WriteByte('\n')
			written++
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
