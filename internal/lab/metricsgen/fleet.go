package metricsgen

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

const (
	kib = 1024.0
	mib = 1024 * kib
	gib = 1024 * mib
	day = 86400.0
)

// Roles a host plays besides running node_exporter.
const (
	roleNone = iota
	roleAPI
	roleNginx
	rolePostgres
	roleKafka
)

var (
	roleWeights = []float64{roleNone: 0.35, roleAPI: 0.30, roleNginx: 0.15, rolePostgres: 0.10, roleKafka: 0.10}

	regions       = []string{"us-east-1", "eu-west-1", "us-west-2", "ap-southeast-2"}
	regionWeights = []float64{0.35, 0.30, 0.20, 0.15}

	cpuCounts  = []int{2, 4, 8, 16, 32, 64}
	cpuWeights = []float64{0.10, 0.25, 0.30, 0.20, 0.10, 0.05}

	kernels   = []string{"5.15.0-91-generic", "6.1.0-17-amd64", "5.10.0-26-cloud-amd64", "6.5.0-1014-aws", "6.8.0-1009-aws"}
	goVersion = []string{"go1.21.13", "go1.22.7", "go1.23.4", "go1.24.2"}

	cpuModes = []string{"idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"}
	// Share of a busy CPU's time per mode (idle takes the rest).
	cpuBusyShare = map[string]float64{"iowait": 0.05, "irq": 0.01, "nice": 0.005, "softirq": 0.05, "steal": 0.03, "system": 0.2, "user": 0.655}
)

// host is one machine of the fleet.
type host struct {
	idx          int
	ip           string
	region, zone string
	cpus         int
	mem          float64
	util         float64 // busy fraction of its CPUs
	role         int
	pods         int
	up           float64 // seconds since boot at the start
}

// job is a scrape target before it is built.
type job struct {
	h      *host
	role   int
	pod    int
	offset int64
}

// buildFleet draws the hosts and builds every target's series, in the
// order the targets are scraped (by their offset in the interval).
func buildFleet(g *Generator, r rng) {
	b := &builder{g: g, r: &r, names: map[string]struct{}{}}
	// A host brings about 350 series of about 165 bytes; reserve a little
	// more so the slices rarely grow.
	g.series = make([]series, 0, 380*g.cfg.Hosts)
	g.arena = make([]byte, 0, 380*175*g.cfg.Hosts)
	hosts := make([]*host, g.cfg.Hosts)
	usedIP := map[string]bool{}
	var jobs []job
	for i := range hosts {
		h := &host{idx: i}
		ri := r.weighted(regionWeights)
		h.region = regions[ri]
		zi := r.intn(3)
		h.zone = h.region + string(rune('a'+zi))
		for {
			h.ip = fmt.Sprintf("10.%d.%d.%d", 8+16*ri+4*zi+r.intn(4), r.intn(256), 2+r.intn(252))
			if !usedIP[h.ip] {
				usedIP[h.ip] = true
				break
			}
		}
		h.cpus = cpuCounts[r.weighted(cpuWeights)]
		h.mem = float64(h.cpus) * gib * []float64{2, 4, 4, 8}[r.intn(4)]
		h.util = min(max(r.logn(0.2, 0.6), 0.02), 0.95)
		h.role = r.weighted(roleWeights)
		h.up = min(r.logn(12*day, 1.2), 400*day)
		hosts[i] = h
		jobs = append(jobs, job{h: h, role: roleNone})
		switch h.role {
		case roleAPI:
			h.pods = 1 + r.intn(3)
			for p := range h.pods {
				jobs = append(jobs, job{h: h, role: roleAPI, pod: p})
			}
		case roleNginx, rolePostgres, roleKafka:
			jobs = append(jobs, job{h: h, role: h.role})
		}
	}
	for i := range jobs {
		jobs[i].offset = int64(r.intn(int(g.interval)))
	}
	slices.SortStableFunc(jobs, func(x, y job) int { return int(x.offset - y.offset) })

	rs := map[string]string{} // ReplicaSet hash per deployment and region
	pods := 0
	for _, j := range jobs {
		h := j.h
		switch j.role {
		case roleNone:
			b.begin(j.offset, h.up, "instance", h.ip+":9100", "job", "node", "region", h.region, "zone", h.zone)
			nodeExporter(b, h)
		case roleAPI:
			dep := deployments[(h.idx+j.pod)%len(deployments)]
			key := dep.name + "/" + h.region
			if rs[key] == "" {
				rs[key] = kubeName(&r, 10)
			}
			pods++
			ip := fmt.Sprintf("10.%d.%d.%d", 100+pods/62500%100, pods/250%250, 2+pods%250)
			b.begin(j.offset, min(r.logn(2*day, 1.5), h.up),
				"instance", ip+":8080", "job", "api", "namespace", "shop",
				"pod", dep.name+"-"+rs[key]+"-"+kubeName(&r, 5), "region", h.region, "zone", h.zone)
			apiServer(b, dep)
		case roleNginx:
			b.begin(j.offset, min(r.logn(20*day, 1), h.up), "instance", h.ip+":9113", "job", "nginx", "region", h.region, "zone", h.zone)
			nginx(b)
		case rolePostgres:
			b.begin(j.offset, min(r.logn(30*day, 1), h.up), "instance", h.ip+":9187", "job", "postgres", "region", h.region, "zone", h.zone)
			postgres(b, h)
		case roleKafka:
			b.begin(j.offset, min(r.logn(20*day, 1), h.up), "instance", h.ip+":7071", "job", "kafka", "region", h.region, "zone", h.zone)
			kafka(b, h)
		}
		b.end()
	}
}

