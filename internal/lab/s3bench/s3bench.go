// Package s3bench is `sluice bench upload --store s3://…`: one file
// uploaded into an S3 object store through one `xfer serve --store`
// process, through two (half the file to each, at once), and straight
// from the S3 SDK's own multipart uploader (transfermanager, its default
// concurrency and part size) as the baseline: throughput to the verified,
// visible object, and the servers' memory. With --json, every rep's
// figures in the envelope of the other bench commands (bench.Report).
package s3bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/xfer/s3store"
	"github.com/sluicehq/sluice/internal/xfer/send"
)

// Config is one run.
type Config struct {
	Store string // s3://BUCKET[/PREFIX]?endpoint=…
	Size  int64
	Reps  int
	// Sluice is the sluice binary the servers run (`xfer serve`).
	Sluice string
	// Report is where the --json file goes.
	Report benchkit.Report
}

// The rows, one per way of uploading, in the table's order.
var rowNames = []string{"S3 SDK multipart, straight (transfermanager: 5 parts at once, 8 MiB)",
	"sluice xfer send → 1 xfer serve --store", "sluice xfer send ×2 → 2 xfer serve --store (half each)"}

// Each rep of a row measures these (the names carry the units).
const (
	metricSeconds = "seconds"
	metricMBps    = "mb_per_sec"     // 1e6 bytes/s, to the verified, visible object
	metricXDirect = "x_direct"       // the rep's MB/s over the same rep's direct upload
	metricPeakRSS = "peak_rss_bytes" // the servers' peak RSS (VmHWM), summed
)

// Run measures the three rows, Reps times each, interleaved (so that a
// loaded machine's drift hits them alike), and prints a table.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	loc, err := s3store.ParseURL(cfg.Store)
	if err != nil {
		return err
	}
	c, err := s3store.Client(loc)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sluice-s3bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	half := cfg.Size / 2
	whole, a, b := filepath.Join(dir, "whole"), filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []struct {
		path string
		n    int64
	}{{whole, cfg.Size}, {a, half}, {b, cfg.Size - half}} {
		if err := randomFile(f.path, f.n); err != nil {
			return err
		}
	}
	var rs bench.Results
	mb := float64(cfg.Size) / 1e6
	for rep := 0; rep < cfg.Reps; rep++ {
		fmt.Fprintf(stderr, "rep %d of %d\n", rep+1, cfg.Reps)
		secs, err := direct(ctx, c, loc, whole, rep)
		if err != nil {
			return err
		}
		base := mb / secs
		rs.Add(rowNames[0], map[string]any{"servers": 0}, bench.Metrics{metricSeconds: secs, metricMBps: base, metricXDirect: 1})
		for i, files := range [][]string{{whole}, {a, b}} {
			secs, peak, err := throughServers(ctx, cfg, files, rep, stderr)
			if err != nil {
				return err
			}
			rs.Add(rowNames[i+1], map[string]any{"servers": len(files)},
				bench.Metrics{metricSeconds: secs, metricMBps: mb / secs, metricXDirect: mb / secs / base, metricPeakRSS: peak})
			for j := range files {
				key := loc.Prefix + fmt.Sprintf("bench-%d-%d-%d", i, rep, j)
				c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &loc.Bucket, Key: &key})
			}
		}
	}
	rs.Summarize()
	printTable(stdout, cfg, rs)
	return cfg.Report.Write(map[string]any{"store": cfg.Store, "size_bytes": cfg.Size}, rs, nil)
}

// direct uploads the file whole straight to the store with the S3 SDK's
// own multipart uploader, and returns the seconds it took.
func direct(ctx context.Context, c *s3.Client, loc s3store.Location, path string, rep int) (float64, error) {
	t0 := time.Now()
	tm := transfermanager.New(c)
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	key := loc.Prefix + fmt.Sprintf("bench-direct-%d", rep)
	_, err = tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: &loc.Bucket, Key: &key, Body: f})
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("direct upload: %w", err)
	}
	secs := time.Since(t0).Seconds()
	c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &loc.Bucket, Key: &key})
	return secs, nil
}

// throughServers starts one `xfer serve --store` per file, sends each
// file to its server at once, and returns the wall time until every
// file is verified and visible, and the servers' peak RSS in bytes.
func throughServers(ctx context.Context, cfg Config, files []string, rep int, stderr io.Writer) (float64, float64, error) {
	var addrs []string
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	for range files {
		cmd, addr, err := startServer(cfg)
		if err != nil {
			return 0, 0, err
		}
		procs = append(procs, cmd)
		addrs = append(addrs, addr)
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(files))
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("bench-%d-%d-%d", len(files)-1, rep, i)
			_, errs[i] = send.File(ctx, addrs[i], f, send.Options{Name: name})
		}()
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	var peak float64
	for _, p := range procs {
		peak += peakRSS(p.Process.Pid)
	}
	return secs, peak, nil
}

// startServer runs `sluice xfer serve --store … --grpc 127.0.0.1:0` and
// returns it with its gRPC URL once it listens.
func startServer(cfg Config) (*exec.Cmd, string, error) {
	cmd := exec.Command(cfg.Sluice, "xfer", "serve", "--store", cfg.Store, "--grpc", "127.0.0.1:0", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "listening grpc "); ok {
			go io.Copy(io.Discard, out)
			return cmd, u, nil
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, "", errors.New("xfer serve --store exited before it listened")
}

// peakRSS is VmHWM of pid: its peak resident memory, in bytes.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}

func randomFile(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, rand.Reader, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// printTable prints each row's medians over the reps, with the spread.
// x_direct is the median of the per-rep ratios: each rep's sluice upload
// against the direct one of the same rep, which ran beside it.
func printTable(w io.Writer, cfg Config, rs bench.Results) {
	fmt.Fprintf(w, "upload of %d MiB into %s, median (min–max) of %d reps\n\n", cfg.Size>>20, cfg.Store, cfg.Reps)
	fmt.Fprintln(w, "| path | MB/s | seconds | × direct | servers' peak RSS (MB) |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rs.Rows {
		rss := r.Summary[metricPeakRSS]
		rss.Median, rss.Min, rss.Max = rss.Median/1e6, rss.Min/1e6, rss.Max/1e6
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.Name, r.Summary[metricMBps].Format(0), r.Summary[metricSeconds].Format(2),
			r.Summary[metricXDirect].Format(2), rss.Format(0))
	}
}
