// Package kafkastore stores the sink's messages in a Kafka topic: one
// Kafka record per record of each message (headers: agent, message,
// index, count), produced with acks=all, and keeps the dedup index in step
// with what every sink writing the topic stored, through a consumer
// tailing the topic (tail.go). It implements store.Store; it knows nothing
// of sessions or transports (the sink's consumer reads use ListOffsets,
// ClientOpts and ParseHeaders).
package kafkastore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/store"
)

// The header of every Kafka record the sink writes (kafkarec.HeaderSluice:
// the dedup key of the record and the size of its message in one value).
const HeaderSluice = kafkarec.HeaderSluice

// The four headers older sinks wrote, still read (ParseHeaders) for
// topics they wrote to. Values are decimal ASCII, except sluice-agent,
// the agent id as sent in Hello.
const (
	HeaderAgent   = "sluice-agent"
	HeaderMessage = "sluice-message"
	HeaderIndex   = "sluice-index"
	HeaderCount   = "sluice-count"
)

// Kafka store timings. Variables so that tests can shorten them.
var (
	// ProbeEvery is how often the health monitor lists the topic's
	// end offsets.
	ProbeEvery = time.Second
	// ProbeTimeout bounds one probe; a probe failing marks the store
	// unavailable.
	ProbeTimeout = 2 * time.Second
	// StallAfter: a group commit outstanding this long marks the
	// store unavailable.
	StallAfter = 2 * time.Second
)

// kafkaRecordOverhead is what a record batch holding one record needs
// beyond the record's value, at most: the batch header, the record's
// varints, its key (the agent id, at most store.MaxAgentID bytes) and its
// headers. The largest value accepted is the topic's max.message.bytes
// minus this.
const kafkaRecordOverhead = 4096

// kafkaBufferedRecords and kafkaBufferedBytes bound what the producer holds
// not yet acknowledged (at least twice MaxMessageBytes).
const (
	kafkaBufferedRecords = 100_000
	kafkaBufferedBytes   = 64 << 20
)

// FetchMaxBytes and FetchMaxPartitionBytes bound one fetch of
// the tailer and of a Read stream. Kafka still returns a larger record
// batch whole, so that the consumer progresses.
const (
	FetchMaxBytes          = 16 << 20
	FetchMaxPartitionBytes = 4 << 20
)

// URL is a parsed Config.Store of the form
// kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?partitions=N&replication=N&compression=C&headers=H&agent-records=on|off].
type URL struct {
	brokers     []string
	topic       string
	partitions  int32  // when the sink creates the topic
	replication int16  // when the sink creates the topic; 0: min(3, brokers)
	compression string // of the record batches the sink produces: one of Compressions
	// fourHeaders: the records carry the four headers of sinks from
	// before HeaderSluice (headers=four), for a topic that such sinks
	// still write to and read (docs/scaling.md, "Upgrading the sinks of
	// one topic").
	fourHeaders bool
	// agentRecords (agent-records=on): the sink asks its agents to seal
	// their messages as Kafka records sections (codec.KafkaZstd) and puts
	// their compressed bytes in the topic untouched (issue 27's
	// Kafka-native hop). Only with the default zstd and headers=one. Off
	// by default: agent and sink spend 10 to 18 % less CPU per record, but
	// the broker spends about as much more on four times the batches (the
	// machine's CPU per record in `bench ingest` (b) was 1.80 µs against
	// 1.79, docs/benchmarks.md, issue 27's twelfth pass), and every
	// record's key and header survive the agent's zstd, 1.39× the bytes
	// from agent to sink, which an agent on a slow link pays
	// (docs/scaling.md). A small message is not a batch
	// of its own (agentBatchFits), so agents sealing little at a time
	// still make full batches.
	agentRecords bool
}

// The URL's headers parameter: HeadersOne (the default) writes the one
// HeaderSluice header, HeadersFour the four headers older sinks wrote
// and read. Both are read whatever the parameter.
const (
	HeadersOne  = "one"
	HeadersFour = "four"
)

// Compressions are the codecs the sink can compress its record batches
// with (the URL's compression parameter); every Kafka consumer since
// Kafka 2.1 reads all of them.
var Compressions = []string{"zstd", "lz4", "snappy", "none"}

