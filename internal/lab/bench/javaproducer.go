package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// JavaProducerConfig runs Kafka's own producer benchmark,
// org.apache.kafka.tools.ProducerPerformance (what the distribution's
// bin/kafka-producer-perf-test.sh runs), as a child JVM.
type JavaProducerConfig struct {
	Java string // java binary
	Libs string // directory of the kafka-tools jars and their dependencies
	// Log4jConfig, if set, is passed as -Dlog4j2.configurationFile.
	Log4jConfig string
	Brokers     string // bootstrap servers
	Topic       string
	Records     int64  // --num-records: the run ends after these are acknowledged
	PayloadFile string // one record per line (--payload-file)
	Compression string // compression.type: none, zstd, ...
	// BatchBytes and Linger are batch.size and linger.ms: set them to the
	// agent's message size and linger, so both batch alike.
	BatchBytes int
	Linger     time.Duration
	// Timeout kills the JVM if it has not finished by then.
	Timeout  time.Duration
	Progress io.Writer // the tool's own lines (its ~5 s progress, warnings); nil: discarded
}

// Args is the command line (after the java binary) RunJavaProducer runs.
func (c JavaProducerConfig) Args() []string {
	args := []string{"-Xmx1g", "-Duser.language=en", "-Duser.country=US"} // '.' decimals in its output
	if c.Log4jConfig != "" {
		args = append(args, "-Dlog4j2.configurationFile="+c.Log4jConfig)
	}
	return append(args, "-cp", c.Libs+"/*", "org.apache.kafka.tools.ProducerPerformance",
		"--topic", c.Topic, "--num-records", strconv.FormatInt(c.Records, 10), "--throughput", "-1",
		"--payload-file", c.PayloadFile,
		"--producer-props", "bootstrap.servers="+c.Brokers, "acks=all", "enable.idempotence=true",
		"compression.type="+c.Compression, "batch.size="+strconv.Itoa(c.BatchBytes),
		"linger.ms="+strconv.FormatInt(c.Linger.Milliseconds(), 10))
}

// JavaProducerResult is ProducerPerformance's final summary line.
type JavaProducerResult struct {
	Records       int64
	RecordsPerSec float64
	MBps          float64 // as the tool prints it: MiB of record values per second
	AvgLatency    time.Duration
	MaxLatency    time.Duration
	P50, P95, P99 time.Duration
	P999          time.Duration
}

// RunJavaProducer runs ProducerPerformance to the end and parses its
// summary.
func RunJavaProducer(ctx context.Context, cfg JavaProducerConfig) (JavaProducerResult, error) {
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, cfg.Java, cfg.Args()...)
	var out bytes.Buffer
	w := io.Writer(&out)
	lw := &lineWriter{w: cfg.Progress, prefix: "  [java] "}
	if cfg.Progress != nil {
		// One writer for both: exec then calls it from one goroutine at a time.
		w = io.MultiWriter(&out, lw)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	lw.flush()
	if err != nil {
		if ctx.Err() != nil {
			return JavaProducerResult{}, fmt.Errorf("ProducerPerformance did not finish %d records in %s: %w", cfg.Records, cfg.Timeout, ctx.Err())
		}
		return JavaProducerResult{}, fmt.Errorf("ProducerPerformance: %w\n%s", err, lastLines(out.String(), 10))
	}
	res, err := ParseProducerPerformance(out.String())
	if err != nil {
		return res, fmt.Errorf("%w\n%s", err, lastLines(out.String(), 10))
	}
	return res, nil
}

// The final line; the progress lines every 5 s lack the percentiles.
var producerSummary = regexp.MustCompile(`(\d+) records sent, ([0-9.]+) records/sec \(([0-9.]+) MB/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.`)

// ParseProducerPerformance finds the summary line in ProducerPerformance's
// output:
//
//	1000000 records sent, 211416.5 records/sec (40.32 MB/sec), 344.43 ms avg latency, 651.00 ms max latency, 363 ms 50th, 590 ms 95th, 637 ms 99th, 641 ms 99.9th.
func ParseProducerPerformance(out string) (JavaProducerResult, error) {
	var m []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if s := producerSummary.FindStringSubmatch(sc.Text()); s != nil {
			m = s
		}
	}
	if m == nil {
		return JavaProducerResult{}, errors.New("ProducerPerformance printed no summary line")
	}
	var r JavaProducerResult
	var err error
	num := func(s string) float64 {
		v, e := strconv.ParseFloat(s, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("ProducerPerformance summary: %q: %w", s, e)
		}
		return v
	}
	ms := func(s string) time.Duration { return time.Duration(num(s) * float64(time.Millisecond)) }
	r.Records = int64(num(m[1]))
	r.RecordsPerSec, r.MBps = num(m[2]), num(m[3])
	r.AvgLatency, r.MaxLatency = ms(m[4]), ms(m[5])
	r.P50, r.P95, r.P99, r.P999 = ms(m[6]), ms(m[7]), ms(m[8]), ms(m[9])
	return r, err
}

// lineWriter prefixes each whole line (the JVM writes lines in pieces).
type lineWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	return len(b), nil
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 && l.w != nil {
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf)
		l.buf = nil
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
