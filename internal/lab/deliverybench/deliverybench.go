// Package deliverybench is `sluice bench delivery`: agent → sink on
// loopback, durably stored at both ends, beside raw log appends of the
// same message size, which bound what two logs on one disk can deliver.
package deliverybench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/seglog"
)

// Config is one `sluice bench delivery`.
type Config struct {
	Duration    time.Duration // feeding time per delivery run (and log time)
	RecordSize  int
	MessageSize int      // records are packed up to it
	Modes       []string // plain, zstd, zstd-fastest
	Feeders     int      // concurrent producers calling the agent
	Transports  []string // grpc, rsocket
	CPUProfile  string   // profile the delivery runs to this file ("": none)
	Report      benchkit.Report
}

// Validate reports an unknown mode or transport, in the flags' words.
func (c Config) Validate() error {
	for _, mode := range c.Modes {
		if _, _, ok := compression(mode); !ok {
			return fmt.Errorf("--compression: unknown mode %q", mode)
		}
	}
	for _, tr := range c.Transports {
		if tr != "grpc" && tr != "rsocket" {
			return fmt.Errorf("--transport: unknown transport %q", tr)
		}
	}
	return nil
}

func compression(mode string) (codec.Kind, codec.Level, bool) {
	switch mode {
	case "plain":
		return codec.Plain, 0, true
	case "zstd":
		return codec.Zstd, 0, true
	case "zstd-fastest":
		return codec.Zstd, codec.LevelFastest, true
	}
	return 0, 0, false
}

// run is one delivery configuration: a mode over a transport.
type run struct{ mode, transport, name string }

func (c Config) runs() []run {
	var runs []run
	for _, mode := range c.Modes {
		for _, tr := range c.Transports {
			runs = append(runs, run{mode, tr, runName(mode, tr, c.RecordSize)})
		}
	}
	return runs
}

func (c Config) logName() string {
	return fmt.Sprintf("log append, %s records, 8 writers, fsync", bench.SizeName(c.MessageSize))
}

// Run measures, prints the table and writes the report; Validate first.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "generating %s records ...\n", bench.SizeName(c.RecordSize))
	batches, _ := bench.Pregenerate(benchkit.FixedSizeSource(c.RecordSize, c.MessageSize)(0), 256<<20)
	stopProfile, err := benchkit.StartCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	runs := c.runs()
	rs, err := c.measure(ctx, runs, batches, stderr)
	if err != nil {
		return err
	}
	// Each rep's delivery over the same rep's log rate: pairs runs that
	// were close in time.
	logRow := rs.Row(c.logName())
	for _, rn := range runs {
		r := rs.Row(rn.name)
		for i, m := range r.Reps {
			m["vs_log"] = m["mb_per_sec"] / logRow.Reps[i]["mb_per_sec"]
		}
	}
	c.printTable(stdout, rs, runs)
	bound := c.bound(rs)
	fmt.Fprintln(stdout, bound)
	params := map[string]any{"record_bytes": c.RecordSize, "message_bytes": c.MessageSize, "duration_s": c.Duration.Seconds(), "feeders": c.Feeders}
	return c.Report.Write(params, rs, []string{bound})
}

// measure runs the log baseline (configuration 0) and every delivery
// run, bench.RepOrder alternating their order between reps.
func (c Config) measure(ctx context.Context, runs []run, batches [][][]byte, stderr io.Writer) (bench.Results, error) {
	var rs bench.Results
	reps := c.Report.Reps
	for _, step := range bench.RepOrder(reps, 1+len(runs)) {
		if step.Config == 0 {
			fmt.Fprintf(stderr, "[rep %d/%d] log baseline: %s records, 8 writers, sync always, %s ...\n", step.Rep+1, reps, bench.SizeName(c.MessageSize), c.Duration)
			if err := c.logBaseline(&rs); err != nil {
				return rs, err
			}
			continue
		}
		rn := runs[step.Config-1]
		fmt.Fprintf(stderr, "[rep %d/%d] delivery, %s over %s: %s records in %s messages, fsync on both sides, %s ...\n",
			step.Rep+1, reps, rn.mode, rn.transport, bench.SizeName(c.RecordSize), bench.SizeName(c.MessageSize), c.Duration)
		if err := c.deliver(ctx, &rs, rn, batches, stderr); err != nil {
			return rs, err
		}
	}
	return rs, nil
}

func (c Config) logBaseline(rs *bench.Results) error {
	logRes, err := bench.LogBench(bench.LogConfig{RecordSizes: []int{c.MessageSize}, Sync: seglog.SyncAlways(),
		Writers: 8, Duration: c.Duration, MaxBytes: 4 << 30})
	if err != nil {
		return err
	}
	lr := logRes[0]
	rs.Add(c.logName(), map[string]any{"record_bytes": c.MessageSize, "writers": 8, "sync": "always"}, bench.Metrics{
		// records/s in --record units, to compare with the delivery rows
		"records_per_sec": lr.Log.MBps() * 1e6 / float64(c.RecordSize),
		"mb_per_sec":      lr.Log.MBps(), "raw_mb_per_sec": lr.Raw.MBps(),
		"fsyncs_per_sec": lr.Log.FsyncsPs(), "raw_vs_log": lr.Raw.MBps() / lr.Log.MBps(),
	})
	return nil
}

