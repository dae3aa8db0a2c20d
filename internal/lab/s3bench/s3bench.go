// Package s3bench is `sluice bench upload --store s3://…`: one file
// uploaded into an S3 object store through one `xfer serve --store`
// process, through two (half the file to each, at once), and straight
// from the S3 SDK's own multipart uploader (transfermanager, its default
// concurrency and part size) as the baseline: throughput to the verified,
// visible object, and the servers' memory.
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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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
}

// row is one way of uploading, timed over the reps.
type row struct {
	name   string
	secs   []float64
	peakMB []float64 // the servers' peak RSS, summed (sluice rows)
}

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
	rows := []*row{{name: "S3 SDK multipart, straight (transfermanager: 5 parts at once, 8 MiB)"},
		{name: "sluice xfer send → 1 xfer serve --store"}, {name: "sluice xfer send ×2 → 2 xfer serve --store (half each)"}}
	for rep := 0; rep < cfg.Reps; rep++ {
		fmt.Fprintf(stderr, "rep %d of %d\n", rep+1, cfg.Reps)
		t0 := time.Now()
		tm := transfermanager.New(c)
		f, err := os.Open(whole)
		if err != nil {
			return err
		}
		key := loc.Prefix + fmt.Sprintf("bench-direct-%d", rep)
		_, err = tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: &loc.Bucket, Key: &key, Body: f})
		f.Close()
		if err != nil {
			return fmt.Errorf("direct upload: %w", err)
		}
		rows[0].secs = append(rows[0].secs, time.Since(t0).Seconds())
		c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &loc.Bucket, Key: &key})
		for i, files := range [][]string{{whole}, {a, b}} {
			secs, peak, err := throughServers(ctx, cfg, files, rep, stderr)
			if err != nil {
				return err
			}
			rows[i+1].secs = append(rows[i+1].secs, secs)
			rows[i+1].peakMB = append(rows[i+1].peakMB, peak)
			for j := range files {
				key := loc.Prefix + fmt.Sprintf("bench-%d-%d-%d", i, rep, j)
				c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &loc.Bucket, Key: &key})
			}
		}
	}
	printTable(stdout, cfg, rows)
	return nil
}

// throughServers starts one `xfer serve --store` per file, sends each
// file to its server at once, and returns the wall time until every
// file is verified and visible, and the servers' peak RSS in MB.
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
		peak += peakRSSMB(p.Process.Pid)
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

// peakRSSMB is VmHWM of pid: its peak resident memory.
func peakRSSMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
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

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func printTable(w io.Writer, cfg Config, rows []*row) {
	mb := float64(cfg.Size) / 1e6
	base := mb / median(rows[0].secs)
	fmt.Fprintf(w, "upload of %d MiB into %s, median of %d reps\n\n", cfg.Size>>20, cfg.Store, cfg.Reps)
	fmt.Fprintln(w, "| path | MB/s (median) | runs (s) | × direct | servers' peak RSS |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		rate := mb / median(r.secs)
		var runs []string
		for _, s := range r.secs {
			runs = append(runs, strconv.FormatFloat(s, 'f', 2, 64))
		}
		rss := "–"
		if len(r.peakMB) > 0 {
			rss = fmt.Sprintf("%.0f MB", median(r.peakMB))
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %.2f | %s |\n", r.name, rate, strings.Join(runs, ", "), rate/base, rss)
	}
}
