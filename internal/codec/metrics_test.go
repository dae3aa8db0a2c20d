package codec

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// This file generates metrics-like message bodies for the dictionary
// benchmarks: Prometheus text exposition lines with timestamps, such as
//
//	http_requests_total{job="api",instance="10.3.7.21:9100",method="GET",code="200",handler="/v1/users"} 123456 1732260000000
//
// An agent's series (metric name plus labels) are a fixed population, as on a
// real host; each message holds lines of many different series in random
// order with fresh values and timestamps, so neighbouring lines share little
// and a message alone compresses only moderately: the case a dictionary is
// for.

// metricFamily is a metric name and how to make labels and values for it.
type metricFamily struct {
	name   string
	labels func(r *rand.Rand) string
	value  func(r *rand.Rand) string
}

var (
	jobs      = []string{"api", "web", "worker", "ingest", "billing", "auth", "search", "cache", "db", "gateway", "scheduler", "mailer"}
	methods   = []string{"GET", "GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH"}
	codes     = []string{"200", "200", "200", "200", "201", "204", "301", "304", "400", "401", "403", "404", "429", "500", "502", "503"}
	handlers  = []string{"/v1/users", "/v1/users/{id}", "/v1/orders", "/v1/orders/{id}/items", "/v1/search", "/v1/login", "/v1/logout", "/healthz", "/metrics", "/v2/events", "/v2/events/{id}", "/v1/invoices", "/v1/payments/{id}/refund", "/internal/flags", "/v1/sessions"}
	buckets   = []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}
	cpuModes  = []string{"user", "system", "idle", "iowait", "irq", "softirq", "steal", "nice"}
	devices   = []string{"nvme0n1", "nvme1n1", "sda", "sdb", "dm-0", "dm-1", "eth0", "eth1", "lo", "ens5", "bond0"}
	mounts    = []string{"/", "/var", "/var/lib/docker", "/data", "/boot", "/home", "/tmp"}
	fstypes   = []string{"ext4", "xfs", "tmpfs", "overlay"}
	ns        = []string{"default", "kube-system", "monitoring", "payments", "checkout", "search", "ingest", "platform"}
	quantiles = []string{"0", "0.25", "0.5", "0.75", "0.9", "0.99", "1"}
	gcLabels  = []string{"go1.22.5", "go1.23.2", "go1.24.1"}
	topics    = []string{"orders", "payments", "events", "audit", "clicks", "emails", "invoices"}
)

func pick(r *rand.Rand, s []string) string { return s[r.IntN(len(s))] }

func instance(r *rand.Rand) string {
	return fmt.Sprintf("10.%d.%d.%d:%d", r.IntN(8), r.IntN(32), 1+r.IntN(250), []int{9100, 9090, 8080, 9187, 9121, 9404}[r.IntN(6)])
}

// pod returns a Kubernetes-style pod name with random suffixes, which no
// dictionary can predict.
func pod(r *rand.Rand) string {
	const alnum = "bcdfghjklmnpqrstvwxz2456789"
	var b strings.Builder
	b.WriteString(pick(r, jobs))
	b.WriteString("-deployment-")
	for range 10 {
		b.WriteByte(alnum[r.IntN(len(alnum))])
	}
	b.WriteByte('-')
	for range 5 {
		b.WriteByte(alnum[r.IntN(len(alnum))])
	}
	return b.String()
}

func counter(r *rand.Rand) string { return strconv.FormatInt(r.Int64N(1<<r.IntN(40)), 10) }
func gauge(r *rand.Rand) string {
	return strconv.FormatFloat(r.Float64()*float64(int64(1)<<r.IntN(34)), 'g', -1, 64)
}
func seconds(r *rand.Rand) string { return strconv.FormatFloat(r.ExpFloat64()*3, 'f', 6, 64) }

