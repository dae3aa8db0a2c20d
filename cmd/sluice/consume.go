package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/sink"
)

func init() {
	register("consume", "print the records in a sink's store, one per line, in store order", runConsume)
}

// kafkaOffsetBits: with a Kafka-backed sink an offset is a partition and an
// offset in it, packed as partition<<48 | offset (see internal/sink).
const kafkaOffsetBits = 48

// storeOffset is the --from flag: OFFSET, or PARTITION:OFFSET for a
// Kafka-backed sink (packed as the sink expects).
type storeOffset uint64

func (o *storeOffset) String() string { return formatOffset(uint64(*o)) }

func (o *storeOffset) Set(s string) error {
	ps, offs, ok := strings.Cut(s, ":")
	if !ok {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("bad offset %q: want OFFSET or PARTITION:OFFSET", s)
		}
		*o = storeOffset(n)
		return nil
	}
	p, err1 := strconv.ParseUint(ps, 10, 16)
	n, err2 := strconv.ParseUint(offs, 10, 64)
	if err1 != nil || err2 != nil || n >= 1<<kafkaOffsetBits {
		return fmt.Errorf("bad offset %q: want PARTITION:OFFSET, partition < 65536, offset < 2^48", s)
	}
	*o = storeOffset(p<<kafkaOffsetBits | n)
	return nil
}

// formatOffset shows a packed Kafka offset of a partition other than 0 as
// PARTITION:OFFSET, any other as a number.
func formatOffset(v uint64) string {
	if p := v >> kafkaOffsetBits; p != 0 {
		return strconv.FormatUint(p, 10) + ":" + strconv.FormatUint(v&(1<<kafkaOffsetBits-1), 10)
	}
	return strconv.FormatUint(v, 10)
}

func runConsume(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("consume", "--sink HOST:PORT [flags]", stderr)
	addr := fs.String("sink", "", "the sink's address, HOST:PORT (required)")
	var from storeOffset
	fs.Var(&from, "from", "store `OFFSET` to start at (default 0: the start, or the group's committed offset with --group);\n"+
		"with a Kafka-backed sink PARTITION:OFFSET, or a plain offset when the topic has one partition")
	follow := fs.Bool("follow", false, "keep printing new records as they are stored, until interrupted")
	group := fs.String("group", "", "consumer group: start at its committed offset and commit after every message printed\n"+
		"(a Kafka-backed sink keeps the offsets in Kafka, as the consumer group NAME of its topic)")
	credits := fs.Uint("credits", 256, "messages the sink may send ahead of what is printed")
	progress := fs.Bool("progress", false, "report progress on stderr")
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *addr == "" {
		fs.Usage()
		return &exitError{code: 2, msg: "--sink is required"}
	}
	if *credits < 2 || *credits > 1<<20 {
		return &exitError{code: 2, msg: "--credits must be between 2 and 1048576"}
	}
	fromSet := false
	fs.Visit(func(f *flag.Flag) { fromSet = fromSet || f.Name == "from" })
	opts, err := cf.dialOptions()
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(sink.MaxMessageBytesLimit+(1<<20))))
	if *follow {
		// A following consumer may wait a long time for records; pings
		// tell a quiet sink from a frozen one, which then counts as lost.
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 10 * time.Second}))
	}
	cc, err := grpc.NewClient(*addr, opts...)
	if err != nil {
		return err
	}
	defer cc.Close()

	sig, stop := signalContext()
	defer stop()
	c := &consumer{client: sluicev1.NewSinkClient(cc), stderr: stderr, out: bufio.NewWriterSize(stdout, 256<<10),
		group: *group, follow: *follow, window: uint32(*credits), progress: *progress,
		start: &sluicev1.ReadStart{FromOffset: uint64(from), FromCommitted: *group != "" && !fromSet, Follow: *follow, Group: *group}}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	backoff := consumeReconnectMin
	for {
		err := c.session(sig, tick.C)
		if err == nil || !*follow || !retryableRead(err) || sig.Err() != nil {
			return err
		}
		// The sink went away (restarted, crashed, or the network broke):
		// wait and read on from the first offset not yet printed, so
		// nothing is printed twice and nothing is skipped.
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*mrand.Float64()))
		fmt.Fprintf(stderr, "consume: sink at %s: %v; reconnecting in %s, resuming at offset %s\n",
			*addr, err, wait.Round(time.Millisecond), c.resumeAt())
		select {
		case <-sig.Done():
			return nil
		case <-time.After(wait):
		}
		if c.gotAny {
			backoff = consumeReconnectMin // the last stream delivered: start the back-off afresh
		} else {
			backoff = min(2*backoff, consumeReconnectMax)
		}
		c.gotAny = false
	}
}

// Back-off between a following consumer's reconnection attempts.
const (
	consumeReconnectMin = 100 * time.Millisecond
	consumeReconnectMax = 5 * time.Second
)

// retryableRead: errors a following consumer outlives by reconnecting. The
// others (bad offset, permissions, data loss) need a person.
func retryableRead(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Unknown, codes.Internal:
		return true
	}
	return false
}

