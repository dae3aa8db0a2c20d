package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
	cc, err := grpc.NewClient(*addr, opts...)
	if err != nil {
		return err
	}
	defer cc.Close()

	sig, stop := signalContext()
	defer stop()
	// The stream has its own context: on a signal the consumer closes its
	// side, so that its commits are applied, instead of cancelling.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := sluicev1.NewSinkClient(cc).Read(ctx)
	if err != nil {
		return err
	}
	start := &sluicev1.ReadStart{FromOffset: uint64(from), FromCommitted: *group != "" && !fromSet, Follow: *follow, Group: *group}
	if err := stream.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: start}}); err != nil && err != io.EOF {
		return err
	}
	window := uint32(*credits)
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
			resps <- recv{r, err}
			if err != nil {
				return
			}
		}
	}()

	out := bufio.NewWriterSize(stdout, 256<<10)
	var msgs, recs, next uint64
	outstanding := window
	report := func(final bool) {
		if !*progress {
			return
		}
		state := "reading"
		if final {
			state = "done"
		}
		fmt.Fprintf(stderr, "consume: %s: %d messages, %d records, next offset %s\n", state, msgs, recs, formatOffset(next))
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
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
		case <-tick.C:
			report(false)
			continue
		}
		if r.err != nil {
			ferr := out.Flush()
			report(true)
			switch {
			case r.err == io.EOF:
				return ferr
			case closed && (status.Code(r.err) == codes.Canceled || status.Code(r.err) == codes.OK):
				return ferr
			}
			return errors.Join(fmt.Errorf("read: %w", r.err), ferr)
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
			msgs++
			recs += uint64(len(m.GetRecords()))
			next = m.GetOffset() + 1
			if *group != "" {
				// Commit only what is out of our hands.
				if err := out.Flush(); err != nil {
					return err
				}
				if err := stream.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Commit{Commit: next}}); err != nil && err != io.EOF {
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
			next = b.End.GetNextOffset()
			if err := out.Flush(); err != nil {
				return err
			}
			if !*follow {
				// Done: closing our side lets the sink apply the last
				// commits and end the stream.
				closeSend()
			}
		}
	}
}