// DefaultCompression is the codec of the sink's record batches when the
// URL names none: zstd (at its fastest level, batchCompressor). The
// records reached the sink zstd-compressed by the agent, so any codec here
// compresses every byte a second time, and the tailer and the broker (which
// validates every batch) decompress it. Measured on bench ingest's records
// (docs/benchmarks.md, issue 27, second pass), in CPU time per 4 MiB batch
// compressed and decompressed: zstd 9.5 ms, lz4 7.5 ms, snappy 5.3 ms —
// 0.66, 0.52 and 0.37 µs per record, against (b)'s 3.6 µs per record in
// agent and sink, a difference alternated end-to-end runs do not resolve
// (lz4/zstd: 0.92× in one sitting, 1.00× in the next) — for ratios of
// 15.6, 9.6 and 8.6: lz4 and snappy put 1.6× and 1.8× the bytes on every
// replica. Neither reference producer defaults to zstd (franz-go's default
// is snappy, the Java producer's compression.type none); none cost the
// broker 2.3× zstd's CPU per record here (it stores ~15× the bytes).
const DefaultCompression = "zstd"

func (u *URL) String() string {
	return "kafka://" + strings.Join(u.brokers, ",") + "/" + u.topic
}

func ParseURL(s string) (*URL, error) {
	bad := func(format string, args ...any) (*URL, error) {
		return nil, fmt.Errorf("store %q: %s (want kafka://HOST:PORT[,HOST:PORT]/TOPIC[?partitions=N&replication=N&compression=C&headers=one|four&agent-records=on|off])", s, fmt.Sprintf(format, args...))
	}
	rest := strings.TrimPrefix(s, "kafka://")
	rest, query, _ := strings.Cut(rest, "?")
	hosts, topic, ok := strings.Cut(rest, "/")
	if !ok || topic == "" {
		return bad("no topic")
	}
	u := &URL{topic: topic, partitions: 1}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return bad("broker %q is not HOST:PORT", h)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return bad("broker %q: bad port", h)
		}
		u.brokers = append(u.brokers, h)
	}
	if err := validTopic(topic); err != nil {
		return bad("%v", err)
	}
	u.compression = DefaultCompression
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "partitions":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 || n > 1<<16-1 {
				return bad("partitions=%q: want 1 to 65535", v)
			}
			u.partitions = int32(n)
		case "replication":
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil || n < 1 {
				return bad("replication=%q: want a positive number", v)
			}
			u.replication = int16(n)
		case "compression":
			if !slices.Contains(Compressions, v) {
				return bad("compression=%q: want one of %s", v, strings.Join(Compressions, ", "))
			}
			u.compression = v
		case "headers":
			if v != HeadersOne && v != HeadersFour {
				return bad("headers=%q: want %s or %s", v, HeadersOne, HeadersFour)
			}
			u.fourHeaders = v == HeadersFour
		case "agent-records":
			if v != "on" && v != "off" {
				return bad("agent-records=%q: want on or off", v)
			}
			u.agentRecords = v == "on"
		default:
			return bad("unknown parameter %q", k)
		}
	}
	if u.agentRecords && (u.compression != "zstd" || u.fourHeaders) {
		return bad("agent-records=on needs compression=zstd and headers=one: the agents' records are zstd with the one sluice header")
	}
	return u, nil
}

// validTopic applies Kafka's rules for topic names.
func validTopic(t string) error {
	if t == "." || t == ".." {
		return fmt.Errorf("topic %q is not allowed", t)
	}
	if len(t) > 249 {
		return fmt.Errorf("topic name of %d bytes: at most 249", len(t))
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic %q: only ASCII letters, digits, '.', '_' and '-' are allowed", t)
		}
	}
	return nil
}

// Store writes messages to a Kafka topic, one Kafka record per record
// of each message (see the package documentation), and keeps the dedup
// index in step with what every sink writing the topic stored, through a
// tailer reading the topic (tail.go) — all of it but the batches this
// store's own producer wrote, whose messages the writer indexes.
type Store struct {
	env Env
	u   *URL
	d   *store.Dedup
	cl  *kgo.Client // producer and admin requests
	adm *kadm.Client

	// ctx ends at abort or close: it fails what is still buffered in the
	// producer and stops the background goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup

	closeProducer func()

	topicID     kadm.TopicID
	recordLimit int // largest record value accepted

	// inflightSince is the time (UnixNano) the current append started, 0
	// when none is in progress: the monitor's measure of a stall.
	inflightSince atomic.Int64

	// Only the writer's goroutine uses dec, sectionDec and own.
	dec store.BodyDecoder
	// sectionDec decompresses kafka_zstd messages that are split
	// (splitSection); nil until the first.
	sectionDec *codec.Decoder
	// own writes the sink's own record batches (ownbatch.go): with the
	// default compression (zstd) and headers; nil otherwise, when the
	// records go through franz-go's producer.
	own *ownBatchWriter

	tail *tailer
}