var families = []metricFamily{
	{"http_requests_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q,method=%q,code=%q,handler=%q`, pick(r, jobs), instance(r), pick(r, methods), pick(r, codes), pick(r, handlers))
	}, counter},
	{"http_request_duration_seconds_bucket", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q,method=%q,handler=%q,le=%q`, pick(r, jobs), instance(r), pick(r, methods), pick(r, handlers), pick(r, buckets))
	}, counter},
	{"http_request_duration_seconds_sum", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q,method=%q,handler=%q`, pick(r, jobs), instance(r), pick(r, methods), pick(r, handlers))
	}, gauge},
	{"http_request_duration_seconds_count", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q,method=%q,handler=%q`, pick(r, jobs), instance(r), pick(r, methods), pick(r, handlers))
	}, counter},
	{"node_cpu_seconds_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="node",instance=%q,cpu="%d",mode=%q`, instance(r), r.IntN(64), pick(r, cpuModes))
	}, gauge},
	{"node_memory_MemAvailable_bytes", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="node",instance=%q`, instance(r))
	}, counter},
	{"node_filesystem_avail_bytes", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="node",instance=%q,device=%q,fstype=%q,mountpoint=%q`, instance(r), pick(r, devices), pick(r, fstypes), pick(r, mounts))
	}, counter},
	{"node_network_receive_bytes_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="node",instance=%q,device=%q`, instance(r), pick(r, devices))
	}, counter},
	{"node_disk_io_time_seconds_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="node",instance=%q,device=%q`, instance(r), pick(r, devices))
	}, gauge},
	{"node_load1", func(r *rand.Rand) string { return fmt.Sprintf(`job="node",instance=%q`, instance(r)) }, gauge},
	{"process_resident_memory_bytes", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q`, pick(r, jobs), instance(r))
	}, counter},
	{"process_cpu_seconds_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q`, pick(r, jobs), instance(r))
	}, gauge},
	{"go_goroutines", func(r *rand.Rand) string { return fmt.Sprintf(`job=%q,instance=%q`, pick(r, jobs), instance(r)) }, counter},
	{"go_gc_duration_seconds", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q,quantile=%q`, pick(r, jobs), instance(r), pick(r, quantiles))
	}, seconds},
	{"go_info", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q,version=%q`, pick(r, jobs), instance(r), pick(r, gcLabels))
	}, func(*rand.Rand) string { return "1" }},
	{"container_cpu_usage_seconds_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`namespace=%q,pod=%q,container=%q,cpu="total"`, pick(r, ns), pod(r), pick(r, jobs))
	}, gauge},
	{"container_memory_working_set_bytes", func(r *rand.Rand) string {
		return fmt.Sprintf(`namespace=%q,pod=%q,container=%q`, pick(r, ns), pod(r), pick(r, jobs))
	}, counter},
	{"kube_pod_container_status_restarts_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`namespace=%q,pod=%q,container=%q,uid="%08x-%04x-%04x"`, pick(r, ns), pod(r), pick(r, jobs), r.Uint32(), r.IntN(1<<16), r.IntN(1<<16))
	}, counter},
	{"kafka_consumergroup_lag", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="kafka-exporter",instance=%q,consumergroup="%s-consumer",topic=%q,partition="%d"`, instance(r), pick(r, jobs), pick(r, topics), r.IntN(48))
	}, counter},
	{"pg_stat_database_tup_fetched", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="postgres",instance=%q,datname=%q,server="pg-%d.internal:5432"`, instance(r), pick(r, jobs), r.IntN(6))
	}, counter},
	{"redis_commands_processed_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`job="redis",instance=%q,cmd=%q`, instance(r), pick(r, []string{"get", "set", "hget", "hset", "expire", "del", "incr", "zadd"}))
	}, counter},
	{"grpc_server_handled_total", func(r *rand.Rand) string {
		return fmt.Sprintf(`job=%q,instance=%q,grpc_method=%q,grpc_service="sluice.v1.Sink",grpc_type="bidi_stream",grpc_code=%q`, pick(r, jobs), instance(r), pick(r, []string{"Send", "Read"}), pick(r, []string{"OK", "OK", "OK", "Canceled", "Unavailable", "DeadlineExceeded"}))
	}, counter},
}

// metricsGen makes message bodies from a fixed population of series.
type metricsGen struct {
	series []string // "name{labels}"
	values []func(r *rand.Rand) string
	r      *rand.Rand
	ts     int64
}

// newMetricsGen makes a generator over nSeries series chosen with popSeed;
// msgSeed picks which series, values and timestamps go into messages, so
// two generators with the same popSeed and different msgSeeds write different
// messages about the same host population (training versus test data).
func newMetricsGen(popSeed, msgSeed uint64, nSeries int) *metricsGen {
	pr := rand.New(rand.NewPCG(popSeed, 1))
	g := &metricsGen{r: rand.New(rand.NewPCG(msgSeed, 2)), ts: 1732260000000}
	for range nSeries {
		f := families[pr.IntN(len(families))]
		g.series = append(g.series, f.name+"{"+f.labels(pr)+"}")
		g.values = append(g.values, f.value)
	}
	return g
}

// line appends one exposition line of a random series.
func (g *metricsGen) line(dst []byte) []byte {
	i := g.r.IntN(len(g.series))
	g.ts += int64(g.r.IntN(40))
	dst = append(dst, g.series[i]...)
	dst = append(dst, ' ')
	dst = append(dst, g.values[i](g.r)...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, g.ts, 10)
	return append(dst, '\n')
}

// message returns a body of whole lines, as close to size bytes as the
// lines allow without going over.
func (g *metricsGen) message(size int) []byte {
	msg := make([]byte, 0, size)
	var l []byte
	for {
		l = g.line(l[:0])
		if len(msg)+len(l) > size {
			return msg
		}
		msg = append(msg, l...)
	}
}

// messages returns n bodies of about size bytes each.
func (g *metricsGen) messages(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = g.message(size)
	}
	return out
}
