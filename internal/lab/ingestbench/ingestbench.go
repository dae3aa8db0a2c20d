// Package ingestbench is `sluice bench ingest`: agent → sink into the
// embedded store and into Kafka, against franz-go's and Kafka's own Java
// producer writing the same records to the same broker.
package ingestbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/kafkash"
)

// Config is one `sluice bench ingest`.
type Config struct {
	Kafka       string // bootstrap address ("": start a broker with scripts/kafka.sh)
	Duration    time.Duration
	Feeders     int
	RecordSize  int   // the same for every run
	MessageSize int   // agent message size, also the producers' batch.size
	Java        bool  // also run Kafka's Java producer, without and with zstd
	JavaRecords int64 // records per Java run (0: sized to last about Duration)
	// Runs selects the rows by letter ("abcde", or a subset such as "b"):
	// profiling one path needs the others out of the profile.
	Runs string
	// OpenLoop, when positive, adds a run of (b) offered records at this
	// fraction of (b)'s measured maximum, paced whatever the acks do, so
	// that its delivered latency is the latency below saturation.
	OpenLoop float64
	// SinkCompressions are the codecs of the record batches the sink
	// produces to Kafka: one (b) row each, so that they meet the same
	// machine load in one run. The open-loop row uses the first.
	SinkCompressions []string
	// CPUProfile and AllocProfile, when set, are written over the runs.
	CPUProfile, AllocProfile string
	Report                   benchkit.Report
}

const (
	nameEmbedded = "(a) agent → sink, embedded store, fsync before ack"
	nameFranz    = "(c) franz-go producer → Kafka, acks=all, zstd"
	// nameFranzKeyed is (c) writing the records sluice's Kafka store
	// writes (the agent id as key, the one `sluice` header): the same
	// bytes for the broker as (b)'s, where (c)'s bare values are fewer.
	nameFranzKeyed = "(c′) franz-go producer → Kafka, acks=all, zstd, sluice's key and header"
	nameJavaNone   = "(d) Kafka Java producer, acks=all, no compression"
	nameJavaZstd   = "(e) Kafka Java producer, acks=all, zstd"
)

// viaKafkaName and openLoopName name the (b) and (b′) rows of the sink
// producing record batches compressed with codec: the agent's messages to
// the sink are zstd in every row but PlainHop's, the codec is the Kafka
// hop's, like (c)'s and (e)'s.
func viaKafkaName(codec string) string {
	return "(b) agent → sink → Kafka, acks=all, " + codec
}

func openLoopName(codec string) string {
	return "(b′) agent → sink → Kafka, open loop below saturation, " + codec
}

// shortName is how the notes name a row: its letter, and (b)'s codec.
func shortName(row string) string {
	if strings.HasPrefix(row, "(b)") {
		return "(b) " + row[strings.LastIndex(row, ", ")+2:]
	}
	return row[:3]
}

// config is one row of the table and how to measure it.
type config struct {
	name   string
	params map[string]any
	run    func() (bench.Metrics, error)
}

// runner holds what a run's measurements share.
type runner struct {
	Config
	ctx    context.Context
	stderr io.Writer
	topic  string
	jcfg   bench.JavaProducerConfig
	rs     bench.Results
	// sinkTopics counts the Kafka topics given to sinks (sinkStore).
	sinkTopics int
}

// sinkStore is the Store of a new sink producing batches compressed with
// codec: a topic of its own for every run.
// A sink reads its topic from the start before it stores anything (the
// dedup index is rebuilt from it), so a run on the topic of the runs
// before it re-read all their records first, and (b)'s later reps measured
// that catch-up: 5× slower than the first, delivered p50 of seconds.
func (r *runner) sinkStore(codec string) func() string {
	return func() string {
		r.sinkTopics++
		query := "compression=" + codec
		switch codec {
		case AgentRecords:
			query = "compression=zstd&agent-records=on"
		case PlainHop:
			query = "compression=zstd"
		}
		return fmt.Sprintf("kafka://%s/%s-sink-%d?%s", r.Kafka, r.topic, r.sinkTopics, query)
	}
}

// AgentRecords, among SinkCompressions, is a (b) row whose Kafka store has
// agent-records=on: the agents seal their messages as Kafka records
// sections and the sink puts their compressed bytes in the topic as they
// are (zstd).
const AgentRecords = "zstd-agent-records"