// Env is what the Kafka store needs from the sink: settings, the
// log, metrics, the dictionaries and where to report its health. It holds
// no *Sink, so the store cannot reach back into sessions or the server.
type Env struct {
	Log             *slog.Logger
	DataDir         string // holds the dedup checkpoint
	MaxMessageBytes int64
	// StartTimeout bounds how long Open waits for the brokers.
	StartTimeout time.Duration
	// TailHold, if set, holds the tailer until it is closed (tests).
	TailHold <-chan struct{}
	Dicts    *store.Dicts
	Metrics  Metrics
	// OnStatus is told when the store becomes available or not.
	OnStatus func(available bool, detail string)
}

// Metrics are the store's instruments, registered by the caller.
type Metrics struct {
	Produce, CatchUp     prometheus.Observer
	Records, TailRecords prometheus.Counter
	Foreign              prometheus.Counter
	// TailSkipped counts the records of this sink's own batches the
	// tailer skipped (the writer added their messages to the index).
	TailSkipped prometheus.Counter
	Lag         prometheus.Gauge
}

// RecordLimit is the largest record value the topic takes.
func (k *Store) RecordLimit() int { return k.recordLimit }

// Topic is the topic's name.
func (k *Store) Topic() string { return k.u.topic }

// Admin is the store's admin client (group offsets).
func (k *Store) Admin() *kadm.Client { return k.adm }

// Context ends when the store is aborted or closed.
func (k *Store) Context() context.Context { return k.ctx }

// ClientOpts are the options of a new client of the store's brokers (id
// names it to the brokers).
func (k *Store) ClientOpts(id string) []kgo.Opt { return clientOpts(k.u, k.env.Log, id) }

// ListOffsets returns the topic's start and end offsets per partition.
func (k *Store) ListOffsets(ctx context.Context) (starts, ends map[int32]int64, err error) {
	return k.listOffsets(ctx)
}

// kafkaLogger passes franz-go's errors to the sink's log at debug level:
// during an outage it logs every failed connection, and the store's health
// monitor already reports the outage once.
type kafkaLogger struct{ log *slog.Logger }

func (l kafkaLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }
func (l kafkaLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l.log.Debug("kafka: "+msg, append(keyvals, "kafka_level", level.String())...)
}

// clientOpts are the options of every Kafka client of the sink.
func clientOpts(u *URL, log *slog.Logger, id string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(u.brokers...),
		kgo.ClientID("sluice-sink-" + id),
		kgo.WithLogger(kafkaLogger{log}),
		// kadm answers metadata from a cache at most this old: a new
		// topic or a broker back from an outage is seen soon.
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			return min(100*time.Millisecond<<min(tries, 4), time.Second)
		}),
	}
}