// kubeName returns n characters of the alphabet Kubernetes uses for
// generated names.
func kubeName(r *rng, n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	p := make([]byte, n)
	for i := range p {
		p[i] = alphabet[r.intn(len(alphabet))]
	}
	return string(p)
}

func itoa(i int) string { return strconv.Itoa(i) }

// nodeExporter adds node_exporter's series for host h.
func nodeExporter(b *builder, h *host) {
	r := b.r
	b.startTime("node_boot_time_seconds", 1)
	b.steady("node_context_switches_total", float64(h.cpus)*r.logn(1500, 0.5), 0.2, 1)
	for c := range h.cpus {
		cu := min(max(h.util*r.logn(1, 0.3), 0.01), 0.98)
		for _, m := range cpuModes {
			rate, noise := 1-cu, 0.02
			if m != "idle" {
				rate, noise = cu*cpuBusyShare[m]*r.logn(1, 0.3), 0.3
			}
			b.steady("node_cpu_seconds_total", rate, noise, 100, "cpu", itoa(c), "mode", m)
		}
	}
	disks := []string{"nvme0n1"}
	switch r.intn(4) {
	case 0:
		disks = []string{"sda", "sdb"}
	case 1:
		disks = []string{"nvme0n1", "nvme1n1"}
	case 2:
		disks = []string{"xvda"}
	}
	for _, d := range disks {
		rb, wb := r.logn(100*kib, 1.5), r.logn(400*kib, 1.2)
		b.counter("node_disk_io_time_seconds_total", min((rb+wb)/(64*kib)*0.0005, 0.9), 1000, "device", d)
		b.counter("node_disk_read_bytes_total", rb, 1.0/512, "device", d)
		b.counter("node_disk_reads_completed_total", rb/r.logn(16*kib, 0.5), 1, "device", d)
		b.counter("node_disk_writes_completed_total", wb/r.logn(32*kib, 0.5), 1, "device", d)
		b.counter("node_disk_written_bytes_total", wb, 1.0/512, "device", d)
	}
	b.constant("node_entropy_available_bits", 256)
	b.gauge("node_filefd_allocated", r.logn(3000, 0.8), 0.02, 1, 0, math.Inf(1))
	type mount struct{ dev, fs, mp string }
	mounts := []mount{{"/dev/" + disks[0] + "p1", "ext4", "/"}, {"/dev/" + disks[0] + "p15", "vfat", "/boot/efi"}, {"tmpfs", "tmpfs", "/run"}, {"tmpfs", "tmpfs", "/run/lock"}}
	if disks[0][0] != 'n' {
		mounts[0].dev, mounts[1].dev = "/dev/"+disks[0]+"1", "/dev/"+disks[0]+"15"
	}
	switch h.role {
	case rolePostgres, roleKafka:
		mounts = append(mounts, mount{"/dev/" + disks[len(disks)-1], "xfs", "/data"})
	case roleAPI:
		mounts = append(mounts, mount{"overlay", "overlay", "/var/lib/docker/overlay2"})
	}
	for _, m := range mounts {
		size := map[string]float64{"ext4": r.logn(100*gib, 0.7), "vfat": 105 * mib, "tmpfs": h.mem / 10, "xfs": r.logn(1000*gib, 0.8), "overlay": 100 * gib}[m.fs]
		size = math.Floor(size/4096) * 4096
		free := size * r.between(0.1, 0.9)
		kv := []string{"device", m.dev, "fstype", m.fs, "mountpoint", m.mp}
		b.gauge("node_filesystem_avail_bytes", free*0.95, 0.001, 1.0/4096, 0, size, kv...)
		b.constant("node_filesystem_device_error", 0, kv...)
		b.constant("node_filesystem_files", math.Floor(size/16384), kv...)
		b.gauge("node_filesystem_files_free", math.Floor(size/16384*r.between(0.5, 0.99)), 0.0005, 1, 0, size/16384, kv...)
		b.gauge("node_filesystem_free_bytes", free, 0.001, 1.0/4096, 0, size, kv...)
		b.constant("node_filesystem_readonly", 0, kv...)
		b.constant("node_filesystem_size_bytes", size, kv...)
	}
	b.steady("node_forks_total", r.logn(10, 1), 0.5, 1)
	b.steady("node_intr_total", float64(h.cpus)*r.logn(800, 0.5), 0.2, 1)
	load := float64(h.cpus) * h.util
	b.gauge("node_load1", load, 0.1, 100, 0, math.Inf(1))
	b.gauge("node_load15", load, 0.02, 100, 0, math.Inf(1))
	b.gauge("node_load5", load, 0.05, 100, 0, math.Inf(1))
	avail := h.mem * r.between(0.3, 0.85)
	b.gauge("node_memory_Active_bytes", (h.mem-avail)*0.8, 0.01, 1.0/1024, 0, h.mem)
	b.gauge("node_memory_Buffers_bytes", r.logn(200*mib, 0.8), 0.005, 1.0/1024, 0, h.mem)
	b.gauge("node_memory_Cached_bytes", avail*0.6, 0.01, 1.0/1024, 0, h.mem)
	b.gauge("node_memory_Dirty_bytes", r.logn(2*mib, 1), 0.3, 1.0/1024, 0, h.mem)
	b.gauge("node_memory_MemAvailable_bytes", avail, 0.01, 1.0/1024, 0, h.mem)
	b.gauge("node_memory_MemFree_bytes", avail*0.3, 0.02, 1.0/1024, 0, h.mem)
	b.constant("node_memory_MemTotal_bytes", h.mem-r.logn(300*mib, 0.3))
	b.gauge("node_memory_SwapFree_bytes", 0, 0, 1, 0, 0)
	b.constant("node_memory_SwapTotal_bytes", 0)
	nics := []string{"eth0", "lo"}
	switch {
	case h.role == roleAPI:
		nics = append(nics, "cni0")
	case r.intn(4) == 0:
		nics = append(nics, "eth1")
	case r.intn(3) == 0:
		nics = append(nics, "docker0")
	}
	for _, d := range nics {
		rx, tx := r.logn(2*mib, 1.2), r.logn(1*mib, 1.2)
		if d == "lo" {
			rx = r.logn(100*kib, 1)
			tx = rx
		}
		pkt := r.logn(700, 0.3)
		b.counter("node_network_receive_bytes_total", rx, 1, "device", d)
		b.counter("node_network_receive_drop_total", rx/pkt*1e-5, 1, "device", d)
		b.counter("node_network_receive_errs_total", rx/pkt*1e-7, 1, "device", d)
		b.counter("node_network_receive_packets_total", rx/pkt, 1, "device", d)
		b.counter("node_network_transmit_bytes_total", tx, 1, "device", d)
		b.counter("node_network_transmit_packets_total", tx/pkt, 1, "device", d)
		b.constant("node_network_up", map[bool]float64{true: 0, false: 1}[d == "lo"], "device", d)
	}
	b.gauge("node_procs_blocked", 0.3, 0.5, 1, 0, math.Inf(1))
	b.gauge("node_procs_running", 1+load, 0.3, 1, 1, math.Inf(1))
	b.gauge("node_sockstat_TCP_inuse", r.logn(200, 1), 0.05, 1, 0, math.Inf(1))
	b.now("node_time_seconds")
	nodename := "ip-" + replaceDots(h.ip)
	b.constant("node_uname_info", 1, "domainname", "(none)", "machine", "x86_64", "nodename", nodename,
		"release", kernels[h.idx%len(kernels)], "sysname", "Linux", "version", "#1 SMP")
	goRuntime(b, r.logn(15*mib, 0.4), 8, goVersion[h.idx%len(goVersion)])
}

