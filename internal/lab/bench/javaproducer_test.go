package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Captured from ProducerPerformance of Kafka 4.1.2 (zstd, 1M records of
// 200 B, single local broker): a warning, one progress line, the summary.
const producerPerfSample = `[2026-11-23 19:05:14,788] WARN [Producer clientId=perf-producer-client] The metadata response from the cluster reported a recoverable issue with correlation id 1 : {perf-zstd=UNKNOWN_TOPIC_OR_PARTITION} (org.apache.kafka.clients.NetworkClient)
920211 records sent, 184005.4 records/sec (35.10 MB/sec), 53.6 ms avg latency, 462.0 ms max latency.
1000000 records sent, 187617.3 records/sec (35.79 MB/sec), 50.20 ms avg latency, 462.00 ms max latency, 13 ms 50th, 208 ms 95th, 309 ms 99th, 337 ms 99.9th.
`

func TestParseProducerPerformance(t *testing.T) {
	got, err := ParseProducerPerformance(producerPerfSample)
	if err != nil {
		t.Fatal(err)
	}
	want := JavaProducerResult{Records: 1000000, RecordsPerSec: 187617.3, MBps: 35.79,
		AvgLatency: 50200 * time.Microsecond, MaxLatency: 462 * time.Millisecond,
		P50: 13 * time.Millisecond, P95: 208 * time.Millisecond, P99: 309 * time.Millisecond, P999: 337 * time.Millisecond}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseProducerPerformanceNoSummary(t *testing.T) {
	// A run killed before its end prints progress lines only: no result,
	// rather than the progress line's partial numbers.
	progressOnly := strings.SplitN(producerPerfSample, "\n", 3)[:2]
	for _, out := range []string{"", "Exception in thread \"main\" org.apache.kafka.common.KafkaException\n", strings.Join(progressOnly, "\n")} {
		if r, err := ParseProducerPerformance(out); err == nil {
			t.Errorf("%q: parsed %+v, want an error", out, r)
		}
	}
}

func TestJavaProducerArgs(t *testing.T) {
	args := JavaProducerConfig{Java: "java", Libs: "/l", Brokers: "127.0.0.1:9092", Topic: "t", Records: 5000,
		PayloadFile: "/p", Compression: "zstd", BatchBytes: 256 << 10, Linger: 5 * time.Millisecond}.Args()
	for _, want := range []string{"/l/*", "org.apache.kafka.tools.ProducerPerformance", "acks=all", "compression.type=zstd",
		"batch.size=262144", "linger.ms=5", "5000", "/p", "bootstrap.servers=127.0.0.1:9092", "-Duser.language=en"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %q: %q", want, args)
		}
	}
}

// The JVM writes a line in several pieces; each line gets one prefix.
func TestLineWriter(t *testing.T) {
	var b strings.Builder
	lw := &lineWriter{w: &b, prefix: "> "}
	for _, p := range []string{"12 records", " sent, ", "1.5 ms\nnext", " line\ntail"} {
		lw.Write([]byte(p))
	}
	lw.flush()
	if got, want := b.String(), "> 12 records sent, 1.5 ms\n> next line\n> tail\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
