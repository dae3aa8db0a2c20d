package kafkastore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawProducer sends record batches the sink encoded itself to one broker,
// over a connection of its own: the producing half of the Kafka-native
// hop (docs/benchmarks.md, issue 27's seventh pass), where the sink wraps
// the records an agent compressed in a batch header and hands them to
// Kafka as they came. franz-go's producer takes records, not encoded
// batches, hence this.
//
// Requests are written in the order Produce is called, and Kafka answers
// the requests of a connection in the order it read them, so one
// partition's batches land in the order they were produced without a
// producer id or sequence numbers; up to inflight requests are written
// and not yet answered (the broker reads the next while it appends the
// last). It never retries: a batch whose request failed may or may not
// be in the topic, and a retry here could store it twice; the sink's
// caller fails its Append instead, and the dedup index (the tailer reads
// what landed) decides on the agent's resend. A failed connection fails
// every request written on it and every later Produce; the owner dials
// anew.
type rawProducer struct {
	conn    net.Conn
	fmtr    *kmsg.RequestFormatter
	topic   string
	timeout int32 // ms the broker waits for the in-sync replicas (acks=all)
	// answerWithin bounds the wait for each answer once the reader waits
	// for it: the broker's own timeout plus rawAnswerMargin. A broker that
	// froze, or a connection half open after a network fault, fails the
	// requests instead of holding them forever.
	answerWithin time.Duration

	// wmu orders the writes: a request's correlation id, its place in
	// inflight and its bytes on the connection follow the same order.
	wmu  sync.Mutex
	corr int32
	wbuf []byte

	// inflight holds the written requests not yet answered, in write
	// order; its capacity bounds them.
	inflight chan rawCall

	failOnce sync.Once
	err      error         // why the connection failed; set before done closes
	done     chan struct{} // closed when the connection failed or was closed
	readerWG sync.WaitGroup
}

// rawCall is one written produce request waiting for its answer.
type rawCall struct {
	corr      int32
	partition int32
	done      func(baseOffset int64, err error)
}

// rawProduceVersion is the produce request version rawProducer speaks:
// v8, the last before flexible encoding, which every broker since Kafka
// 2.4 and through 4.x answers (4.0 dropped only versions 0 to 2). One
// batch per partition per request, as Kafka requires since v3.
const rawProduceVersion = 8

// rawMaxResponse bounds a response's size: a produce response for one
// partition is a few dozen bytes; anything near this is not Kafka.
const rawMaxResponse = 1 << 20

// rawAnswerMargin is what answerWithin allows beyond the broker's own
// timeout: a broker under load answers late, not never.
const rawAnswerMargin = 30 * time.Second

// errRawClosed is the error of requests still unanswered at Close.
var errRawClosed = errors.New("kafka raw producer: closed")