// Open connects to the brokers, creates the topic if it is missing,
// loads the dedup checkpoint and starts the tailer and the health monitor.
// It fails if the brokers cannot be reached within Config.KafkaStartTimeout
// (it keeps trying until then, so a broker still starting is waited for): a
// wrong address should be an error at startup, not a sink that never
// stores anything. Later outages only stall the writer.
func Open(env Env, u *URL) (*Store, *store.Dedup, error) {
	k := &Store{env: env, u: u, dec: store.BodyDecoder{Dicts: env.Dicts}}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	var batchMax atomic.Int32
	batchMax.Store(1000012)
	opts := append(clientOpts(u, env.Log, "producer"),
		kgo.DefaultProduceTopic(u.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		batchCompression(u.compression),
		// An outage blocks the writer instead of failing messages:
		// unlimited retries and no delivery timeout (the defaults), and no
		// giving up on a topic that a restarting broker does not know
		// yet.
		kgo.RecordDeliveryTimeout(0),
		kgo.UnknownTopicRetries(-1),
		kgo.MaxBufferedRecords(kafkaBufferedRecords),
		kgo.MaxBufferedBytes(max(kafkaBufferedBytes, 2*int(env.MaxMessageBytes))),
		kgo.ProducerBatchMaxBytesFn(func(string) int32 { return batchMax.Load() }),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("sink: store %s: %w", u, err)
	}
	var once sync.Once
	k.cl, k.adm = cl, kadm.NewClient(cl)
	k.closeProducer = func() { once.Do(cl.Close) }
	fail := func(err error) (*Store, *store.Dedup, error) {
		k.cancel()
		k.closeProducer()
		return nil, nil, fmt.Errorf("sink: store %s: %w", u, err)
	}
	ctx, cancel := context.WithTimeout(k.ctx, env.StartTimeout)
	defer cancel()
	parts, err := k.ensureTopic(ctx)
	if err != nil {
		return fail(err)
	}
	maxMsg, err := k.topicMaxMessageBytes(ctx)
	if err != nil {
		return fail(err)
	}
	batchMax.Store(int32(maxMsg))
	k.recordLimit = maxMsg - kafkaRecordOverhead
	d, pos := k.loadCheckpoint()
	k.d = d
	k.tail, err = newTailer(k, pos, parts)
	if err != nil {
		return fail(err)
	}
	if u.compression == DefaultCompression && !u.fourHeaders {
		if k.own, err = newOwnBatchWriter(k); err != nil {
			return fail(err)
		}
	} else if id, _, err := cl.ProducerID(ctx); err == nil {
		// The producer's id, known before its first batch reaches the
		// topic, so that the tailer skips this sink's batches from the
		// first; the promises follow it if franz-go takes a new one.
		k.tail.ownPID.Store(id)
	} else {
		env.Log.Debug("sink: Kafka producer id unknown; the tailer decodes this sink's batches until the first is acknowledged", "err", err)
	}
	env.Log.Info("sink: Kafka store open", "store", u.String(), "partitions", len(parts),
		"max_record_bytes", k.recordLimit, "compression", u.compression, "agents", d.Agents())
	k.bg.Add(2)
	go func() {
		defer k.bg.Done()
		k.tail.run()
	}()
	go func() {
		defer k.bg.Done()
		k.monitor()
	}()
	return k, d, nil
}

// ensureTopic returns the topic's partitions, creating the topic if it does
// not exist.
func (k *Store) ensureTopic(ctx context.Context) ([]int32, error) {
	created := false
	wait := k.env.StartTimeout
	attempts := 0
	for {
		attempts++
		md, err := k.adm.Metadata(ctx, k.u.topic)
		if err != nil {
			// A refused connection fails at once: try again until the
			// deadline, and report the brokers' last error, not the
			// context's (nil while it runs).
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("cannot reach the brokers within %v (%d attempts): %w", wait, attempts, err)
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		td, ok := md.Topics[k.u.topic]
		switch {
		case ok && td.Err == nil && len(td.Partitions) > 0 && allLed(td):
			k.topicID = td.ID
			parts := make([]int32, 0, len(td.Partitions))
			for p := range td.Partitions {
				parts = append(parts, p)
			}
			return parts, nil
		case (!ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition)) && !created:
			rf := k.u.replication
			if rf == 0 {
				rf = int16(min(3, max(1, len(md.Brokers))))
			}
			minISR := "1"
			if rf >= 3 {
				minISR = "2"
			}
			maxMsg := strconv.FormatInt(k.env.MaxMessageBytes+64<<10, 10)
			resp, err := k.adm.CreateTopic(ctx, k.u.partitions, rf, map[string]*string{
				"max.message.bytes":   &maxMsg,
				"min.insync.replicas": &minISR,
			}, k.u.topic)
			if err == nil {
				err = resp.Err
			}
			switch {
			case err == nil:
				k.env.Log.Info("sink: created Kafka topic", "topic", k.u.topic, "partitions", k.u.partitions,
					"replication", rf, "min_insync_replicas", minISR, "max_message_bytes", maxMsg)
			case errors.Is(err, kerr.TopicAlreadyExists):
				// Another sink was quicker.
			default:
				return nil, fmt.Errorf("create topic %q: %w", k.u.topic, err)
			}
			created = true
		}
		// Not ready yet (just created, or leaders being elected).
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %q not ready within %v", k.u.topic, wait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func allLed(td kadm.TopicDetail) bool {
	for _, p := range td.Partitions {
		if p.Leader < 0 {
			return false
		}
	}
	return true
}

// topicMaxMessageBytes returns the topic's max.message.bytes: the largest
// record batch the brokers take.
func (k *Store) topicMaxMessageBytes(ctx context.Context) (int, error) {
	rcs, err := k.adm.DescribeTopicConfigs(ctx, k.u.topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic %q: %w", k.u.topic, err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return 0, fmt.Errorf("describe topic %q: %w", k.u.topic, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				n, err := strconv.Atoi(*c.Value)
				if err != nil || n < 2*kafkaRecordOverhead {
					return 0, fmt.Errorf("topic %q has max.message.bytes %q: too small", k.u.topic, *c.Value)
				}
				return n, nil
			}
		}
	}
	return 1048588, nil // Kafka's default
}

