package main

import (
	"flag"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/lab/s3bench"
	"github.com/sluicehq/sluice/internal/lab/uploadbench"
	"github.com/sluicehq/sluice/internal/xfer/s3store"
)

func init() {
	register("bench upload", "file upload chunk-size sweep: gRPC, RSocket, tus, HTTP/1.1 and h2c POST, timed to the verified answer", runBenchUpload)
}

func runBenchUpload(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench upload", "[--size 64MiB] [--chunks 16B,...,2MiB] [--transports grpc,rsocket,tus,http1,h2c] [--source memory,disk] [--reps 1] [--json FILE] [--svg FILE] | --store s3://BUCKET[/PREFIX]?endpoint=URL [--size 1GiB] [--reps 3] [--json FILE] [flags]", stderr)
	store := fs.String("store", "", "instead of the sweep: upload --size into this S3 store through one and two `xfer serve --store` processes (gRPC), against the S3 SDK's own multipart upload straight to it; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	size := byteSize(64 << 20)
	fs.Var(&size, "size", "file size (\"Sending files via gRPC\" used 143MiB)")
	perChunk := fs.Int("per-chunk", 0, "bound a cell's file to this many chunks (0: no bound), so that tiny chunks finish in seconds")
	auto := fs.Bool("auto", true, "add a --chunk auto cell for gRPC, RSocket and tus")
	knownSHA := fs.Bool("known-sha", false, "give the gRPC, RSocket and tus senders the file's SHA-256 (they then read it once and do not hash it), as the POST baseline is: its client hashes nothing; default: they hash while sending, as `sluice xfer send` does")
	chunks := append(sizeList(nil), uploadbench.GuploadSweep...)
	fs.Var(&chunks, "chunks", "chunk sizes (tus: PATCH size, below 64KiB skipped; POST: the body's read size)")
	transports := fs.String("transports", "grpc,rsocket,tus,http1,h2c", "comma-separated: grpc, rsocket, tus, http1, h2c")
	sources := fs.String("source", "memory,disk", "comma-separated: memory (a byte slice), disk (a file, from the page cache)")
	reps := fs.Int("reps", 1, "repetitions of each cell (the median is reported)")
	dir := fs.String("dir", "", "server directory (default: a temporary one under /dev/shm when it exists, so the disk is not measured)")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	svgOut := fs.String("svg", "", "write a chart (MB/s by chunk size) to this SVG file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole sweep to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *store != "" {
		var sweepOnly []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "store" && f.Name != "size" && f.Name != "reps" && f.Name != "json" {
				sweepOnly = append(sweepOnly, "--"+f.Name)
			}
		})
		if len(sweepOnly) > 0 {
			return usageError(fs, "--store takes only --size, --reps and --json, not %s", strings.Join(sweepOnly, ", "))
		}
		report := benchkit.Report{Command: "bench upload", Args: args, Reps: *reps, JSONPath: *jsonOut}
		return benchUploadS3(*store, int64(size), report, stdout, stderr)
	}
	cfg := uploadbench.Config{Size: int64(size), PerChunk: *perChunk, Auto: *auto, KnownSHA: *knownSHA, Chunks: chunks,
		Transports: strings.Split(*transports, ","), Sources: strings.Split(*sources, ","), Reps: *reps,
		Dir: *dir, JSONPath: *jsonOut, SVGPath: *svgOut, Args: args}
	if err := cfg.Validate(); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	ctx, stop := signalContext()
	defer stop()
	stopProfile, err := benchkit.StartCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	return uploadbench.Run(ctx, cfg, stdout, stderr)
}

// benchUploadS3 is `bench upload --store`: the servers it starts are this
// binary's `xfer serve`.
func benchUploadS3(store string, size int64, report benchkit.Report, stdout, stderr io.Writer) error {
	if _, err := s3store.ParseURL(store); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if report.Reps < 1 || size < 1 {
		return &exitError{code: 2, msg: "--reps and --size must be positive"}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return s3bench.Run(ctx, s3bench.Config{Store: store, Size: size, Reps: report.Reps, Sluice: exe, Report: report}, stdout, stderr)
}