func replaceDots(s string) string {
	p := []byte(s)
	for i, c := range p {
		if c == '.' {
			p[i] = '-'
		}
	}
	return string(p)
}

// goRuntime adds the Go collector and process collector series every Go
// exporter and service carries.
func goRuntime(b *builder, heap, goroutines float64, version string) {
	r := b.r
	b.summary("go_gc_duration_seconds", r.logn(0.05, 1)*heap/(15*mib), r.logn(8e-5, 0.6))
	b.gauge("go_goroutines", goroutines*r.logn(1, 0.3), 0.05, 1, 1, math.Inf(1))
	b.constant("go_info", 1, "version", version)
	b.gauge("go_memstats_alloc_bytes", heap, 0.15, 1, 0, math.Inf(1))
	b.counter("go_memstats_alloc_bytes_total", heap*r.logn(0.1, 1), 1)
	b.gauge("go_memstats_heap_inuse_bytes", heap*1.3, 0.1, 1.0/8192, 0, math.Inf(1))
	b.gauge("go_memstats_heap_objects", heap/r.logn(150, 0.3), 0.15, 1, 0, math.Inf(1))
	b.gauge("go_memstats_sys_bytes", heap*2.2, 0.01, 1.0/8192, 0, math.Inf(1))
	b.gauge("go_threads", 6+r.logn(6, 0.5), 0.01, 1, 1, math.Inf(1))
	process(b, heap*2.5, r.logn(12, 0.5))
}