// Append writes every record of msgs and waits for Kafka to acknowledge
// all of them (acks=all). Each message is decompressed with its agent's
// dictionary and split into records, which are produced as soon as the
// whole message checked out, so the producer sends while the rest are
// decoded. The producer buffers at most kafkaBufferedRecords records and
// kafkaBufferedBytes bytes (Produce blocks beyond), and a message's decoded
// body and records are recycled once Kafka has acknowledged all its records,
// so memory stays bounded whatever the compression ratio. The producer
// retries without limit: while Kafka is down Append blocks, the streams'
// queues fill, and credits stop — messages wait in the agents' spools.
func (k *Store) Append(msgs []*store.Message) (int64, error) {
	start := time.Now()
	k.inflightSince.Store(start.UnixNano())
	defer k.inflightSince.Store(0)
	// Where the tailer stands now: before every record this Append writes.
	rewindTo := k.tail.positions()
	if k.own != nil {
		bytes, nrecs, err := k.appendOwn(msgs)
		k.env.Metrics.Produce.Observe(time.Since(start).Seconds())
		if err != nil {
			k.tail.rewind(rewindTo)
			//lint:ignore ST1005 Kafka is a name, capitalized wherever it stands
			return 0, fmt.Errorf("Kafka: %w", err)
		}
		k.env.Metrics.Records.Add(float64(nrecs))
		return bytes, nil
	}
	c := &commit{ownPID: &k.tail.ownPID}
	var bytes int64
	var nrecs int
	for _, it := range msgs {
		m := msgRecordsPool.Get().(*msgRecords)
		if err := k.split(m, it); err != nil || len(m.recs) == 0 {
			// A message of no records has nothing to produce: it is
			// stored as it is.
			m.release()
			it.DropErr = err
			continue
		}
		// The last promise may recycle m before produce returns: count
		// its records first.
		nrecs += len(m.recs)
		bytes += k.produce(c, m, it)
	}
	// Send what lingers at once, and wait for every promise.
	_ = k.cl.Flush(k.ctx)
	c.wg.Wait()
	k.env.Metrics.Produce.Observe(time.Since(start).Seconds())
	if c.first != nil {
		// The tailer skipped this sink's batches, and the writer will
		// not add these messages: the tailer must read them.
		k.tail.rewind(rewindTo)
		//lint:ignore ST1005 Kafka is a name, capitalized wherever it stands
		return 0, fmt.Errorf("Kafka: %w", c.first)
	}
	k.env.Metrics.Records.Add(float64(nrecs))
	return bytes, nil
}

// batchCompression is the producer option that compresses the sink's
// record batches with codec (one of Compressions).
func batchCompression(codec string) kgo.Opt {
	switch codec {
	case "lz4":
		return kgo.ProducerBatchCompression(kgo.Lz4Compression())
	case "snappy":
		return kgo.ProducerBatchCompression(kgo.SnappyCompression())
	case "none":
		return kgo.ProducerBatchCompression(kgo.NoCompression())
	}
	return kgo.WithCompressor(&batchCompressor{})
}

