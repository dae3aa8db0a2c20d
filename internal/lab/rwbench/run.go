package rwbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
)

// The paths a run sends Prometheus' remote-write through.
const (
	Direct     = "direct"      // Prometheus → link → receiver
	Sluice     = "sluice"      // Prometheus → agent → link → sink → receiver
	SluiceDict = "sluice+dict" // the same, the agent compressing with a dictionary trained on the workload
)

// marker is the external label the source Prometheus puts on every
// series, so that the receiver's series are told from anything else.
const marker = markerName + `="` + markerValue + `"`

const markerName, markerValue = "sluice_bench", "remote-write"

// newestQuery is the scrape time of the newest sample at the receiver
// that both targets (Prometheus itself and the fleet) have reached, from
// their up series: timestamp() drops metric names, so over every series
// it would fail on duplicate label sets.
const newestQuery = "min(timestamp(up{" + marker + "}))"

// run is one path through one scenario: the processes it started, in
// the order they must stop.
type run struct {
	c     Config
	sc    Scenario
	path  string
	dir   string
	link  *outageLink
	src   *proc // the scraping Prometheus
	recv  *proc // the receiving Prometheus
	procs []*proc
	stops []func()
}

func (r *run) close() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].stop()
	}
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
	os.RemoveAll(r.dir)
}

// start brings up the receiver, the path and the scraping Prometheus, and
// waits until the receiver has the first samples.
func (r *run) start(ctx context.Context, dict string) error {
	var err error
	if r.dir, err = os.MkdirTemp("", "sluice-rwbench-"); err != nil {
		return err
	}
	page, err := newFleetPage(r.c.Hosts, r.c.Seed)
	if err != nil {
		return err
	}
	fleetAddr, stopFleet, err := serveFleet(page)
	if err != nil {
		return err
	}
	r.stops = append(r.stops, stopFleet)
	if r.recv, err = r.prometheus(ctx, "receiver", "", "", "--web.enable-remote-write-receiver"); err != nil {
		return err
	}
	writeURL, err := r.startPath(ctx, dict)
	if err != nil {
		return err
	}
	r.src, err = r.prometheus(ctx, "source", writeURL, fleetAddr)
	if err != nil {
		return err
	}
	return waitFor(ctx, 2*time.Minute, "first samples at the receiver", func() bool {
		n, err := query(r.recv.addr, "count({"+marker+"})", time.Now())
		return err == nil && n > 0
	}, r.procs...)
}

// startPath starts the link and, for the sluice paths, the sink behind it
// and the agent before it; it returns the URL Prometheus remote-writes to.
func (r *run) startPath(ctx context.Context, dict string) (string, error) {
	recvURL := "http://" + r.recv.addr + "/api/v1/write"
	if r.path == Direct {
		link, err := newOutageLink(r.recv.addr, r.sc.Rate, r.sc.RTT)
		if err != nil {
			return "", err
		}
		r.link = link
		r.stops = append(r.stops, link.close)
		return "http://" + link.addr + "/api/v1/write", nil
	}
	addrs, err := freeAddrs(4)
	if err != nil {
		return "", err
	}
	sinkAddr, sinkMetrics, agentIngest, agentMetrics := addrs[0], addrs[1], addrs[2], addrs[3]
	sink, err := r.sluice("sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(r.dir, "sink"),
		"--metrics", sinkMetrics, "--export", "remote-write="+recvURL, "--log-level", "warn")
	if err != nil {
		return "", err
	}
	if err := waitFor(ctx, 30*time.Second, "sink listening", func() bool { return ready(sinkMetrics, "/metrics") }, sink); err != nil {
		return "", err
	}
	link, err := newOutageLink(sinkAddr, r.sc.Rate, r.sc.RTT)
	if err != nil {
		return "", err
	}
	r.link = link
	r.stops = append(r.stops, link.close)
	args := []string{"agent", "--sink", link.addr, "--spool", filepath.Join(r.dir, "spool"),
		"--ingest", agentIngest, "--metrics", agentMetrics, "--log-level", "warn"}
	if dict != "" {
		args = append(args, "--dict", dict)
	}
	args = append(args, r.c.AgentFlags...)
	agent, err := r.sluice("agent", args...)
	if err != nil {
		return "", err
	}
	if err := waitFor(ctx, 30*time.Second, "agent listening", func() bool { return ready(agentMetrics, "/metrics") }, agent); err != nil {
		return "", err
	}
	return "http://" + agentIngest + "/api/v1/write", nil
}

func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		var err error
		if addrs[i], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

func (r *run) sluice(name string, args ...string) (*proc, error) {
	p, err := startProc(name, r.c.Bin, args...)
	if err == nil {
		r.procs = append(r.procs, p)
	}
	return p, err
}