// process adds the process collector's series.
func process(b *builder, rss, fds float64) {
	r := b.r
	b.steady("process_cpu_seconds_total", r.logn(0.02, 1.2)*rss/(40*mib), 0.3, 100)
	b.constant("process_max_fds", 1048576)
	b.gauge("process_open_fds", fds, 0.05, 1, 3, math.Inf(1))
	b.gauge("process_resident_memory_bytes", rss, 0.02, 1.0/4096, 0, math.Inf(1))
	b.startTime("process_start_time_seconds", 100)
	b.gauge("process_virtual_memory_bytes", rss*30+r.logn(1*gib, 0.2), 0.002, 1.0/4096, 0, math.Inf(1))
	b.constant("process_virtual_memory_max_bytes", 1.8446744073709552e+19)
}

// An HTTP endpoint of a deployment: requests a second relative to the
// others, and its median latency in seconds.
type endpoint struct {
	method, handler string
	weight, latency float64
}

type deployment struct {
	name      string
	endpoints []endpoint
}

var deployments = []deployment{
	{"catalog", []endpoint{
		{"GET", "/api/v1/products", 30, 0.04}, {"GET", "/api/v1/products/:id", 40, 0.015},
		{"GET", "/api/v1/categories", 10, 0.01}, {"GET", "/api/v1/products/:id/reviews", 8, 0.05},
		{"POST", "/api/v1/products/:id/reviews", 0.3, 0.08}}},
	{"checkout", []endpoint{
		{"GET", "/api/v1/cart", 20, 0.02}, {"PUT", "/api/v1/cart/items", 8, 0.03},
		{"DELETE", "/api/v1/cart/items/:id", 2, 0.025}, {"POST", "/api/v1/orders", 2, 0.25},
		{"GET", "/api/v1/orders/:id", 4, 0.03}, {"POST", "/api/v1/payments", 1.5, 0.6}}},
	{"accounts", []endpoint{
		{"POST", "/api/v1/login", 3, 0.12}, {"POST", "/api/v1/logout", 1, 0.01},
		{"GET", "/api/v1/users/:id", 15, 0.008}, {"PATCH", "/api/v1/users/:id", 0.5, 0.04},
		{"POST", "/api/v1/token/refresh", 6, 0.02}}},
	{"search", []endpoint{
		{"GET", "/api/v1/search", 20, 0.12}, {"GET", "/api/v1/suggest", 35, 0.02},
		{"POST", "/api/v1/search/query", 3, 0.3}}},
}