// batchCompressor compresses the record batches the sink produces with
// zstd at its fastest level, without zstd's frame checksum. The agent's
// message was compressed once already, for the network, and the sink
// decompresses it to split it into records, so every byte is compressed
// twice on this path: at franz-go's default level (zstd's "default",
// klauspost's doubleFast) the second compression was a quarter of the
// sink's CPU (bench ingest, (b)). On the bench's records the fastest level
// compresses 1.3× faster and, with a 64 KiB window, no worse (ratio 15.6
// against 14.6: BenchmarkBatchCompressor). The frame checksum (an xxhash of every
// byte, also verified by every consumer) repeats the CRC-32C Kafka keeps
// over the whole batch. Any Kafka consumer reads these frames.
type batchCompressor struct{ encoders sync.Pool }

func (c *batchCompressor) Compress(dst *bytes.Buffer, src []byte, flags ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	if slices.Contains(flags, kgo.CompressDisableZstd) {
		return src, kgo.CodecNone // a broker too old for zstd
	}
	enc, _ := c.encoders.Get().(*zstd.Encoder)
	if enc == nil {
		var err error
		// The window franz-go uses: Kafka batches are at most
		// max.message.bytes, and a small window keeps every consumer's
		// decoder small.
		enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
			zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			return nil, kgo.CodecError
		}
	}
	defer c.encoders.Put(enc)
	dst.Grow(enc.MaxEncodedSize(len(src)))
	return enc.EncodeAll(src, dst.Bytes()), kgo.CodecZstd
}

// commit is what the promises of one Append share.
type commit struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	first error // the first produce error
	// ownPID is the tailer's: the producer id of the records Kafka
	// acknowledged, whose batches the tailer skips.
	ownPID *atomic.Int64
}

// msgRecords are the Kafka records of one message, recycled (msgRecordsPool)
// once Kafka acknowledged them all: at a few hundred thousand records a
// second, allocating a kgo.Record and four headers per record was a fifth
// of the bytes the sink allocated, and the garbage collector's work with it.
type msgRecords struct {
	body   []byte // the decompressed message, which the records' values alias
	recs   []kgo.Record
	hdrs   []kgo.RecordHeader
	values []byte // the records' header values
	left   atomic.Int64
	c      *commit
	// promiseFn is m.promise, made once per msgRecords (by produce): a
	// method value handed to Produce is a closure allocated per record
	// otherwise.
	promiseFn func(*kgo.Record, error)
}

var msgRecordsPool = sync.Pool{New: func() any { return new(msgRecords) }}

// release recycles m; a message decompressed into more than 8 MiB gives
// its body buffer up so that one large message does not stay pinned.
func (m *msgRecords) release() {
	clear(m.recs) // the producer's references: values, contexts
	m.recs, m.c = m.recs[:0], nil
	if cap(m.body) > 8<<20 {
		m.body = nil
	}
	msgRecordsPool.Put(m)
}

// promise is the producer's callback for each record of m.
func (m *msgRecords) promise(r *kgo.Record, err error) {
	c := m.c
	// Written once per producer id, read by the tailer: no store per
	// record on the shared cache line.
	if err == nil && c.ownPID.Load() != r.ProducerID {
		c.ownPID.Store(r.ProducerID)
	}
	if err != nil {
		c.mu.Lock()
		if c.first == nil {
			c.first = err
		}
		c.mu.Unlock()
	}
	if m.left.Add(-1) == 0 {
		m.release()
	}
	c.wg.Done()
}

// TakesKafkaRecords reports whether the store takes codec.KafkaZstd
// bodies as agents sent them (store.KafkaRecordsTaker), and so whether the
// sink's Welcome asks agents for them: with agent-records=on and its own
// record batches (zstd, the one header), which it puts such a body in
// untouched. Otherwise the session converts such messages into zstd
// batches first (an agent may still send them, sealed for another sink).
func (k *Store) TakesKafkaRecords() bool { return k.own != nil && k.u.agentRecords }

// split decompresses it into m.body and slices its records into m.recs
// (values only), in one pass over it (it was three): a message that is malformed, disagrees with
// its record count or holds a record larger than the topic takes is not
// produced at all.
func (k *Store) split(m *msgRecords, it *store.Message) error {
	if it.Codec == codec.KafkaZstd {
		return k.splitSection(m, it)
	}
	body := it.Body
	if it.Codec != codec.Plain {
		var err error
		if body, err = k.dec.Decode(m.body[:0], it.Agent, it.Codec, it.DictID, it.Body); err != nil {
			return fmt.Errorf("decompress: %w", err)
		}
		m.body = body[:0]
	}
	m.recs = m.recs[:0]
	err := batch.Decode(body, func(rec []byte) error {
		if len(rec) > k.recordLimit {
			return fmt.Errorf("a record of %d bytes is larger than the topic takes (%d)", len(rec), k.recordLimit)
		}
		m.recs = append(m.recs, kgo.Record{Value: rec})
		return nil
	})
	if err == nil && len(m.recs) != int(it.Records) {
		err = fmt.Errorf("%d records, header says %d", len(m.recs), it.Records)
	}
	return err
}

