// Package metricsgen generates realistic Prometheus-style metric samples,
// deterministically from a seed, and batches them into messages with the
// size distribution of a production edge collector.
//
// The model follows the edge collectors of "Asynchronous Messaging Over
// gRPC" (pl-rants, 2020): they scrape a fleet and ship messages whose sizes
// are "randomly distributed between a few kilobytes and a few hundred
// kilobytes, averaging at 10-25KB depending on site", and whose
// partitioning makes every message a mix of many unrelated series (so it
// compresses poorly). docs/data.md has the same model with measured
// numbers.
//
// # Records
//
// A record is one sample line of the Prometheus text exposition format with
// a timestamp, without a trailing newline:
//
//	node_cpu_seconds_total{cpu="3",instance="10.31.63.209:9100",job="node",mode="user",region="eu-west-1",zone="eu-west-1b"} 214854.67 1700000000038
//
// Labels are sorted by name; values are formatted as Prometheus client
// libraries do (strconv 'g', shortest: 1.268455845951e+12, 0.0138, 256);
// timestamps are Unix milliseconds of simulated time: no wall clock is read.
//
// # Fleet
//
// Config.Hosts machines (default 200), each drawn from the seed:
//
//   - region: us-east-1 35%, eu-west-1 30%, us-west-2 20%, ap-southeast-2
//     15%; zone a, b or c uniformly; address 10.R.x.y with
//     R = 8 + 16·region + 4·zone + U{0..3}, x ~ U{0..255}, y ~ U{2..253},
//     distinct.
//   - CPUs: 2 (10%), 4 (25%), 8 (30%), 16 (20%), 32 (10%), 64 (5%); memory
//     CPUs × 2, 4, 4 or 8 GiB; busy fraction log-normal (median 0.2, σ 0.6)
//     clipped to [0.02, 0.95]; uptime log-normal (median 12 days, σ 1.2)
//     capped at 400 days.
//   - role: none 35%, HTTP service 30% (1 to 3 pods of one of the
//     deployments catalog, checkout, accounts, search), nginx 15%, PostgreSQL
//     10%, Kafka broker 10%.
//
// Every host has a node_exporter target (job="node", port 9100); a role adds
// targets job="api" (one per pod, instance = pod IP:8080, plus labels
// namespace="shop" and pod="catalog-<rs>-<id>"), "nginx" (:9113),
// "postgres" (:9187) or "kafka" (JMX exporter, :7071). Every series carries
// instance, job, region and zone. Each target also gets the series
// Prometheus adds per scrape: up, scrape_duration_seconds,
// scrape_samples_scraped, scrape_series_added.
//
// Metric families are those of the real exporters: node_cpu_seconds_total
// {cpu,mode} (8 modes per CPU), node_memory_*_bytes, node_load1/5/15,
// node_disk_*{device}, node_filesystem_*{device,fstype,mountpoint},
// node_network_*{device}, node_uname_info, ...; http_requests_total
// {code,handler,method} and http_request_duration_seconds{handler,method}
// (a histogram); pg_stat_database_*{datid,datname}, pg_locks_count
// {datname,mode}, pg_stat_activity_count{datname,state}; nginx_connections_*;
// kafka_server_brokertopicmetrics_*{topic}, kafka_log_log_*{partition,topic},
// jvm_*; and on every Go exporter or service go_gc_duration_seconds{quantile}
// (a summary), go_memstats_*, go_goroutines, process_*.
//
// The default fleet (seed 1) has 370 targets, 67,934 series and 121 metric
// names: 42,084 series of job node, 15,195 api, 6,495 kafka, 3,250 postgres,
// 910 nginx. Seeds 0 to 7 give 67,934 to 73,751 series; the count scales
// with Hosts (about 350 series a host).
//
// # Values
//
// Let Δt be the seconds since the target's previous scrape (the scrape
// interval), Z a standard normal draw (new for each use) and U a uniform one
// on [0, 1). Each target has a load L, a random walk L ← L + 0.1(1 − L) +
// 0.03Z clipped to [0.3, 3], that scales its request-like counters and
// histograms together.
//
//   - Counters grow by rate·Δt·(1 + νZ) per scrape (× L for request-like
//     ones; a negative increment adds nothing) and are floored to their unit
//     (CPU seconds 0.01, disk bytes 512, node_disk_io_time 0.001, counts 1).
//     ν is 0.3, 0.2 for interrupts and context switches, 0.02 for idle CPU
//     time. Rates are per family and drawn log-normally per series (for
//     example network receive bytes median 2 MiB/s σ 1.2, HTTP requests per
//     pod median 40/s σ 1 split over endpoints by weight and over status
//     codes by fixed shares such as GET 200 95.5%, 304 2.5%, 404 1.2%, 500
//     0.4%). A counter starts at rate × the target's uptime × U(0.7, 1.3).
//   - Gauges are mean-reverting random walks x ← x + 0.1(level − x) +
//     rel·level·Z, clipped to their range (memory within MemTotal, free
//     space within the size) and rounded to their unit; levels and rel
//     (0.001 for filesystem space to 0.5 for connection counts) are per
//     family. Constants (sizes, limits, info series) never change.
//   - Histograms use the default buckets le = 0.005, 0.01, 0.025, 0.05, 0.1,
//     0.25, 0.5, 1, 2.5, 5, 10, +Inf. Observations are log-normal (median per
//     endpoint, 8 ms to 600 ms, σ 0.9). Per scrape n = rate·Δt·L·(1 + 0.2Z)
//     observations, bucket i gaining ⌊n·P(bucket i) + U⌋; buckets are
//     cumulative, _count equals the +Inf bucket exactly, and _sum grows by
//     the new count × the mean observation × e^(0.1Z).
//   - Summaries (go_gc_duration_seconds) report quantiles 0, 0.25, 0.5,
//     0.75, 1 as m·e^(0.25Z) × (0.35, 0.7, 1, 1.5, 6) × e^(0.1Z), made
//     non-decreasing, in whole nanoseconds; _count and _sum are counters.
//   - Restarts: before each scrape a target restarts with probability
//     Config.RestartProbability (default 1e-4). Its counters, histograms and
//     summaries drop to what accrued since the restart (a uniform 5-95% of
//     the interval earlier), and process_start_time_seconds (and
//     node_boot_time_seconds for node targets) jump to the restart time.
//     These are the only decreases of counters. Broker offsets
//     (kafka_log_log_logendoffset) and pg_database_size_bytes never reset.
//
// # Time and order
//
// Scrape round k scrapes every target once. A target has a fixed offset o
// drawn uniformly from [0, ScrapeInterval), like Prometheus' spread of
// scrapes, and its samples of round k carry the timestamp StartMillis +
// k·ScrapeInterval + o + U{0, 1, 2} ms. AppendRecord returns samples in
// scrape order: the targets by offset, and within a target every series in
// exposition order.
//
// # Messages
//
// NextMessage models the collector's batching. Each series belongs to one
// of Config.Partitions (default 16) partitions by a hash of its name and
// labels; samples are appended to their partition in scrape order. A
// partition draws a target size S for each message and becomes a message
// when the next sample would take it further past S than it stays short of
// S (so sizes round to the nearest line), or when an arriving sample is
// Config.MaxMessageAge (default 5 minutes) newer than its first one. The
// size of a message is the sum of its records' lengths, without framing.
//
// S follows a log-normal distribution truncated to [MinMessageBytes,
// MaxMessageBytes] (default [2 KiB, 400 KiB]) with σ = MessageSigma
// (default 1.0) and μ solved so that the truncated mean is MeanMessageBytes
// (default 16 KiB): μ = 9.1464, median 10,165 bytes, 1st percentile 2,198,
// 99th percentile 98,163, 99.9th 205,277. Means of 10,000 and 25,000 bytes
// give μ = 8.5405 and 9.6145. Each message mixes samples of many targets and
// metric names: with the default fleet a message of 16 KiB or more holds on
// average samples of 50 metric names from 17 targets.
//
// # Determinism and speed
//
// The same Config (Seed included) gives byte-identical records and messages
// on every run: the generator uses its own SplitMix64 streams and no clock
// or map order. Results are identical across machines of the same
// architecture; elsewhere some float values may differ in their last digits
// where the compiler fuses multiply-adds or math functions are implemented
// in assembly.
//
// AppendRecord and NextMessage do not allocate in steady state; they make
// over 1 GB/s of lines on one core (BenchmarkAppendRecord). New builds the
// default fleet in about 45 ms and 20 MB.
package metricsgen