// prometheus starts one Prometheus: with writeURL a source that scrapes
// itself and the fleet page every second and remote-writes there,
// without one a bare receiver.
func (r *run) prometheus(ctx context.Context, name, writeURL, fleetAddr string, extra ...string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	conf := ""
	if writeURL != "" {
		conf = fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  external_labels: {%s: %s}
scrape_configs:
  - job_name: self
    static_configs: [{targets: ['%s']}]
  - job_name: fleet
    honor_labels: true
    static_configs: [{targets: ['%s']}]
remote_write:
  - url: %s
`, markerName, markerValue, addr, fleetAddr, writeURL)
	}
	confPath := filepath.Join(r.dir, name+".yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	args := append([]string{"--config.file=" + confPath, "--storage.tsdb.path=" + filepath.Join(r.dir, name),
		"--web.listen-address=" + addr}, extra...)
	p, err := startProc("prometheus "+name, r.c.Prometheus, args...)
	if err != nil {
		return nil, err
	}
	p.addr = addr
	r.procs = append(r.procs, p)
	if err := waitFor(ctx, time.Minute, "ready", func() bool { return ready(addr, "/-/ready") }, p); err != nil {
		return nil, err
	}
	return p, nil
}

// snapshot is the counters a steady window is measured between.
type snapshot struct {
	at                     time.Time
	linkBytes              int64
	sent, snappy, appended float64
}

func (r *run) snapshot() (snapshot, error) {
	s := snapshot{at: time.Now(), linkBytes: r.link.bytes()}
	var err error
	if s.sent, err = counter(r.src.addr, "prometheus_remote_storage_samples_total"); err != nil {
		return s, err
	}
	if s.snappy, err = counter(r.src.addr, "prometheus_remote_storage_bytes_total"); err != nil {
		return s, err
	}
	s.appended, err = counter(r.recv.addr, "prometheus_tsdb_head_samples_appended_total")
	return s, err
}

// steady measures a window of normal operation: bytes on the link per
// sample Prometheus sent, samples appended at the receiver per second,
// and the delay from scrape to the receiver, sampled every second.
func (r *run) steady(ctx context.Context, m bench.Metrics) error {
	a, err := r.snapshot()
	if err != nil {
		return err
	}
	var delays []float64
	for end := time.Now().Add(r.c.Duration); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		now := time.Now()
		newest, err := query(r.recv.addr, newestQuery, now)
		if err == nil && newest > 0 {
			delays = append(delays, float64(now.UnixMilli())/1000-newest)
		}
	}
	b, err := r.snapshot()
	if err != nil {
		return err
	}
	sent := b.sent - a.sent
	m["samples_sent"] = sent
	m["link_bytes_per_sample"] = float64(b.linkBytes-a.linkBytes) / sent
	m["snappy_bytes_per_sample"] = (b.snappy - a.snappy) / sent
	m["samples_per_sec"] = (b.appended - a.appended) / b.at.Sub(a.at).Seconds()
	m["delay_p50_s"] = bench.Summarize(delays).Median
	return nil
}

// outage cuts the link for c.Outage, then waits until the receiver has
// samples scraped after the link came back (catch-up) and its count of
// the outage window's samples stops growing, and compares that count
// with the source's own TSDB: what the path lost.
func (r *run) outage(ctx context.Context, m bench.Metrics) error {
	from := time.Now()
	r.link.down()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(r.c.Outage):
	}
	if err := r.link.up(); err != nil {
		return err
	}
	back := time.Now()
	limit := 2*r.c.Outage + 3*time.Minute
	err := waitFor(ctx, limit, "catch-up after the outage", func() bool {
		newest, err := query(r.recv.addr, newestQuery, time.Now())
		return err == nil && newest >= float64(back.UnixMilli())/1000
	})
	if err != nil {
		return r.src.fail(err)
	}
	m["catch_up_s"] = time.Since(back).Seconds()
	window := fmt.Sprintf("[%dms]", back.Sub(from).Milliseconds())
	want, err := windowSamples(r.src.addr, `job=~".+"`, window, back)
	if err != nil {
		return err
	}
	got, last := 0.0, -1.0
	err = waitFor(ctx, time.Minute, "the outage window complete at the receiver", func() bool {
		n, err := windowSamples(r.recv.addr, marker, window, back)
		if err != nil {
			return false
		}
		settled := n >= want || n == last
		got, last = n, n
		if !settled {
			time.Sleep(2 * time.Second) // let the queues drain before the next look
		}
		return settled
	})
	m["outage_samples"] = want
	m["outage_lost"] = want - got
	return err
}