// Status codes by method and their shares of responses.
var statusCodes = map[string][]struct {
	code  string
	share float64
}{
	"GET":    {{"200", 0.955}, {"304", 0.025}, {"404", 0.012}, {"499", 0.002}, {"500", 0.004}, {"503", 0.002}},
	"POST":   {{"200", 0.6}, {"201", 0.33}, {"400", 0.04}, {"401", 0.015}, {"409", 0.005}, {"422", 0.005}, {"500", 0.004}, {"502", 0.001}},
	"PUT":    {{"200", 0.94}, {"400", 0.03}, {"404", 0.02}, {"409", 0.005}, {"500", 0.005}},
	"PATCH":  {{"200", 0.94}, {"400", 0.03}, {"404", 0.02}, {"409", 0.005}, {"500", 0.005}},
	"DELETE": {{"204", 0.95}, {"404", 0.04}, {"500", 0.01}},
}

// apiServer adds the series of one pod of a Go HTTP service.
func apiServer(b *builder, d deployment) {
	r := b.r
	rps := r.logn(40, 1)
	var total float64
	for _, e := range d.endpoints {
		total += e.weight
	}
	eps := append(d.endpoints[:len(d.endpoints):len(d.endpoints)],
		endpoint{"GET", "/healthz", -0.2, 0.0005}, endpoint{"GET", "/metrics", -1.0 / 15, 0.004})
	for _, e := range eps {
		rate := rps * e.weight / total
		if e.weight < 0 {
			rate = -e.weight
		}
		b.histogram("http_request_duration_seconds", rate, e.latency*r.logn(1, 0.3), 0.9, "handler", e.handler, "method", e.method)
		codes := statusCodes[e.method]
		if e.weight < 0 {
			codes = codes[:1]
		}
		for _, c := range codes {
			b.counter("http_requests_total", rate*c.share, 1, "code", c.code, "handler", e.handler, "method", e.method)
		}
	}
	b.gauge("http_requests_in_flight", rps*0.05, 0.5, 1, 0, math.Inf(1))
	goRuntime(b, r.logn(60*mib, 0.8), 20+rps, goVersion[r.intn(len(goVersion))])
}

// nginx adds nginx-prometheus-exporter's series.
func nginx(b *builder) {
	r := b.r
	rps := r.logn(300, 1)
	conns := rps * r.logn(0.5, 0.5)
	b.counter("nginx_connections_accepted", rps/r.logn(20, 0.5), 1)
	b.gauge("nginx_connections_active", conns, 0.1, 1, 1, math.Inf(1))
	b.counter("nginx_connections_handled", rps/r.logn(20, 0.5), 1)
	b.gauge("nginx_connections_reading", conns*0.01, 0.5, 1, 0, math.Inf(1))
	b.gauge("nginx_connections_waiting", conns*0.9, 0.1, 1, 0, math.Inf(1))
	b.gauge("nginx_connections_writing", conns*0.09+1, 0.3, 1, 1, math.Inf(1))
	b.counter("nginx_http_requests_total", rps, 1)
	b.constant("nginx_up", 1)
	b.constant("nginxexporter_build_info", 1, "branch", "HEAD", "goarch", "amd64", "goos", "linux",
		"goversion", "go1.22.7", "revision", "8a4d6f2", "tags", "unknown", "version", "1.3.0")
	goRuntime(b, r.logn(4*mib, 0.3), 9, "go1.22.7")
}