// PlainHop, among SinkCompressions, is a (b) row whose agents send their
// messages uncompressed (agent --compression none, as on a LAN) and whose
// sink compresses the Kafka batches with zstd: each record is compressed
// once, as franz-go's are, where the default row compresses it twice (the
// agent for the network, the sink for Kafka).
const PlainHop = "zstd-plain-hop"

// agentCompression is the agents' codec in a (b) row of codec.
func agentCompression(sinkCodec string) codec.Kind {
	if sinkCodec == PlainHop {
		return codec.Plain
	}
	return codec.Zstd
}

// Run starts Kafka if need be, measures, prints the table and writes the
// report.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	if c.Kafka == "" {
		addr, stopKafka, err := kafkash.Launch(stderr)
		if err != nil {
			return fmt.Errorf("starting Kafka (or pass --kafka): %w", err)
		}
		defer stopKafka()
		c.Kafka = addr
	}
	var suffix [4]byte
	rand.Read(suffix[:])
	r := &runner{Config: c, ctx: ctx, stderr: stderr, topic: "sluice-bench-" + hex.EncodeToString(suffix[:])}
	r.Java = r.Java && strings.ContainsAny(r.Runs, "de")
	if r.Java {
		var err error
		if r.jcfg, err = javaProducerSetup(stderr, c.RecordSize); err != nil {
			fmt.Fprintf(stderr, "skipping the Java producer: %v\n", err)
			r.Java = false
		} else {
			defer os.RemoveAll(filepath.Dir(r.jcfg.PayloadFile))
		}
	}
	configs := r.configs()
	stopProfiles, err := startProfiles(c.CPUProfile, c.AllocProfile)
	if err != nil {
		return err
	}
	defer stopProfiles()
	for _, step := range bench.RepOrder(c.Report.Reps, len(configs)) {
		cf := configs[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s: %s ...\n", step.Rep+1, c.Report.Reps, cf.name, c.Duration)
		cpu0 := processCPU()
		m, err := cf.run()
		if m != nil && m["records_per_sec"] > 0 && cf.name[1] <= 'c' {
			// This process's CPU per record: on a machine shared with
			// other work, a steadier measure of what a change saves than
			// the rate (the Java producer runs in another process).
			m["cpu_us_per_record"] = (processCPU() - cpu0).Seconds() * 1e6 / (m["records_per_sec"] * m["elapsed_s"])
		}
		if err != nil {
			return fmt.Errorf("%s: %w", cf.name, err)
		}
		if b, ok := m["machine_busy"]; ok && b < 0 {
			delete(m, "machine_busy") // no /proc/stat
		}
		r.rs.Add(cf.name, cf.params, m)
	}
	r.ratio(nameFranz, "vs_franz_go")
	r.ratio(nameFranzKeyed, "vs_franz_go_keyed")
	r.ratio(nameJavaZstd, "vs_java_zstd")
	r.ratio(nameJavaNone, "vs_java_none")
	stopProfiles()
	notes := r.print(stdout, configs)
	return c.Report.Write(map[string]any{"record_bytes": c.RecordSize, "message_bytes": c.MessageSize,
		"duration_s": c.Duration.Seconds(), "feeders": c.Feeders, "linger_ms": 5, "runs": c.Runs, "open_loop": c.OpenLoop}, r.rs, notes)
}

// source yields the same records for every run, Java's included: metrics
// lines cut or padded to RecordSize.
func (r *runner) source(i int) bench.Source {
	return benchkit.FixedSizeSource(r.RecordSize, r.MessageSize)(i)
}

// configs are the rows Runs selects, in table order.
func (r *runner) configs() []config {
	var out []config
	for _, c := range r.allConfigs() {
		if strings.Contains(r.Runs, c.name[1:2]) {
			out = append(out, c)
		}
	}
	return out
}

