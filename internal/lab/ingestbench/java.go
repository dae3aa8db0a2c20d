package ingestbench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/testkit/kafkash"
)

// javaProducerSetup finds Java and Kafka's tools jars (scripts/kafka.sh
// tools-env fetches them once) and writes the payload file: the metrics
// lines the other runs send, one per line.
func javaProducerSetup(stderr io.Writer, recSize int) (bench.JavaProducerConfig, error) {
	script, err := kafkash.Script()
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
	src := benchkit.FixedSizeSource(recSize, 256<<10)(0)
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