// consumer prints a sink's records. Its position survives the streams it
// reads through, so a following consumer resumes where it stopped.
type consumer struct {
	client   sluicev1.SinkClient
	stderr   io.Writer
	out      *bufio.Writer
	group    string
	follow   bool
	window   uint32
	progress bool
	start    *sluicev1.ReadStart // for the first stream

	msgs, recs, next uint64
	// positioned: next is the first offset not yet printed (a message was
	// printed, or the sink reported the end of its log).
	positioned bool
	// gotAny: the current stream delivered something.
	gotAny bool
	// partitioned: offsets of a Kafka partition other than 0 were seen.
	partitioned bool
}

func (c *consumer) resumeAt() string {
	if c.positioned {
		return formatOffset(c.next)
	}
	if c.start.GetFromCommitted() {
		return "the group's committed offset"
	}
	return formatOffset(c.start.GetFromOffset())
}

func (c *consumer) report(final bool) {
	if !c.progress {
		return
	}
	state := "reading"
	if final {
		state = "done"
	}
	fmt.Fprintf(c.stderr, "consume: %s: %d messages, %d records, next offset %s\n", state, c.msgs, c.recs, formatOffset(c.next))
}

// session reads one stream until it ends. nil means done (the end of the
// log without --follow, or an interrupt); an error may be retryable.
func (c *consumer) session(sig context.Context, tick <-chan time.Time) error {
	// The stream has its own context: on a signal the consumer closes its
	// side, so that its commits are applied, instead of cancelling.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.client.Read(ctx)
	if err != nil {
		return err
	}
	start := c.start
	switch {
	case c.positioned && c.partitioned && c.group != "":
		// One offset cannot say where each Kafka partition stopped; the
		// group's commits can (a commit lost with the sink reprints).
		start = &sluicev1.ReadStart{FromCommitted: true, Follow: c.follow, Group: c.group}
	case c.positioned && c.partitioned:
		return status.Error(codes.FailedPrecondition, "cannot resume a multi-partition Kafka read without --group")
	case c.positioned:
		// Resume from what was printed, not from the group's committed
		// offset: a commit may not have reached the sink before it died.
		start = &sluicev1.ReadStart{FromOffset: c.next, Follow: c.follow, Group: c.group}
	}
	if err := stream.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: start}}); err != nil && err != io.EOF {
		return err
	}
	window := c.window
	if err := stream.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: window}}); err != nil && err != io.EOF {
		return err
	}

	type recv struct {
		resp *sluicev1.ReadResponse
		err  error
	}
	resps := make(chan recv, 64)
	go func() {
		for {
			r, err := stream.Recv()
			select {
			case resps <- recv{r, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	out := c.out
	outstanding := window
	closed := false // our side is closed: print nothing more
	closeSend := func() {
		if !closed {
			closed = true
			stream.CloseSend()
		}
	}
	var grace <-chan time.Time
	for {
		var r recv
		select {
		case r = <-resps:
		case <-sig.Done():
			// Stop printing; let the sink apply our commits and end.
			sig = context.Background()
			closeSend()
			grace = time.After(5 * time.Second)
			continue
		case <-grace:
			cancel()
			continue
		case <-tick:
			c.report(false)
			continue
		}
		if r.err != nil {
			ferr := out.Flush()
			switch {
			case r.err == io.EOF:
				c.report(true)
				return ferr
			case closed && (status.Code(r.err) == codes.Canceled || status.Code(r.err) == codes.OK):
				c.report(true)
				return ferr
			case ferr != nil:
				return ferr
			}
			return fmt.Errorf("read: %w", r.err)
		}
		if closed {
			continue // interrupted: anything more is neither printed nor committed
		}
		switch b := r.resp.GetBody().(type) {
		case *sluicev1.ReadResponse_Message:
			m := b.Message
			for _, rec := range m.GetRecords() {
				out.Write(rec)
				out.WriteByte('\n')
			}
			c.msgs++
			c.recs += uint64(len(m.GetRecords()))
			c.next, c.positioned, c.gotAny = m.GetOffset()+1, true, true
			c.partitioned = c.partitioned || m.GetOffset()>>kafkaOffsetBits != 0
			if c.group != "" {
				// Commit only what is out of our hands.
				if err := out.Flush(); err != nil {
					return err
				}
				if err := stream.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Commit{Commit: c.next}}); err != nil && err != io.EOF {
					return err
				}
			}
			if outstanding--; outstanding <= window/2 {
				if err := stream.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: window - outstanding}}); err != nil && err != io.EOF {
					return err
				}
				outstanding = window
			}
		case *sluicev1.ReadResponse_End:
			c.next, c.positioned, c.gotAny = b.End.GetNextOffset(), true, true
			if err := out.Flush(); err != nil {
				return err
			}
			if !c.follow {
				// Done: closing our side lets the sink apply the last
				// commits and end the stream.
				closeSend()
			}
		}
	}
}
