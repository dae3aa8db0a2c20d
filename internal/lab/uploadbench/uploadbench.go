// Package uploadbench is `sluice bench upload`: a chunk-size sweep of
// file uploads over gRPC, RSocket, tus and plain HTTP/1.1 and h2c POST,
// each timed to the server's verified SHA-256, printed beside the bound
// that hashing alone puts on this machine.
package uploadbench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/bench/rr"
	"github.com/sluicehq/sluice/internal/lab/chart"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/post"
	"github.com/sluicehq/sluice/internal/xfer/send"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

// Result is one (transport, source, chunk) cell of the sweep.
type Result struct {
	Transport string    `json:"transport"`
	Source    string    `json:"source"`
	Chunk     int       `json:"chunk"` // 0: --chunk auto
	Size      int64     `json:"size"`
	Seconds   []float64 `json:"seconds"`
	MBps      float64   `json:"mb_per_s"` // median rep, 1e6 bytes/s
	// CPUSeconds is the process's user+system time of each rep (both
	// ends are in this process), and CPUPerGB its median per 1e9 bytes:
	// on a shared machine, where wall time also measures the neighbours,
	// the cost that is the transport's own.
	CPUSeconds []float64 `json:"cpu_seconds"`
	CPUPerGB   float64   `json:"cpu_s_per_gb"`
}

// GuploadSweep is the chunk sizes of "Sending files via gRPC": every
// power of two from 16 B to 2 MiB.
var GuploadSweep = func() (l []int) {
	for s := 16; s <= 2<<20; s *= 2 {
		l = append(l, s)
	}
	return l
}()

// Config is one sweep.
type Config struct {
	Size     int64 // file size
	PerChunk int   // bound a cell's file to this many chunks (0: none)
	Auto     bool  // add a --chunk auto cell for gRPC, RSocket and tus
	// KnownSHA gives the gRPC, RSocket and tus senders the file's SHA-256
	// (send.Options.SHA256): like the POST baseline's client, they then
	// hash nothing. Without it they hash while sending, which costs the
	// sender what the receiver's hash costs it.
	KnownSHA   bool
	Chunks     []int    // chunk sizes
	Transports []string // grpc, rsocket, tus, http1, h2c
	Sources    []string // memory, disk
	Reps       int      // repetitions of each cell; the median is reported
	Dir        string   // server directory ("": a temporary one, in /dev/shm if it exists)
	JSONPath   string   // write the results as JSON here ("": none)
	Args       []string // the command line after "sluice bench upload", recorded in the JSON so a file says how it was made
	SVGPath    string   // write the chart here ("": none)
}

var knownTransports = map[string]bool{"grpc": true, "rsocket": true, "tus": true, "http1": true, "h2c": true}

// Validate reports the first cell the sweep cannot run, in the words of
// the command's flags.
func (c Config) Validate() error {
	if c.Reps < 1 {
		return fmt.Errorf("--reps must be at least 1")
	}
	for _, tr := range c.Transports {
		if !knownTransports[tr] {
			return fmt.Errorf("--transports: unknown %q", tr)
		}
		for _, src := range c.Sources {
			if src != "memory" && src != "disk" {
				return fmt.Errorf("--source: unknown %q", src)
			}
		}
	}
	for _, ch := range c.Chunks {
		if ch > xfer.MaxChunk {
			return fmt.Errorf("--chunks: %s is above %s", defaults.FormatSize(int64(ch)), defaults.FormatSize(xfer.MaxChunk))
		}
	}
	return nil
}

// endpoints are the servers of a sweep, one store behind all of them.
type endpoints struct {
	urls     map[string]string
	knownSHA bool // Config.KnownSHA
	h1c, h2c *http.Client
	closers  []func()
}

func (e *endpoints) Close() {
	for _, c := range slices.Backward(e.closers) {
		c()
	}
}

