package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/ingestbench"
	"github.com/sluicehq/sluice/internal/store/kafkastore"
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
	runs := fs.String("runs", "abcde", "the rows to run, by letter: a subset of abcde (the Java rows d and e also need --java)")
	sinkComp := fs.String("sink-compression", kafkastore.DefaultCompression, "codecs of the record batches the sink produces to Kafka, one (b) row each, comma-separated: "+strings.Join(kafkastore.Compressions, ", ")+", "+ingestbench.AgentRecords+" (zstd with the store's agent-records=on: the agents' own compressed records), or "+ingestbench.PlainHop+" (zstd, the agents sending uncompressed: each record compressed once)")
	openLoop := fs.Float64("open-loop", 0.8, "also run (b) open loop, offered this fraction of (b)'s measured rate, for its latency below saturation (0: no such run)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (agent and sink) over the runs to this file")
	allocProfile := fs.String("allocprofile", "", "write an allocation profile of this process to this file after the runs")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	if strings.Trim(*runs, "abcde") != "" || *runs == "" || *openLoop < 0 || *openLoop >= 1 {
		return &exitError{code: 2, msg: "--runs takes letters among abcde, --open-loop a fraction from 0 to below 1"}
	}
	if *dur <= 0 || *feeders < 1 || recSize < 1 || msgSize < recSize || *javaRecords < 0 {
		return &exitError{code: 2, msg: "--duration, --feeders, --record must be positive, --message at least --record, --java-records not negative"}
	}
	codecs := strings.Split(*sinkComp, ",")
	for _, c := range codecs {
		if !slices.Contains(kafkastore.Compressions, c) && c != ingestbench.AgentRecords && c != ingestbench.PlainHop {
			return &exitError{code: 2, msg: fmt.Sprintf("--sink-compression: %q is none of %s, %s, %s", c, strings.Join(kafkastore.Compressions, ", "), ingestbench.AgentRecords, ingestbench.PlainHop)}
		}
	}
	ctx, stop := signalContext()
	defer stop()
	return ingestbench.Run(ctx, ingestbench.Config{Kafka: *kafka, Duration: *dur, Feeders: *feeders, RecordSize: int(recSize),
		MessageSize: int(msgSize), Java: *java, JavaRecords: *javaRecords, Runs: *runs, OpenLoop: *openLoop, SinkCompressions: codecs,
		CPUProfile: *cpuProfile, AllocProfile: *allocProfile, Report: bf.report("bench ingest", args)}, stdout, stderr)
}