func (c Config) deliver(ctx context.Context, rs *bench.Results, rn run, batches [][][]byte, stderr io.Writer) error {
	kind, level, _ := compression(rn.mode)
	res, err := bench.RunPipeline(ctx, bench.PipelineConfig{
		Duration: c.Duration, Feeders: c.Feeders, Transport: rn.transport,
		Batches:  batches,
		Agent:    agent.Config{MaxMessageBytes: c.MessageSize, Compression: kind, CompressionLevel: level},
		Progress: stderr,
	})
	if err != nil {
		return err
	}
	if !res.Drained {
		return fmt.Errorf("%s run did not drain", rn.mode)
	}
	st := res.Agent
	rs.Add(rn.name, map[string]any{"compression": rn.mode, "transport": rn.transport}, bench.Metrics{
		"records_per_sec":   res.RecordsPerSec(),
		"mb_per_sec":        res.MBps(),
		"wire_mb_per_sec":   float64(st.AckedWireBytes) / res.Elapsed.Seconds() / 1e6,
		"ack_p50_s":         st.LatencyP50.Seconds(),
		"ack_p99_s":         st.LatencyP99.Seconds(),
		"ingest_p50_s":      res.IngestP50.Seconds(),
		"ingest_p99_s":      res.IngestP99.Seconds(),
		"compression_ratio": res.CompressionRatio(),
	})
	return nil
}

func (c Config) printTable(stdout io.Writer, rs bench.Results, runs []run) {
	logRow := rs.Row(c.logName())
	fmt.Fprintf(stdout, "\n%s\n\n", benchkit.RepsLine(c.Report.Reps))
	fmt.Fprintf(stdout, "| run | records/s | MB/s (records) | MB/s (wire) | ack p50 | ack p99 | vs log append |\n|---|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(stdout, "| %s | %s | %s | | | | 100%% |\n", c.logName(), logRow.Stat("records_per_sec").Format(0), logRow.Stat("mb_per_sec").Format(1))
	fmt.Fprintf(stdout, "| raw file writes, same cadence | | %s | | | | %s |\n", logRow.Stat("raw_mb_per_sec").Format(1), benchkit.Pct(logRow.Stat("raw_vs_log")))
	for _, rn := range runs {
		r := rs.Row(rn.name)
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.Stat("records_per_sec").Format(0),
			r.Stat("mb_per_sec").Format(1), r.Stat("wire_mb_per_sec").Format(1),
			r.Stat("ack_p50_s").FormatDuration(), r.Stat("ack_p99_s").FormatDuration(),
			benchkit.Pct(r.Stat("vs_log")))
	}
	fmt.Fprintln(stdout, "\nMB/s (records): record bytes delivered and durably stored at the sink per second, end to end.")
	fmt.Fprintln(stdout, "vs log append: that figure over the log's own append throughput with the same message size (same rep).")
}

// bound says how close plain delivery came to its physical bound: the
// spool and the store are two logs on one disk, each fsyncing every byte
// delivered, so plain delivery cannot pass half of one log.
func (c Config) bound(rs bench.Results) string {
	logMB := rs.Row(c.logName()).Stat("mb_per_sec").Median
	bound := fmt.Sprintf("physical bound: the spool and the store fsync the same bytes on one disk, so plain delivery ≤ ~50%% of one log's append rate: log append %.1f MB/s → ≤ ~%.1f MB/s", logMB, logMB/2)
	if r := rs.Row(name("plain", c.RecordSize)); r != nil {
		share := r.Stat("mb_per_sec").Median / (logMB / 2)
		bound += fmt.Sprintf("; plain delivery %.1f MB/s = %.0f%% of that bound", r.Stat("mb_per_sec").Median, 100*share)
		if share > 1.05 {
			// Two logs cannot out-fsync one disk: beyond the bound, the
			// baseline was limited by something else (CPU shared with
			// the other jobs, or a device whose fsync is nearly free).
			bound += ", above it: in this run the log baseline was not bound by the disk, so neither is delivery"
		}
	}
	return bound + " (zstd writes compressed bytes to both logs, so its bound in record bytes is the compression ratio times higher)."
}

func name(mode string, recSize int) string {
	return fmt.Sprintf("delivery, %s, %s records", mode, bench.SizeName(recSize))
}

// runName names a run; gRPC's keep the names they had before
// --transport, so earlier JSON results compare.
func runName(mode, transport string, recSize int) string {
	if transport == "grpc" {
		return name(mode, recSize)
	}
	return name(mode, recSize) + ", " + transport
}