func (r *runner) allConfigs() []config {
	configs := []config{
		{nameEmbedded, map[string]any{"store": "embedded", "compression": "zstd"}, r.pipe(func() string { return "" })},
	}
	for _, codec := range r.SinkCompressions {
		configs = append(configs, config{viaKafkaName(codec), map[string]any{"store": "kafka", "compression": agentCompression(codec).String(), "kafka_compression": codec},
			r.pipeAs(agentCompression(codec), r.sinkStore(codec))})
	}
	configs = append(configs, []config{
		{nameFranz, map[string]any{"producer": "franz-go", "compression": "zstd"}, r.franz(nil)},
		{nameFranzKeyed, map[string]any{"producer": "franz-go", "compression": "zstd", "records": "sluice's key and header"}, r.franz(benchAgentID)},
	}...)
	if r.OpenLoop > 0 && len(r.SinkCompressions) > 0 {
		codec := r.SinkCompressions[0]
		configs = append(configs, config{openLoopName(codec), map[string]any{"store": "kafka", "compression": agentCompression(codec).String(), "kafka_compression": codec, "open_loop": r.OpenLoop},
			r.openLoop(codec)})
	}
	if r.Java {
		configs = append(configs,
			config{nameJavaNone, map[string]any{"producer": "kafka-java", "compression": "none"}, r.javaRun(nameJavaNone, "none")},
			config{nameJavaZstd, map[string]any{"producer": "kafka-java", "compression": "zstd"}, r.javaRun(nameJavaZstd, "zstd")})
	}
	return configs
}

// benchAgentID is the key of (c′)'s records: as long as an agent's own
// id ("agent-" and 24 hex digits, internal/agent/spool).
var benchAgentID = []byte("agent-0123456789abcdef01234567")

// franz runs franz-go's producer, its records keyed (and with sluice's
// header) when key is not nil.
func (r *runner) franz(key []byte) func() (bench.Metrics, error) {
	return func() (bench.Metrics, error) {
		topic := r.topic + "-producer"
		if key != nil {
			topic += "-keyed"
		}
		p, err := bench.RunKafkaProducer(r.ctx, []string{r.Kafka}, topic, r.Duration, r.Feeders, r.MessageSize, key, r.source, r.stderr)
		return bench.Metrics{"records_per_sec": p.RecordsPerSec(), "elapsed_s": p.Elapsed.Seconds(), "mb_per_sec": p.MBps(),
			"producer_ack_p50_s": p.AckP50.Seconds(), "producer_ack_p99_s": p.AckP99.Seconds(), "machine_busy": p.MachineBusy}, err
	}
}

// pipe runs agent → sink into the Store that store returns for each run,
// the agents compressing with zstd; pipeAs with the agents' codec given.
func (r *runner) pipe(store func() string) func() (bench.Metrics, error) {
	return r.pipeAs(codec.Zstd, store)
}

func (r *runner) pipeAs(kind codec.Kind, store func() string) func() (bench.Metrics, error) {
	return func() (bench.Metrics, error) { return r.runPipeline(kind, sink.Config{Store: store()}, r.source) }
}

// openLoop runs (b) with codec offered OpenLoop times the median rate
// that (b) row reached so far (the open-loop row comes after it in the
// first rep, so there is one): the feed is paced by the clock, not by the acks, so the delivered
// latency it reports is that of a sink below saturation.
func (r *runner) openLoop(codec string) func() (bench.Metrics, error) {
	return func() (bench.Metrics, error) {
		row := r.rs.Row(viaKafkaName(codec))
		if row == nil {
			return nil, errors.New("the open-loop run needs (b) measured first (--runs must include b)")
		}
		rate := r.OpenLoop * row.Stat("records_per_sec").Median
		fmt.Fprintf(r.stderr, "  offering %.0f records/s\n", rate)
		m, err := r.runPipeline(agentCompression(codec), sink.Config{Store: r.sinkStore(codec)()}, pacedSource(r.source, rate/pipelineGenerators))
		if m != nil {
			m["offered_records_per_sec"] = rate
		}
		return m, err
	}
}

// pipelineGenerators is bench.RunPipeline's default number of generators,
// each of which calls the source it is given.
const pipelineGenerators = 2