func startEndpoints(store *diskstore.Uploads) (*endpoints, error) {
	e := &endpoints{h1c: &http.Client{}}
	srv, err := serve.Start(store, serve.Listen{GRPC: "127.0.0.1:0", RSocket: "tcp://127.0.0.1:0", TUS: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, func() { srv.Close() })
	h1, h1Addr, err := post.ServePost(store, false)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.closers = append(e.closers, func() { h1.Close() })
	h2, h2Addr, err := post.ServePost(store, true)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.closers = append(e.closers, func() { h2.Close() })
	h2t := &http.Transport{Protocols: new(http.Protocols)}
	h2t.Protocols.SetUnencryptedHTTP2(true)
	e.h2c = &http.Client{Transport: h2t}
	e.urls = map[string]string{"grpc": "grpc://" + srv.Addrs.GRPC, "rsocket": srv.Addrs.RSocket, "tus": "http://" + srv.Addrs.TUS + "/files/",
		"http1": "http://" + h1Addr + "/post/", "h2c": "http://" + h2Addr + "/post/"}
	return e, nil
}

// source is one file a cell sends, with its SHA-256.
type source struct {
	path string
	want [32]byte
}

// cell is one (transport, source, chunk) configuration.
type cell struct {
	tr, src string
	chunk   int
	so      *source
	n       int64
}

// Run runs the sweep and prints its tables; Validate first.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	base := c.Dir
	if base == "" {
		parent := ""
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			parent = "/dev/shm"
		}
		d, err := os.MkdirTemp(parent, "sluice-bench-upload-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		base = d
	}
	store, err := diskstore.Open(filepath.Join(base, "server"), diskstore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	ep, err := startEndpoints(store)
	if err != nil {
		return err
	}
	defer ep.Close()
	ep.knownSHA = c.KnownSHA
	all := make([]byte, c.Size)
	rand.New(rand.NewSource(1)).Read(all)
	cells, err := c.cells(base, all)
	if err != nil {
		return err
	}
	hashes := measureHashes(all)
	fmt.Fprintf(stdout, "hashes on this machine, one core: SHA-256 %.2f GB/s, CRC32C %.1f GB/s; %d cores\n", hashes.sha256/1e9, hashes.crc32c/1e9, runtime.NumCPU())
	fmt.Fprintf(stdout, "bound with both ends here: SHA-256 on sender and receiver and CRC32C at the receiver cost %.2f CPU-seconds per GB, so %d cores carry at most %.2f GB/s\n",
		hashes.costPerGB(), runtime.NumCPU(), hashes.bound(runtime.NumCPU())/1e9)
	if c.KnownSHA {
		fmt.Fprintln(stdout, "--known-sha: the gRPC, RSocket and tus senders are given the file's SHA-256 and hash nothing, as the POST client does")
	} else {
		fmt.Fprintln(stdout, "the gRPC, RSocket and tus senders hash the file while sending it (the POST client hashes nothing; --known-sha compares like for like)")
	}
	seconds, cpu, err := c.measure(ctx, ep, base, all, cells, stderr)
	if err != nil {
		return err
	}
	results := report(stdout, cells, seconds, cpu)
	summarize(stdout, results, hashes.bound(runtime.NumCPU()))
	return c.write(results)
}

// cells lists the sweep's cells, writing one source file (and taking its
// SHA-256) per distinct size (see PerChunk).
func (c Config) cells(base string, all []byte) ([]cell, error) {
	sourcesBy := map[int64]*source{}
	sourceOf := func(n int64) (*source, error) {
		if s := sourcesBy[n]; s != nil {
			return s, nil
		}
		s := &source{path: filepath.Join(base, fmt.Sprintf("source-%d.bin", n)), want: sha256.Sum256(all[:n])}
		if err := os.WriteFile(s.path, all[:n], 0o644); err != nil {
			return nil, err
		}
		sourcesBy[n] = s
		return s, nil
	}
	var cells []cell
	for _, tr := range c.Transports {
		for _, src := range c.Sources {
			sizes := c.Chunks
			if c.Auto && tr != "http1" && tr != "h2c" {
				sizes = append(slices.Clone(c.Chunks), 0)
			}
			for _, ch := range sizes {
				if tr == "tus" && ch < 64<<10 && ch != 0 {
					continue // one HTTP request and one fsync per PATCH
				}
				n := c.Size
				if c.PerChunk > 0 && ch > 0 {
					n = min(n, int64(ch)*int64(c.PerChunk))
				}
				so, err := sourceOf(n)
				if err != nil {
					return nil, err
				}
				cells = append(cells, cell{tr: tr, src: src, chunk: ch, so: so, n: n})
			}
		}
	}
	return cells, nil
}

// measure times every cell Reps times, in rounds over all of them, so
// that whatever else the machine does is spread over every cell rather
// than landing on one (side by side, not one after the other).
func (c Config) measure(ctx context.Context, ep *endpoints, base string, all []byte, cells []cell, stderr io.Writer) (seconds, cpu [][]float64, err error) {
	seconds, cpu = make([][]float64, len(cells)), make([][]float64, len(cells))
	seq := 0
	for rep := 0; rep < c.Reps; rep++ {
		if c.Reps > 1 {
			fmt.Fprintf(stderr, "[rep %d/%d] %d cells\n", rep+1, c.Reps, len(cells))
		}
		for i, ce := range cells {
			seq++
			name := fmt.Sprintf("b%d", seq)
			start, cpu0 := time.Now(), rr.ProcessCPU()
			sum, err := ep.send(ctx, ce, name, all[:ce.n], filepath.Join(base, "state"))
			el, used := time.Since(start).Seconds(), (rr.ProcessCPU() - cpu0).Seconds()
			if err != nil {
				return nil, nil, fmt.Errorf("%s %s %s: %w", ce.tr, ce.src, chunkName(ce.chunk), err)
			}
			if want := ce.so.want; !bytes.Equal(sum, want[:]) {
				return nil, nil, fmt.Errorf("%s %s %s: SHA-256 %x, want %x", ce.tr, ce.src, chunkName(ce.chunk), sum, want)
			}
			os.Remove(filepath.Join(base, "server", name))
			seconds[i] = append(seconds[i], el)
			cpu[i] = append(cpu[i], used)
		}
	}
	return seconds, cpu, nil
}

// send uploads one cell's file as name and returns the SHA-256 the
// server verified.
func (e *endpoints) send(ctx context.Context, ce cell, name string, data []byte, stateDir string) ([]byte, error) {
	switch ce.tr {
	case "http1", "h2c":
		cl := e.h1c
		if ce.tr == "h2c" {
			cl = e.h2c
		}
		path := ""
		if ce.src == "disk" {
			path = ce.so.path
		}
		return post.PostFile(ctx, cl, e.urls[ce.tr]+name, data, path, ce.chunk)
	}
	o := send.Options{Name: name, Chunk: ce.chunk, StateDir: stateDir}
	if e.knownSHA {
		o.SHA256 = ce.so.want[:]
	}
	if ce.src == "memory" {
		return send.Bytes(ctx, e.urls[ce.tr], data, o)
	}
	return send.File(ctx, e.urls[ce.tr], ce.so.path, o)
}

// report prints a line per cell (the median rep, the spread and the CPU
// per GB) and returns the results.
func report(stdout io.Writer, cells []cell, seconds, cpu [][]float64) []Result {
	var results []Result
	for i, ce := range cells {
		r := Result{Transport: ce.tr, Source: ce.src, Chunk: ce.chunk, Size: ce.n, Seconds: seconds[i], CPUSeconds: cpu[i]}
		s := slices.Clone(r.Seconds)
		sort.Float64s(s)
		r.MBps = float64(ce.n) / s[len(s)/2] / 1e6
		cs := slices.Clone(r.CPUSeconds)
		sort.Float64s(cs)
		r.CPUPerGB = cs[len(cs)/2] / float64(ce.n) * 1e9
		fmt.Fprintf(stdout, "%-8s %-7s %8s  %8.1f MB/s  (%s, min-max %.1f-%.1f)  cpu %.2f s/GB\n", ce.tr, ce.src, chunkName(ce.chunk), r.MBps,
			defaults.FormatSize(ce.n), float64(ce.n)/s[len(s)-1]/1e6, float64(ce.n)/s[0]/1e6, r.CPUPerGB)
		results = append(results, r)
	}
	return results
}

// jsonReport is the --json file: the command line and the machine and
// revision beside the results, the envelope of the other bench commands'
// JSON, so that a file says which flags made it and where.
type jsonReport struct {
	Command string        `json:"command"`
	Args    []string      `json:"args,omitempty"`
	Reps    int           `json:"reps"`
	Machine bench.Machine `json:"machine"`
	Results []Result      `json:"results"`
}

// write writes the --json and --svg files asked for.
func (c Config) write(results []Result) error {
	if c.JSONPath != "" {
		b, _ := json.MarshalIndent(jsonReport{Command: "bench upload", Args: c.Args, Reps: c.Reps, Machine: bench.CurrentMachine(), Results: results}, "", "  ")
		if err := os.WriteFile(c.JSONPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if c.SVGPath != "" {
		if err := os.WriteFile(c.SVGPath, chart.Upload(chartPoints(results), c.Size), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// chartPoints are the fixed-chunk cells (auto cells are in the JSON and
// the tables, not on the chunk axis) and the figures of "Sending files via gRPC" beside them.
func chartPoints(rs []Result) []chart.UploadPoint {
	var ps []chart.UploadPoint
	for _, r := range rs {
		if r.Chunk > 0 {
			ps = append(ps, chart.UploadPoint{Transport: r.Transport, Source: r.Source, Chunk: r.Chunk, MBps: r.MBps})
		}
	}
	return append(ps, guploadRefs...)
}

func chunkName(c int) string {
	if c == 0 {
		return "auto"
	}
	return defaults.FormatSize(int64(c))
}

// hashSpeeds are one core's hash throughputs in bytes per second.
type hashSpeeds struct{ sha256, crc32c float64 }

// measureHashes times SHA-256 and CRC32C over 64 MiB, hashed 256 KiB at
// a time from b (as chunks are: each is hashed while it is in the cache),
// the best of three, on the machine the sweep runs on, so that the bound
// printed beside the results is this machine's.
func measureHashes(b []byte) hashSpeeds {
	const block, total = 256 << 10, 64 << 20
	b = b[:min(len(b), block)]
	rounds := total / max(len(b), 1)
	best := func(f func()) float64 {
		d := time.Duration(1 << 62)
		for range 3 {
			t := time.Now()
			f()
			d = min(d, time.Since(t))
		}
		return float64(rounds*len(b)) / max(d.Seconds(), 1e-9)
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	return hashSpeeds{
		sha256: best(func() {
			h := sha256.New()
			for range rounds {
				h.Write(b)
			}
			h.Sum(nil)
		}),
		crc32c: best(func() {
			var c uint32
			for range rounds {
				c = crc32.Update(c, tab, b)
			}
		}),
	}
}

// costPerGB is the CPU-seconds a GB costs in hashing alone with both ends
// on this machine: SHA-256 on the sender and on the receiver (each must
// compute it over the whole file: that is what makes the comparison
// before the rename worth anything), CRC32C at the receiver.
func (h hashSpeeds) costPerGB() float64 { return 2*1e9/h.sha256 + 1e9/h.crc32c }

// bound is the most bytes per second cores can carry if they did nothing
// but hash: an upper bound no transport can beat on this machine.
func (h hashSpeeds) bound(cores int) float64 { return float64(cores) * 1e9 / h.costPerGB() }

// summarize prints, per transport and source, the best fixed chunk
// size against --chunk auto, and the best cell of all against the bound.
func summarize(w io.Writer, rs []Result, bound float64) {
	type key struct{ tr, src string }
	best := map[key]Result{}
	auto := map[key]Result{}
	var order []key
	seen := map[key]bool{}
	var top Result
	for _, r := range rs {
		k := key{r.Transport, r.Source}
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		if r.Chunk == 0 {
			auto[k] = r
			continue
		}
		if r.MBps > best[k].MBps {
			best[k] = r
		}
		if r.MBps > top.MBps {
			top = r
		}
	}
	fmt.Fprintf(w, "\n%-8s %-7s %18s %12s %9s %15s\n", "", "", "best fixed chunk", "auto", "auto/best", "best, auto /http1")
	for _, k := range order {
		b, a := best[k], auto[k]
		post := best[key{"http1", k.src}].MBps // the plain POST of the same source, the yardstick
		vs := func(r Result) string {
			if post == 0 || r.Size == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", r.MBps/post)
		}
		if a.Size == 0 {
			fmt.Fprintf(w, "%-8s %-7s %8s %6.0f MB/s %12s %9s %9s %5s\n", k.tr, k.src, chunkName(b.Chunk), b.MBps, "", "", vs(b), "")
			continue
		}
		fmt.Fprintf(w, "%-8s %-7s %8s %6.0f MB/s %7.0f MB/s %9.2f %9s %5s\n", k.tr, k.src, chunkName(b.Chunk), b.MBps, a.MBps, a.MBps/b.MBps, vs(b), vs(a))
	}
	if top.Size > 0 {
		fmt.Fprintf(w, "best: %s %s %s %.0f MB/s, %.0f%% of the hashing bound (%.0f MB/s), %.2f of the 2.1 GB/s goal\n",
			top.Transport, top.Source, chunkName(top.Chunk), top.MBps, 100*top.MBps*1e6/bound, bound/1e6, top.MBps/2100)
	}
}

// guploadRefs are the figures of "Sending files via gRPC", drawn beside ours: gupload's own
// (143 MiB on a 2015 MacBook, timer stopped before the server's answer,
// no checksum; only its 16-64 B times are given as numbers in the post:
// 28.4-31.3 s, 15.9-16.6 s, 8.07-8.18 s) and its gRPC stream re-measured
// on this machine kind with the timer fixed (CRC32C at the receiver, no
// SHA-256, no disk; field notes §3).
var guploadRefs = func() (rs []chart.UploadPoint) {
	const guploadSize = 143 << 20
	for _, p := range []struct {
		c int
		s float64
	}{{16, 30.4}, {32, 16.2}, {64, 8.1}} {
		rs = append(rs, chart.UploadPoint{Transport: "gupload", Source: "(its post)", Chunk: p.c, MBps: guploadSize / p.s / 1e6})
	}
	for _, p := range []struct {
		c    int
		mbps float64
	}{{16, 25}, {256, 200}, {1 << 10, 617}, {4 << 10, 1050}, {16 << 10, 1570}, {64 << 10, 1730}, {256 << 10, 1960}, {1 << 20, 2140}, {2 << 20, 1900}} {
		rs = append(rs, chart.UploadPoint{Transport: "gupload gRPC", Source: "(field notes)", Chunk: p.c, MBps: p.mbps})
	}
	return rs
}()