// splitSection is split for a kafka_zstd message too large for a batch
// of its own (agentBatchFits): its records section is decompressed and
// checked again (the session did; this costs nothing on the common path)
// and its values sliced into m.recs, from which the writer builds batches
// as for any message.
func (k *Store) splitSection(m *msgRecords, it *store.Message) error {
	if k.sectionDec == nil {
		k.sectionDec = codec.NewDecoder(defaults.SinkMaxMessageLimit)
	}
	section, err := k.sectionDec.Decode(m.body[:0], it.Body, codec.KafkaZstd, it.DictID)
	if err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	m.body = section[:0]
	m.recs = m.recs[:0]
	return kafkarec.Records(section, it.AgentB, it.ID, int(it.Records), func(_ int, v []byte) error {
		if len(v) > k.recordLimit {
			return fmt.Errorf("a record of %d bytes is larger than the topic takes (%d)", len(v), k.recordLimit)
		}
		m.recs = append(m.recs, kgo.Record{Value: v})
		return nil
	})
}

// produce gives the producer m's records, with their headers, and returns
// their bytes. The headers' values share one buffer, grown once.
func (k *Store) produce(c *commit, m *msgRecords, it *store.Message) int64 {
	n := len(m.recs)
	m.c = c
	if m.promiseFn == nil {
		m.promiseFn = m.promise
	}
	m.left.Store(int64(n))
	perRec, valueLen := 1, kafkarec.HeaderValueMaxLen(it.AgentB)
	if k.u.fourHeaders {
		perRec, valueLen = 4, fourHeadersLen
	}
	m.hdrs = slices.Grow(m.hdrs[:0], perRec*n)[:perRec*n]
	// Grown once to hold every record's value: the values are slices of
	// it, so it must not move while they are built.
	values := slices.Grow(m.values[:0], n*valueLen)
	// One timestamp for the message's records: franz-go reads the clock
	// for each record that has none (2.5 % of bench ingest (b)'s CPU).
	now := time.Now().Truncate(time.Millisecond)
	for i := range m.recs {
		rh := RecordHeaders{Agent: it.AgentB, Message: it.ID, Index: uint32(i), Count: uint32(n)}
		h := m.hdrs[perRec*i : perRec*(i+1) : perRec*(i+1)]
		if k.u.fourHeaders {
			values = appendFourHeaders(values, h, rh)
		} else {
			v0 := len(values)
			values = kafkarec.AppendHeaderValue(values, rh)
			h[0] = kgo.RecordHeader{Key: HeaderSluice, Value: values[v0:len(values):len(values)]}
		}
		// A recycled record must not keep what the producer set on it
		// last time (its timestamp above all): build it anew.
		m.recs[i] = kgo.Record{Topic: k.u.topic, Key: it.AgentB, Value: m.recs[i].Value, Headers: h, Timestamp: now}
	}
	m.values = values
	c.wg.Add(n)
	var bytes int64
	// The last promise may release m while this loop still runs: take
	// each record's size before giving it away, and never touch m after.
	recs := m.recs
	for i := range recs {
		r := &recs[i]
		bytes += int64(len(r.Value))
		k.cl.Produce(k.ctx, r, m.promiseFn)
	}
	return bytes
}