// dialRaw connects to the broker at addr, checks that it takes produce
// requests of rawProduceVersion, and returns a producer to topic with at
// most inflight requests unanswered.
func dialRaw(ctx context.Context, addr, topic, clientID string, inflight int, timeout time.Duration) (*rawProducer, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &rawProducer{
		conn: conn, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		topic: topic, timeout: int32(timeout.Milliseconds()), answerWithin: timeout + rawAnswerMargin,
		inflight: make(chan rawCall, max(inflight, 1)), done: make(chan struct{}),
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := p.checkVersions(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("kafka raw producer %s: %w", addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	p.readerWG.Add(1)
	go p.read()
	return p, nil
}

// checkVersions asks the broker for its API versions (ApiVersions v0,
// which every broker answers whatever it supports) and fails unless it
// takes rawProduceVersion.
func (p *rawProducer) checkVersions() error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	p.corr++
	if _, err := p.conn.Write(p.fmtr.AppendRequest(nil, req, p.corr)); err != nil {
		return err
	}
	body, err := readResponse(p.conn, nil, p.corr)
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("ApiVersions response: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 {
			if k.MinVersion > rawProduceVersion || k.MaxVersion < rawProduceVersion {
				return fmt.Errorf("the broker takes produce requests v%d to v%d, not v%d", k.MinVersion, k.MaxVersion, rawProduceVersion)
			}
			return nil
		}
	}
	return errors.New("the broker takes no produce requests")
}

// Produce writes a request storing batch (one encoded record batch) in
// partition and returns once it is written, or blocks while inflight
// requests are unanswered. done is called once, from the producer's
// reading goroutine, with the offset Kafka gave the batch's first record
// or the request's error. An error returned by Produce means done will
// not be called.
func (p *rawProducer) Produce(partition int32, batch []byte, done func(baseOffset int64, err error)) error {
	req := kmsg.NewPtrProduceRequest()
	req.Version = rawProduceVersion
	req.Acks = -1
	req.TimeoutMillis = p.timeout
	req.Topics = []kmsg.ProduceRequestTopic{{
		Topic:      p.topic,
		Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}},
	}}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.corr++
	call := rawCall{corr: p.corr, partition: partition, done: done}
	// In inflight before its bytes go out, so that its answer finds it.
	select {
	case p.inflight <- call:
	case <-p.done:
		return p.err
	}
	p.wbuf = p.fmtr.AppendRequest(p.wbuf[:0], req, call.corr)
	if _, err := p.conn.Write(p.wbuf); err != nil {
		// The call is in inflight: the reader fails it with the rest.
		p.fail(fmt.Errorf("kafka raw producer: write: %w", err))
	}
	if cap(p.wbuf) > 4<<20 {
		p.wbuf = nil // do not keep one large message's buffer
	}
	return nil
}

// fail records the connection's first failure and closes it; the reader
// then fails every request unanswered.
func (p *rawProducer) fail(err error) {
	p.failOnce.Do(func() {
		p.err = err
		close(p.done)
		p.conn.Close()
	})
}

// Close closes the connection; requests not yet answered fail with
// errRawClosed (they may or may not have been stored).
func (p *rawProducer) Close() {
	p.fail(errRawClosed)
	p.readerWG.Wait()
}

// read answers the written requests in order until the connection fails,
// then fails the rest.
func (p *rawProducer) read() {
	defer p.readerWG.Done()
	var buf []byte
	for {
		var call rawCall
		select {
		case call = <-p.inflight:
		case <-p.done:
			p.failPending()
			return
		}
		_ = p.conn.SetReadDeadline(time.Now().Add(p.answerWithin))
		body, err := readResponse(p.conn, buf[:0], call.corr)
		if err != nil {
			p.fail(fmt.Errorf("kafka raw producer: read: %w", err))
			call.done(-1, p.err)
			p.failPending()
			return
		}
		buf = body[:0]
		call.done(p.parse(body, call.partition))
	}
}

// failPending fails the requests left in inflight. Holding wmu, no
// Produce adds one meanwhile, and every later one sees done closed.
func (p *rawProducer) failPending() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for {
		select {
		case c := <-p.inflight:
			c.done(-1, p.err)
		default:
			return
		}
	}
}

// parse reads a produce response for one partition of p.topic.
func (p *rawProducer) parse(body []byte, partition int32) (int64, error) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = rawProduceVersion
	if err := resp.ReadFrom(body); err != nil {
		return -1, fmt.Errorf("kafka raw producer: produce response: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Topic != p.topic {
			continue
		}
		for _, pr := range t.Partitions {
			if pr.Partition == partition {
				if err := kerr.ErrorForCode(pr.ErrorCode); err != nil {
					return -1, err
				}
				return pr.BaseOffset, nil
			}
		}
	}
	return -1, fmt.Errorf("kafka raw producer: the response names no partition %d of %q", partition, p.topic)
}

// readResponse reads one response (non-flexible header: size, correlation
// id) into buf and returns its body, checking that it answers corr.
func readResponse(r io.Reader, buf []byte, corr int32) ([]byte, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(head[:4]))
	if size < 4 || size > rawMaxResponse {
		return nil, fmt.Errorf("response of %d bytes", size)
	}
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
		return nil, fmt.Errorf("response to request %d, want %d", got, corr)
	}
	n := int(size) - 4
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
