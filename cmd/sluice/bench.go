package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/metricsgen"
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
	modes := fs.String("compression", "plain,zstd", "comma-separated runs: plain, zstd, zstd-fastest (zstd at --compression-level fastest)")
	feeders := fs.Int("feeders", 16, "concurrent producers calling the agent")
	transports := fs.String("transport", "grpc", "comma-separated transports agent → sink, run side by side: grpc, rsocket")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the delivery runs to this file")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	var kinds []codec.Kind
	levels := map[string]codec.Level{}
	ms := strings.Split(*modes, ",")
	for _, mode := range ms {
		switch mode {
		case "plain":
			kinds = append(kinds, codec.Plain)
		case "zstd":
			kinds = append(kinds, codec.Zstd)
		case "zstd-fastest":
			kinds = append(kinds, codec.Zstd)
			levels[mode] = codec.LevelFastest
		default:
			return &exitError{code: 2, msg: fmt.Sprintf("--compression: unknown mode %q", mode)}
		}
	}
	ts := strings.Split(*transports, ",")
	for _, tr := range ts {
		if tr != "grpc" && tr != "rsocket" {
			return &exitError{code: 2, msg: fmt.Sprintf("--transport: unknown transport %q", tr)}
		}
	}
	// runs are the delivery configurations: every mode over every transport.
	type run struct{ mode, transport, name string }
	var runs []run
	var runKinds []codec.Kind
	for i, mode := range ms {
		for _, tr := range ts {
			runs = append(runs, run{mode, tr, deliveryRunName(mode, tr, int(recSize))})
			runKinds = append(runKinds, kinds[i])
		}
	}
	ctx, stop := signalContext()
	defer stop()

	fmt.Fprintf(stderr, "generating %s records ...\n", bench.SizeName(int(recSize)))
	batches, _ := bench.Pregenerate(fixedSizeSource(int(recSize), int(msgSize))(0), 256<<20)

	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	logName := fmt.Sprintf("log append, %s records, 8 writers, fsync", bench.SizeName(int(msgSize)))
	params := map[string]any{"record_bytes": int(recSize), "message_bytes": int(msgSize), "duration_s": dur.Seconds(), "feeders": *feeders}
	var rs bench.Results
	// Configuration 0 is the log baseline; the others are the delivery
	// modes. bench.RepOrder alternates their order between reps.
	for _, step := range bench.RepOrder(bf.reps, 1+len(runs)) {
		if step.Config == 0 {
			fmt.Fprintf(stderr, "[rep %d/%d] log baseline: %s records, 8 writers, sync always, %s ...\n", step.Rep+1, bf.reps, bench.SizeName(int(msgSize)), *dur)
			logRes, err := bench.LogBench(bench.LogConfig{RecordSizes: []int{int(msgSize)}, Sync: seglog.SyncAlways(),
				Writers: 8, Duration: *dur, MaxBytes: 4 << 30})
			if err != nil {
				return err
			}
			lr := logRes[0]
			rs.Add(logName, map[string]any{"record_bytes": int(msgSize), "writers": 8, "sync": "always"}, bench.Metrics{
				// records/s in --record units, to compare with the delivery rows
				"records_per_sec": lr.Log.MBps() * 1e6 / float64(recSize),
				"mb_per_sec":      lr.Log.MBps(), "raw_mb_per_sec": lr.Raw.MBps(),
				"fsyncs_per_sec": lr.Log.FsyncsPs(), "raw_vs_log": lr.Raw.MBps() / lr.Log.MBps(),
			})
			continue
		}
		rn, kind := runs[step.Config-1], runKinds[step.Config-1]
		mode := rn.mode
		fmt.Fprintf(stderr, "[rep %d/%d] delivery, %s over %s: %s records in %s messages, fsync on both sides, %s ...\n",
			step.Rep+1, bf.reps, mode, rn.transport, bench.SizeName(int(recSize)), bench.SizeName(int(msgSize)), *dur)
		res, err := bench.RunPipeline(ctx, bench.PipelineConfig{
			Duration: *dur, Feeders: *feeders, Transport: rn.transport,
			Batches:  batches,
			Agent:    agent.Config{MaxMessageBytes: int(msgSize), Compression: kind, CompressionLevel: levels[mode]},
			Progress: stderr,
		})
		if err != nil {
			return err
		}
		if !res.Drained {
			return fmt.Errorf("%s run did not drain", mode)
		}
		st := res.Agent
		rs.Add(rn.name, map[string]any{"compression": mode, "transport": rn.transport}, bench.Metrics{
			"records_per_sec":   res.RecordsPerSec(),
			"mb_per_sec":        res.MBps(),
			"wire_mb_per_sec":   float64(st.AckedWireBytes) / res.Elapsed.Seconds() / 1e6,
			"ack_p50_s":         st.LatencyP50.Seconds(),
			"ack_p99_s":         st.LatencyP99.Seconds(),
			"ingest_p50_s":      res.IngestP50.Seconds(),
			"ingest_p99_s":      res.IngestP99.Seconds(),
			"compression_ratio": res.CompressionRatio(),
		})
	}
	// Each rep's delivery over the same rep's log rate: pairs runs that
	// were close in time.
	logRow := rs.Row(logName)
	for _, rn := range runs {
		r := rs.Row(rn.name)
		for i, m := range r.Reps {
			m["vs_log"] = m["mb_per_sec"] / logRow.Reps[i]["mb_per_sec"]
		}
	}
	fmt.Fprintf(stdout, "\n%s\n\n", repsLine(bf.reps))
	fmt.Fprintf(stdout, "| run | records/s | MB/s (records) | MB/s (wire) | ack p50 | ack p99 | vs log append |\n|---|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(stdout, "| %s | %s | %s | | | | 100%% |\n", logName, logRow.Stat("records_per_sec").Format(0), logRow.Stat("mb_per_sec").Format(1))
	fmt.Fprintf(stdout, "| raw file writes, same cadence | | %s | | | | %s |\n", logRow.Stat("raw_mb_per_sec").Format(1), pct(logRow.Stat("raw_vs_log")))
	for _, rn := range runs {
		r := rs.Row(rn.name)
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.Stat("records_per_sec").Format(0),
			r.Stat("mb_per_sec").Format(1), r.Stat("wire_mb_per_sec").Format(1),
			r.Stat("ack_p50_s").FormatDuration(), r.Stat("ack_p99_s").FormatDuration(),
			pct(r.Stat("vs_log")))
	}
	fmt.Fprintln(stdout, "\nMB/s (records): record bytes delivered and durably stored at the sink per second, end to end.")
	fmt.Fprintln(stdout, "vs log append: that figure over the log's own append throughput with the same message size (same rep).")
	// The spool and the store are two logs on one disk, each fsyncing
	// every byte delivered: plain delivery cannot pass half of one log.
	logMB := logRow.Stat("mb_per_sec").Median
	bound := fmt.Sprintf("physical bound: the spool and the store fsync the same bytes on one disk, so plain delivery ≤ ~50%% of one log's append rate: log append %.1f MB/s → ≤ ~%.1f MB/s", logMB, logMB/2)
	if r := rs.Row(deliveryName("plain", int(recSize))); r != nil {
		share := r.Stat("mb_per_sec").Median / (logMB / 2)
		bound += fmt.Sprintf("; plain delivery %.1f MB/s = %.0f%% of that bound", r.Stat("mb_per_sec").Median, 100*share)
		if share > 1.05 {
			// Two logs cannot out-fsync one disk: beyond the bound, the
			// baseline was limited by something else (CPU shared with
			// the other jobs, or a device whose fsync is nearly free).
			bound += ", above it: in this run the log baseline was not bound by the disk, so neither is delivery"
		}
	}
	bound += " (zstd writes compressed bytes to both logs, so its bound in record bytes is the compression ratio times higher)."
	fmt.Fprintln(stdout, bound)
	return bf.write("bench delivery", args, params, rs, []string{bound})
}