// postgres adds postgres_exporter's series for a database server.
func postgres(b *builder, h *host) {
	r := b.r
	dbs := []struct {
		name, oid string
		load      float64
	}{{"postgres", "5", 0.01}, {"template0", "4", 0}, {"template1", "1", 0}}
	apps := []string{"orders", "users", "inventory", "analytics", "billing", "sessions"}
	first := r.intn(len(apps))
	for i := range 1 + r.intn(3) {
		dbs = append(dbs, struct {
			name, oid string
			load      float64
		}{apps[(first+i)%len(apps)], itoa(16384 + 17*i + r.intn(9)), r.logn(1, 1)})
	}
	modes := []string{"accessexclusivelock", "accesssharelock", "exclusivelock", "rowexclusivelock", "rowsharelock", "sharelock", "sharerowexclusivelock", "shareupdateexclusivelock"}
	states := []string{"active", "disabled", "fastpath function call", "idle", "idle in transaction", "idle in transaction (aborted)"}
	stateLevel := []float64{3, 0, 0, 20, 1, 0.05}
	for _, db := range dbs {
		size := 7.5 * mib
		if db.load > 0.1 {
			size = r.logn(20*gib, 1.5)
		}
		b.monotonic("pg_database_size_bytes", size, db.load*r.logn(2*kib, 1), 1.0/8192, "datname", db.name)
		for i, m := range modes {
			lv := 0.0
			if db.load > 0 && (i == 1 || i == 3) {
				lv = db.load * 4
			}
			b.gauge("pg_locks_count", lv, 0.5, 1, 0, math.Inf(1), "datname", db.name, "mode", m)
		}
		for i, s := range states {
			b.gauge("pg_stat_activity_count", stateLevel[i]*db.load, 0.3, 1, 0, math.Inf(1), "datname", db.name, "state", s)
		}
	}
	b.counter("pg_stat_bgwriter_buffers_alloc_total", r.logn(200, 1), 1)
	b.counter("pg_stat_bgwriter_buffers_backend_total", r.logn(20, 1), 1)
	b.counter("pg_stat_bgwriter_buffers_checkpoint_total", r.logn(50, 1), 1)
	b.counter("pg_stat_bgwriter_checkpoints_req_total", 1e-4, 1)
	b.counter("pg_stat_bgwriter_checkpoints_timed_total", 1.0/300, 1)
	for _, db := range dbs {
		kv := []string{"datid", db.oid, "datname", db.name}
		x := db.load * r.logn(300, 1) // transactions a second
		b.counter("pg_stat_database_blks_hit", x*r.logn(200, 0.7), 1, kv...)
		b.counter("pg_stat_database_blks_read", x*r.logn(2, 1), 1, kv...)
		b.counter("pg_stat_database_conflicts", 0, 1, kv...)
		b.counter("pg_stat_database_deadlocks", x*1e-7, 1, kv...)
		b.gauge("pg_stat_database_numbackends", db.load*r.logn(20, 0.5), 0.1, 1, 0, 500, kv...)
		b.counter("pg_stat_database_temp_bytes", x*r.logn(100, 2), 1, kv...)
		b.counter("pg_stat_database_tup_deleted", x*r.logn(0.05, 1), 1, kv...)
		b.counter("pg_stat_database_tup_fetched", x*r.logn(20, 1), 1, kv...)
		b.counter("pg_stat_database_tup_inserted", x*r.logn(0.5, 1), 1, kv...)
		b.counter("pg_stat_database_tup_returned", x*r.logn(500, 1), 1, kv...)
		b.counter("pg_stat_database_tup_updated", x*r.logn(0.3, 1), 1, kv...)
		b.counter("pg_stat_database_xact_commit", x, 1, kv...)
		b.counter("pg_stat_database_xact_rollback", x*r.logn(0.002, 1), 1, kv...)
	}
	b.constant("pg_settings_max_connections", []float64{100, 200, 500}[r.intn(3)])
	b.constant("pg_settings_shared_buffers_bytes", math.Floor(h.mem/4/8192)*8192)
	b.constant("pg_up", 1)
	goRuntime(b, r.logn(8*mib, 0.3), 10, "go1.21.13")
}

