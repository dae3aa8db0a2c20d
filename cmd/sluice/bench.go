package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/metricsgen"
	"github.com/sluicehq/sluice/seglog"
)

func init() {
	register("bench delivery", "agent → sink on loopback beside raw log appends of the same message size", runBenchDelivery)
}

func runBenchDelivery(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench delivery", "[flags]", stderr)
	dur := fs.Duration("duration", 8*time.Second, "feeding time per delivery run (and log time)")
	recSize := byteSize(200)
	fs.Var(&recSize, "record", "record size")
	msgSize := byteSize(256 << 10)
	fs.Var(&msgSize, "message", "message size (records are packed up to it)")
	modes := fs.String("compression", "plain,zstd", "comma-separated runs: plain, zstd")
	feeders := fs.Int("feeders", 16, "concurrent producers calling the agent")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the delivery runs to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()

	fmt.Fprintf(stderr, "log baseline: %s records, 8 writers, sync always, %s ...\n", bench.SizeName(int(msgSize)), *dur)
	logRes, err := bench.LogBench(bench.LogConfig{RecordSizes: []int{int(msgSize)}, Sync: seglog.SyncAlways(),
		Writers: 8, Duration: *dur, MaxBytes: 4 << 30})
	if err != nil {
		return err
	}
	lr := logRes[0]
	fmt.Fprintf(stderr, "generating %s records ...\n", bench.SizeName(int(recSize)))
	batches, _ := bench.Pregenerate(fixedSizeSource(int(recSize), int(msgSize))(0), 256<<20)

	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	type row struct {
		mode string
		res  bench.PipelineResult
	}
	var rows []row
	for _, mode := range strings.Split(*modes, ",") {
		var kind codec.Kind
		switch mode {
		case "plain":
			kind = codec.Plain
		case "zstd":
			kind = codec.Zstd
		default:
			return &exitError{code: 2, msg: fmt.Sprintf("--compression: unknown mode %q", mode)}
		}
		fmt.Fprintf(stderr, "delivery, %s: %s records in %s messages, fsync on both sides, %s ...\n",
			mode, bench.SizeName(int(recSize)), bench.SizeName(int(msgSize)), *dur)
		res, err := bench.RunPipeline(ctx, bench.PipelineConfig{
			Duration: *dur, Feeders: *feeders,
			Batches:  batches,
			Agent:    agent.Config{MaxMessageBytes: int(msgSize), Compression: kind},
			Progress: stderr,
		})
		if err != nil {
			return err
		}
		if !res.Drained {
			return fmt.Errorf("%s run did not drain", mode)
		}
		rows = append(rows, row{mode, res})
	}
	fmt.Fprintf(stdout, "\n| run | records/s | MB/s (records) | MB/s (wire) | ack p50 | ack p99 | vs log append |\n|---|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(stdout, "| log append, %s records, 8 writers, fsync | %.0f | %.1f | | | | 100%% |\n",
		bench.SizeName(int(msgSize)), lr.Log.RecordsPs()*float64(int(msgSize))/float64(recSize), lr.Log.MBps())
	fmt.Fprintf(stdout, "| raw file writes, same cadence | | %.1f | | | | %.0f%% |\n", lr.Raw.MBps(), 100*lr.Raw.MBps()/lr.Log.MBps())
	for _, r := range rows {
		st := r.res.Agent
		wire := float64(st.AckedWireBytes) / r.res.Elapsed.Seconds() / 1e6
		fmt.Fprintf(stdout, "| delivery, %s, %s records | %.0f | %.1f | %.1f | %s | %s | %.0f%% |\n",
			r.mode, bench.SizeName(int(recSize)), r.res.RecordsPerSec(), r.res.MBps(), wire,
			st.LatencyP50.Round(100*time.Microsecond), st.LatencyP99.Round(100*time.Microsecond), 100*r.res.MBps()/lr.Log.MBps())
	}
	fmt.Fprintln(stdout, "\nMB/s (records): record bytes delivered and durably stored at the sink per second, end to end.")
	fmt.Fprintln(stdout, "vs log append: that figure over the log's own append throughput with the same message size.")
	return nil
}

// fixedSizeSource yields realistic metric lines cut or padded to size,
// about one message's worth per call.
func fixedSizeSource(size, message int) func(int) bench.Source {
	return func(feeder int) bench.Source {
		g, err := metricsgen.New(metricsgen.Config{Seed: int64(feeder + 1)})
		if err != nil {
			panic(err) // fixed valid config
		}
		per := max(1, message/size/4)
		arena := make([]byte, 0, per*size)
		var line []byte
		return func(dst [][]byte) [][]byte {
			arena = arena[:0]
			for i := 0; i < per; i++ {
				line = g.AppendRecord(line[:0])
				for len(line) < size {
					line = append(line, ' ')
				}
				start := len(arena)
				arena = append(arena, line[:size]...)
				dst = append(dst, arena[start:start+size])
			}
			return dst
		}
	}
}