// monitor probes the topic every ProbeEvery and watches the writer for
// stalls; it sets the store's availability, tells the tailer about new
// partitions and updates the lag gauge.
func (k *Store) monitor() {
	t := time.NewTicker(ProbeEvery)
	defer t.Stop()
	for {
		detail := ""
		ctx, cancel := context.WithTimeout(k.ctx, ProbeTimeout)
		ends, err := k.adm.ListEndOffsets(ctx, k.u.topic)
		cancel()
		if k.ctx.Err() != nil {
			return
		}
		if err == nil {
			err = ends.Error()
		}
		switch {
		case err != nil:
			detail = "Kafka does not answer: " + err.Error()
		case len(ends[k.u.topic]) == 0:
			detail = fmt.Sprintf("topic %q does not exist", k.u.topic)
		}
		if since := k.inflightSince.Load(); since != 0 {
			if d := time.Since(time.Unix(0, since)); d >= StallAfter {
				stall := fmt.Sprintf("Kafka has not acknowledged a write for %v", d.Round(100*time.Millisecond))
				if detail == "" {
					detail = stall
				} else {
					detail = stall + "; " + detail
				}
			}
		}
		k.env.OnStatus(detail == "", detail)
		if err == nil {
			k.tail.sawEnds(ends)
			if k.own != nil {
				k.own.w.partitionsSeen.Store(int32(len(ends[k.u.topic])))
			}
		}
		select {
		case <-t.C:
		case <-k.ctx.Done():
			return
		}
	}
}

// listOffsets returns the topic's start and end offsets per partition.
func (k *Store) listOffsets(ctx context.Context) (starts, ends map[int32]int64, err error) {
	get := func(f func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
		lo, err := f(ctx, k.u.topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return nil, err
		}
		m := make(map[int32]int64, len(lo[k.u.topic]))
		for p, o := range lo[k.u.topic] {
			m[p] = o.Offset
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("topic %q does not exist", k.u.topic)
		}
		return m, nil
	}
	if ends, err = get(k.adm.ListEndOffsets); err != nil {
		return nil, nil, err
	}
	if starts, err = get(k.adm.ListStartOffsets); err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}

// gate returns a channel closed once the tailer has read the topic up to
// its end offsets as of now, so that everything any sink had written by
// the time the agent said Hello is in the dedup index before a message of
// the agent is written. While Kafka cannot be reached it keeps trying.
func (k *Store) Gate(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		start := time.Now()
		if err := k.catchUp(ctx); err != nil {
			return
		}
		k.env.Metrics.CatchUp.Observe(time.Since(start).Seconds())
		close(ch)
	}()
	return ch
}

// catchUp waits until the tailer has read every partition up to its end
// offset as listed now (or later, if Kafka does not answer now).
func (k *Store) catchUp(ctx context.Context) error {
	for {
		lctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
		starts, ends, err := k.listOffsets(lctx)
		cancel()
		if err == nil {
			return k.tail.waitFor(ctx, starts, ends)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-k.ctx.Done():
			return k.ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (k *Store) CheckpointName() string { return CheckpointName }

func (k *Store) AppendCheckpoint(dst []byte) []byte {
	return appendKafkaCheckpoint(dst, k.u.topic, k.topicID, k.tail.pos, k.d)
}

func (k *Store) TakeTailBytes() int64 { return k.tail.bytes.Swap(0) }

func (k *Store) Abort() {
	k.cancel()
	k.closeProducer()
}

func (k *Store) Close() error {
	k.cancel()
	k.tail.close()
	k.bg.Wait()
	if k.own != nil {
		k.own.w.Close()
	}
	k.closeProducer()
	return nil
}

// Retry runs f until it succeeds, fails with an error Kafka does not
// call retriable, or 10 seconds have passed. Group requests fail with
// COORDINATOR_NOT_AVAILABLE while Kafka creates its offsets topic, and
// during leader changes.
func Retry(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil || !kerr.IsRetriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fourHeadersLen bounds the bytes appendFourHeaders appends: three
// decimal numbers (the agent id is not copied).
const fourHeadersLen = 20 + 10 + 10

// appendFourHeaders sets h (four headers) to rh as sinks from before
// HeaderSluice wrote it, their decimal values appended to b (which must
// have room: they are slices of it) and returned.
func appendFourHeaders(b []byte, h []kgo.RecordHeader, rh RecordHeaders) []byte {
	dec := func(v uint64) []byte {
		n := len(b)
		b = strconv.AppendUint(b, v, 10)
		return b[n:len(b):len(b)]
	}
	h[0] = kgo.RecordHeader{Key: HeaderAgent, Value: rh.Agent}
	h[1] = kgo.RecordHeader{Key: HeaderMessage, Value: dec(rh.Message)}
	h[2] = kgo.RecordHeader{Key: HeaderIndex, Value: dec(uint64(rh.Index))}
	h[3] = kgo.RecordHeader{Key: HeaderCount, Value: dec(uint64(rh.Count))}
	return b
}