func deliveryName(mode string, recSize int) string {
	return fmt.Sprintf("delivery, %s, %s records", mode, bench.SizeName(recSize))
}

// deliveryRunName names a run; gRPC's keep the names they had before
// --transport, so earlier JSON results compare.
func deliveryRunName(mode, transport string, recSize int) string {
	if transport == "grpc" {
		return deliveryName(mode, recSize)
	}
	return deliveryName(mode, recSize) + ", " + transport
}

// pct prints a ratio as a percentage with its spread.
func pct(s bench.Stat) string {
	if s.N == 0 {
		return ""
	}
	s.Median, s.Min, s.Max = 100*s.Median, 100*s.Min, 100*s.Max
	if s.N == 1 {
		return fmt.Sprintf("%.0f%%", s.Median)
	}
	return fmt.Sprintf("%.0f%% (%.0f–%.0f%%)", s.Median, s.Min, s.Max)
}

// benchFlags are the flags every bench command shares.
type benchFlags struct {
	reps     int
	jsonPath string
}

func addBenchFlags(fs *flag.FlagSet) *benchFlags {
	bf := &benchFlags{}
	fs.IntVar(&bf.reps, "reps", 1, "run each configuration this many times, alternating their order between reps; tables show the median and (min–max)")
	fs.StringVar(&bf.jsonPath, "json", "", "also write every run's parameters and results, their medians and the machine (GOMAXPROCS, Go version, date, git revision) as JSON to this file")
	return bf
}