var kafkaTopics = []string{"orders", "payments", "clickstream", "logs.app", "logs.nginx", "metrics.raw",
	"audit", "inventory-updates", "user-events", "notifications", "cdc.users", "cdc.orders", "__consumer_offsets"}

// kafka adds the JMX exporter's series for a Kafka broker.
func kafka(b *builder, h *host) {
	r := b.r
	topics := slices.Clone(kafkaTopics)
	for i := len(topics) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		topics[i], topics[j] = topics[j], topics[i]
	}
	topics = topics[:6+r.intn(8)]
	slices.Sort(topics)
	var parts int
	for _, t := range topics {
		msgs := r.logn(200, 1.5)
		size := r.logn(1*kib, 0.8)
		kv := []string{"topic", t}
		b.counter("kafka_server_brokertopicmetrics_bytesin_total", msgs*size, 1, kv...)
		b.counter("kafka_server_brokertopicmetrics_bytesout_total", msgs*size*r.logn(2, 0.5), 1, kv...)
		b.counter("kafka_server_brokertopicmetrics_failedproducerequests_total", msgs*1e-6, 1, kv...)
		b.counter("kafka_server_brokertopicmetrics_messagesin_total", msgs, 1, kv...)
		np := []int{3, 6, 12, 24, 50}[r.intn(5)]
		for p := range np {
			if r.intn(3) != 0 { // this broker holds a third of the partitions
				continue
			}
			parts++
			pkv := []string{"partition", itoa(p), "topic", t}
			pm := msgs / float64(np)
			b.monotonic("kafka_log_log_logendoffset", math.Floor(pm*b.up*r.between(1, 20)), pm, 1, pkv...)
			b.gauge("kafka_log_log_size", pm*size*7*day*r.logn(1, 0.2), 0.001, 1, 0, math.Inf(1), pkv...)
			b.constant("kafka_cluster_partition_underreplicated", 0, pkv...)
		}
	}
	for _, req := range []string{"Fetch", "FetchConsumer", "FetchFollower", "Heartbeat", "JoinGroup", "Metadata", "OffsetCommit", "Produce"} {
		b.counter("kafka_network_requestmetrics_requests_total", r.logn(50, 1.5), 1, "request", req)
	}
	b.constant("kafka_controller_kafkacontroller_activecontrollercount", float64(r.intn(3)/2))
	b.constant("kafka_server_replicamanager_leadercount", float64(parts/3))
	b.constant("kafka_server_replicamanager_partitioncount", float64(parts))
	b.constant("kafka_server_replicamanager_underreplicatedpartitions", 0)
	heap := h.mem / 8
	for _, gc := range []string{"G1 Old Generation", "G1 Young Generation"} {
		rate := 0.2
		if gc[3] == 'O' {
			rate = 1e-5
		}
		b.counter("jvm_gc_collection_seconds_count", rate, 1, "gc", gc)
		b.counter("jvm_gc_collection_seconds_sum", rate*0.02, 1000, "gc", gc)
	}
	b.gauge("jvm_memory_bytes_committed", heap, 0.01, 1.0/kib, 0, heap*1.5, "area", "heap")
	b.gauge("jvm_memory_bytes_committed", 120*mib, 0.005, 1.0/kib, 0, math.Inf(1), "area", "nonheap")
	b.constant("jvm_memory_bytes_max", heap, "area", "heap")
	b.constant("jvm_memory_bytes_max", -1, "area", "nonheap")
	b.gauge("jvm_memory_bytes_used", heap*0.5, 0.1, 1, 0, heap, "area", "heap")
	b.gauge("jvm_memory_bytes_used", 110*mib, 0.005, 1, 0, math.Inf(1), "area", "nonheap")
	b.gauge("jvm_threads_current", r.logn(120, 0.3), 0.02, 1, 1, math.Inf(1))
	process(b, heap*0.8, r.logn(3000, 0.5))
}