// pacedSource makes each generator's source yield at most rate records
// per second, on a schedule kept from the first call: a generator held up
// (the feeders' queue full) catches up after, as an open-loop load does.
func pacedSource(newSource func(int) bench.Source, rate float64) func(int) bench.Source {
	return func(i int) bench.Source {
		src := newSource(i)
		var start time.Time
		var sent float64
		return func(dst [][]byte) [][]byte {
			if start.IsZero() {
				start = time.Now()
			}
			if wait := time.Until(start.Add(time.Duration(sent / rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
			dst = src(dst)
			sent += float64(len(dst))
			return dst
		}
	}
}

func (r *runner) runPipeline(kind codec.Kind, scfg sink.Config, source func(int) bench.Source) (bench.Metrics, error) {
	p, err := bench.RunPipeline(r.ctx, bench.PipelineConfig{Duration: r.Duration, Feeders: r.Feeders, NewSource: source,
		Generators: pipelineGenerators, Agent: agent.Config{MaxMessageBytes: r.MessageSize, Compression: kind}, Sink: scfg, Progress: r.stderr, Drain: 2 * time.Minute})
	if err == nil && !p.Drained {
		err = errors.New("did not drain")
	}
	st := p.Agent
	return bench.Metrics{"records_per_sec": p.RecordsPerSec(), "elapsed_s": p.Elapsed.Seconds(), "mb_per_sec": float64(st.AckedRawBytes) / p.Elapsed.Seconds() / 1e6,
		"producer_ack_p50_s": p.IngestP50.Seconds(), "producer_ack_p99_s": p.IngestP99.Seconds(),
		"delivered_ack_p50_s": st.LatencyP50.Seconds(), "delivered_ack_p99_s": st.LatencyP99.Seconds(), "machine_busy": p.MachineBusy}, err
}

// javaRate sizes a Java run to last about Duration: its own last rate,
// else franz-go's (rep 0 runs franz-go first), else a guess.
func (r *runner) javaRate(name string) float64 {
	for _, n := range []string{name, nameFranz} {
		if row := r.rs.Row(n); row != nil {
			return row.Reps[len(row.Reps)-1]["records_per_sec"]
		}
	}
	return 200_000
}

func (r *runner) javaRun(name, compression string) func() (bench.Metrics, error) {
	return func() (bench.Metrics, error) {
		c := r.jcfg
		c.Topic, c.Compression, c.BatchBytes, c.Brokers = r.topic+"-java-"+compression, compression, r.MessageSize, r.Kafka
		c.Records = r.JavaRecords
		if c.Records == 0 {
			c.Records = min(max(int64(r.javaRate(name)*r.Duration.Seconds()), 10_000), 50_000_000)
		}
		c.Timeout = 10*r.Duration + 2*time.Minute
		fmt.Fprintf(r.stderr, "  %d records\n", c.Records)
		j, err := bench.RunJavaProducer(r.ctx, c)
		return bench.Metrics{"records_per_sec": j.RecordsPerSec, "mb_per_sec": j.RecordsPerSec * float64(r.RecordSize) / 1e6,
			"records": float64(j.Records), "producer_ack_avg_s": j.AvgLatency.Seconds(), "producer_ack_max_s": j.MaxLatency.Seconds(),
			"producer_ack_p50_s": j.P50.Seconds(), "producer_ack_p99_s": j.P99.Seconds()}, err
	}
}

// ratio pairs each rep with the baseline's run of the same rep.
func (r *runner) ratio(base, key string) {
	b := r.rs.Row(base)
	if b == nil {
		return
	}
	for _, row := range r.rs.Rows {
		for i, m := range row.Reps {
			m[key] = m["records_per_sec"] / b.Reps[i]["records_per_sec"]
		}
	}
}

// print prints the table and the notes under it; it returns the notes.
func (r *runner) print(stdout io.Writer, configs []config) []string {
	fmt.Fprintf(stdout, "\n%s; %s records, %s batches, %d feeders, %s per run\n\n", benchkit.RepsLine(r.Report.Reps), bench.SizeName(r.RecordSize), bench.SizeName(r.MessageSize), r.Feeders, r.Duration)
	fmt.Fprint(stdout, "| run | records/s | MB/s | CPU µs/record | machine busy | producer ack p50 | producer ack p99 | delivered ack p50 | delivered ack p99 | vs franz-go |")
	if r.Java {
		fmt.Fprint(stdout, " vs Java producer (zstd) |")
	}
	fmt.Fprint(stdout, "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	if r.Java {
		fmt.Fprint(stdout, "---:|")
	}
	fmt.Fprintln(stdout)
	for _, c := range configs {
		row := r.rs.Row(c.name)
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", row.Name, row.Stat("records_per_sec").Format(0), row.Stat("mb_per_sec").Format(1), cpu(row), busy(row),
			duration(row, "producer_ack_p50_s"), duration(row, "producer_ack_p99_s"), duration(row, "delivered_ack_p50_s"), duration(row, "delivered_ack_p99_s"), times(row, "vs_franz_go"))
		if r.Java {
			fmt.Fprintf(stdout, " %s |", times(row, "vs_java_zstd"))
		}
		fmt.Fprintln(stdout)
	}
	var notes []string
	if r.rs.Row(nameFranzKeyed) != nil {
		for _, row := range r.rs.Rows {
			if strings.HasPrefix(row.Name, "(b)") {
				notes = append(notes, fmt.Sprintf("sluice %s / franz-go writing the same records (c′): %.2f× (%.2f–%.2f) (records/s, medians of per-rep ratios)",
					shortName(row.Name), row.Stat("vs_franz_go_keyed").Median, row.Stat("vs_franz_go_keyed").Min, row.Stat("vs_franz_go_keyed").Max))
			}
		}
	}
	if r.Java {
		for _, row := range r.rs.Rows {
			if !strings.HasPrefix(row.Name, "(a)") && !strings.HasPrefix(row.Name, "(b)") || r.rs.Row(nameJavaZstd) == nil || r.rs.Row(nameJavaNone) == nil {
				continue
			}
			notes = append(notes, fmt.Sprintf("sluice %s / Java producer: %.2f× of zstd, %.2f× of no compression (records/s, medians of per-rep ratios)",
				shortName(row.Name), row.Stat("vs_java_zstd").Median, row.Stat("vs_java_none").Median))
		}
	}
	fmt.Fprintln(stdout, "\nrecords/s: records durably stored (sink fsync, or Kafka acks=all) per second, end to end.")
	fmt.Fprintln(stdout, "producer ack: how long a producer waits (agent: until its records are fsync'ed in the spool; franz-go: its batch's acks;")
	fmt.Fprintln(stdout, "  Java: per record, send to ack, open loop, so it includes queueing in the producer's 32 MiB buffer).")
	fmt.Fprintln(stdout, "CPU µs/record: CPU time of this process (agent and sink, or franz-go) per record stored; Kafka's broker is not counted.")
	fmt.Fprintln(stdout, "machine busy: the share of all the machine's CPUs busy while the producers fed, after the first second (/proc/stat; every process, the broker's too):")
	fmt.Fprintln(stdout, "  near 100 % a row is bound by CPU, and only less CPU per record raises it.")
	fmt.Fprintln(stdout, "delivered ack: from spooled to acknowledged by the sink (after its store's fsync or Kafka's acks).")
	for _, row := range r.rs.Rows {
		if strings.HasPrefix(row.Name, "(b′)") {
			note := fmt.Sprintf("%s offered %s records/s (%.0f %% of its (b) row's median), paced by the clock: its delivered ack is the latency below saturation",
				row.Name[:len("(b′)")], row.Stat("offered_records_per_sec").Format(0), 100*r.OpenLoop)
			notes = append(notes, note)
		}
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	return notes
}

// busy is the row's machine_busy as a percentage, or nothing (the Java
// rows, and machines without /proc/stat).
func busy(r *bench.Row) string {
	if st := r.Stat("machine_busy"); st.N > 0 {
		return fmt.Sprintf("%.0f %%", 100*st.Median)
	}
	return ""
}

func cpu(r *bench.Row) string {
	if _, ok := r.Reps[0]["cpu_us_per_record"]; !ok {
		return ""
	}
	return r.Stat("cpu_us_per_record").Format(2)
}

func duration(r *bench.Row, k string) string {
	if _, ok := r.Reps[0][k]; !ok {
		return ""
	}
	return r.Stat(k).FormatDuration()
}

func times(r *bench.Row, k string) string {
	s := r.Stat(k)
	if s.N == 0 {
		return ""
	}
	return s.FormatUnit(2, "×")
}

// startProfiles starts the CPU profile; stop ends it and writes the
// allocation profile (what this process allocated since it started: the
// runs, Kafka being another process). Only stop's first call does anything.
func startProfiles(cpuPath, allocPath string) (stop func(), err error) {
	stopCPU, err := benchkit.StartCPUProfile(cpuPath)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopCPU()
			if allocPath == "" {
				return
			}
			f, err := os.Create(allocPath)
			if err == nil {
				err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "alloc profile: %v\n", err)
			}
		})
	}, nil
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