func (bf *benchFlags) check() error {
	if bf.reps < 1 {
		return &exitError{code: 2, msg: "--reps must be at least 1"}
	}
	return nil
}

// write writes the --json file, if asked for.
func (bf *benchFlags) write(command string, args []string, params map[string]any, rs bench.Results, notes []string) error {
	return bench.Report{Command: command, Args: args, Reps: bf.reps, Params: params, Machine: bench.CurrentMachine(),
		Rows: rs.Rows, Notes: notes}.WriteJSONFile(bf.jsonPath)
}

func repsLine(reps int) string {
	m := bench.CurrentMachine()
	s := fmt.Sprintf("%s, GOMAXPROCS %d, %s, %s", m.GoVersion, m.GOMAXPROCS, m.Date.Format("2006-01-02 15:04 UTC"), shortRev(m.GitRevision))
	if reps > 1 {
		s = fmt.Sprintf("%d reps per configuration, in alternating order; cells: median (min–max). %s", reps, s)
	}
	return s
}

func shortRev(r string) string {
	if r == "" {
		return "revision unknown"
	}
	if len(r) > 12 {
		d := ""
		if strings.HasSuffix(r, "-dirty") {
			d = "-dirty"
		}
		return r[:12] + d
	}
	return r
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

// runLogBenchReps runs `sluice log bench` --reps times, the record sizes
// in alternating order, and prints (and with --json writes) the results.
func runLogBenchReps(cfg bench.LogConfig, bf *benchFlags, args []string, stdout io.Writer) error {
	var rs bench.Results
	sizes := cfg.RecordSizes
	for rep := 0; rep < bf.reps; rep++ {
		c := cfg
		c.RecordSizes = slices.Clone(sizes)
		if rep%2 == 1 {
			slices.Reverse(c.RecordSizes)
		}
		if bf.reps > 1 && c.Progress != nil {
			fmt.Fprintf(c.Progress, "[rep %d/%d]\n", rep+1, bf.reps)
		}
		res, err := bench.LogBench(c)
		if err != nil {
			return err
		}
		// Rows in the order of the flag, whatever order this rep ran in.
		for _, size := range sizes {
			for _, r := range res {
				if r.RecordSize == size {
					rs.Add(r.Name(), r.Params(), r.Metrics())
				}
			}
		}
	}
	fmt.Fprintf(stdout, "\n%s\n\n", repsLine(bf.reps))
	bench.PrintLogRepsTable(stdout, rs)
	fmt.Fprintln(stdout, "\nraw = plain os.File writes of the same bytes with the same number of writes and fdatasyncs.")
	return bf.write("log bench", args, map[string]any{"duration_s": cfg.Duration.Seconds(), "max_bytes": cfg.MaxBytes}, rs, nil)
}
