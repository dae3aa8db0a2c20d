package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

// Source produces the records of one Ingest call. Each generator goroutine
// owns one, so a Source need not be safe for concurrent use, and the
// records it returns may alias its buffers until its next call.
type Source func(dst [][]byte) [][]byte

// PipelineConfig runs an agent and a sink in this process, on loopback,
// with feeders calling Agent.Ingest as fast as it accepts.
type PipelineConfig struct {
	Dir      string        // temporary directory if empty
	Duration time.Duration // how long the feeders run
	// MaxRecords stops the feeders early (0: no limit).
	MaxRecords int64
	// Generators run NewSource(0..Generators-1) and hand batches to
	// Feeders goroutines that call Agent.Ingest, so that many producers
	// can wait on the spool at once while few generate. Defaults 2 and 16.
	Generators int
	Feeders    int
	NewSource  func(generator int) Source
	// Batches, when set instead of NewSource, are fed in turn (cycling),
	// without generating or copying anything while the clock runs: the
	// records are made before, so the load generator does not compete for
	// CPU with what is measured.
	Batches [][][]byte
	Agent   agent.Config // SinkAddr and SpoolDir are filled in
	// Transport carries the sessions: "grpc" (default) or "rsocket" (the
	// sink also serves RSocket over TCP on loopback, the agent dials it).
	Transport string
	Sink      sink.Config // DataDir is filled in
	Logger    *slog.Logger
	// Progress receives one line per Interval (nil: none).
	Progress io.Writer
	Interval time.Duration
	// Drain bounds the wait, after the feeders stop, for every spooled
	// message to be acknowledged.
	Drain time.Duration
}

// PipelineResult is what a run measured.
type PipelineResult struct {
	// IngestP50 and IngestP99: how long an Ingest call waited (until its
	// records were fsync'ed in the spool): the producer's view.
	IngestP50, IngestP99 time.Duration
	Elapsed              time.Duration // feeders start to last ack
	FeedElapsed          time.Duration // feeders start to feeders stop
	// MachineBusy is the share of the machine's CPUs busy while the
	// feeders fed, after the first progress tick (ReadMachineCPU; -1
	// where unknown).
	MachineBusy   float64
	Agent         agent.Stats
	Drained       bool // everything spooled was acknowledged within Drain
	IngestedBytes uint64
}

// RecordsPerSec and MBps are acknowledged (delivered and durably stored)
// throughput over the whole run.
func (r PipelineResult) RecordsPerSec() float64 {
	return float64(r.Agent.AckedRecords) / r.Elapsed.Seconds()
}

func (r PipelineResult) MBps() float64 {
	return float64(r.Agent.AckedRawBytes) / r.Elapsed.Seconds() / 1e6
}

// CompressionRatio is uncompressed over compressed message bytes.
func (r PipelineResult) CompressionRatio() float64 {
	if r.Agent.WireBytes == 0 {
		return 1
	}
	return float64(r.Agent.RawBytes) / float64(r.Agent.WireBytes)
}

// drainPoll is how often a run that stopped feeding looks whether every
// spooled message was acknowledged: Elapsed ends at most this late.
const drainPoll = 5 * time.Millisecond

// RunPipeline starts a sink and an agent, feeds the agent, and reports.
func RunPipeline(ctx context.Context, cfg PipelineConfig) (PipelineResult, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Drain == 0 {
		cfg.Drain = 30 * time.Second
	}
	if cfg.Feeders == 0 {
		cfg.Feeders = 16
	}
	if cfg.Generators == 0 {
		cfg.Generators = 2
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-pipeline-")
		if err != nil {
			return PipelineResult{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	scfg := cfg.Sink
	scfg.DataDir = filepath.Join(dir, "sink")
	if scfg.Logger == nil {
		scfg.Logger = cfg.Logger
	}
	srv, err := sink.New(scfg)
	if err != nil {
		return PipelineResult{}, err
	}
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return PipelineResult{}, err
	}
	go grpcserve.Serve(srv.Serving(), lis)

	acfg := cfg.Agent
	acfg.SinkAddr, acfg.SpoolDir = lis.Addr().String(), filepath.Join(dir, "spool")
	switch cfg.Transport {
	case "", "grpc":
	case "rsocket":
		rl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return PipelineResult{}, err
		}
		rctx, stopRS := context.WithCancel(context.Background())
		defer stopRS() // runs after srv.Close: sessions end with their status first
		go rsockettransport.Serve(rctx, rl, srv)
		acfg.SinkAddr = agent.RSocketScheme + "tcp://" + rl.Addr().String()
	default:
		return PipelineResult{}, fmt.Errorf("transport %q: want grpc or rsocket", cfg.Transport)
	}
	if acfg.Logger == nil {
		acfg.Logger = cfg.Logger
	}
	a, err := agent.New(acfg)
	if err != nil {
		return PipelineResult{}, err
	}
	defer a.Close()

	feedCtx, stopFeeding := context.WithTimeout(ctx, cfg.Duration)
	defer stopFeeding()
	var records atomic.Int64
	var latMu sync.Mutex
	ingestLat := hdrhistogram.New(1, 60_000_000, 3) // µs
	var wg, gens sync.WaitGroup
	var feedErr error
	var errOnce sync.Once
	batches := make(chan [][]byte, 2*cfg.Feeders)
	start := time.Now()
	cpu0, cpuOK := ReadMachineCPU()
	machineBusy := -1.0
	if cfg.Batches != nil {
		gens.Add(1)
		go func() {
			defer gens.Done()
			for i := 0; feedCtx.Err() == nil; i++ {
				select {
				case batches <- cfg.Batches[i%len(cfg.Batches)]:
				case <-feedCtx.Done():
				}
			}
		}()
	}
	for g := 0; g < cfg.Generators && cfg.Batches == nil; g++ {
		src := cfg.NewSource(g)
		gens.Add(1)
		go func() {
			defer gens.Done()
			var scratch [][]byte
			for feedCtx.Err() == nil {
				scratch = src(scratch[:0])
				select {
				case batches <- copyBatch(scratch):
				case <-feedCtx.Done():
				}
			}
		}()
	}
	go func() { gens.Wait(); close(batches) }()
	for f := 0; f < cfg.Feeders; f++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range batches {
				if feedCtx.Err() != nil {
					continue // drain so the generators can stop
				}
				t0 := time.Now()
				err := a.Ingest(feedCtx, batch)
				if err == nil {
					latMu.Lock()
					_ = ingestLat.RecordValue(max(time.Since(t0).Microseconds(), 1))
					latMu.Unlock()
				}
				if err != nil {
					if feedCtx.Err() == nil {
						errOnce.Do(func() { feedErr = err })
						stopFeeding()
					}
					continue
				}
				if n := records.Add(int64(len(batch))); cfg.MaxRecords > 0 && n >= cfg.MaxRecords {
					stopFeeding()
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	prev, prevT := a.Stats(), start
	feeding := true
	var feedElapsed time.Duration
	drainDeadline := time.Time{}
	// While draining, poll is when to look again: the drain's end is a
	// figure of the run (Elapsed), so it must not wait for the next
	// progress tick (up to Interval, a second by default: that was one
	// second added to an 8 s run's Elapsed, 11 % off every delivery rate).
	var poll <-chan time.Time
	rampedUp := false
	for {
		select {
		case <-poll:
		case <-done:
			if feeding {
				feeding, feedElapsed = false, time.Since(start)
				if cpu1, ok := ReadMachineCPU(); ok && cpuOK {
					machineBusy = cpu1.BusySince(cpu0)
				}
				drainDeadline = time.Now().Add(cfg.Drain)
				done = nil
				if records.Load() == 0 && feedErr == nil {
					// Nothing to wait for: without this, the drain below
					// (which needs a spooled message) waited out cfg.Drain
					// and reported "did not drain".
					return PipelineResult{}, fmt.Errorf("no Ingest call completed within %s (the first waits for a spool fdatasync; is the machine overloaded?): lengthen the duration", cfg.Duration)
				}
			}
		case now := <-tick.C:
			if feeding && !rampedUp {
				// The machine's busy share counts from here: the first
				// tick's ramp (the sink's session, the first spool sync)
				// is not the steady state.
				rampedUp = true
				if c, ok := ReadMachineCPU(); ok {
					cpu0 = c
				}
			}
			st := a.Stats()
			if cfg.Progress != nil {
				printProgress(cfg.Progress, now.Sub(start), st, prev, now.Sub(prevT), feeding)
			}
			prev, prevT = st, now
		case <-ctx.Done():
			return PipelineResult{}, ctx.Err()
		}
		if !feeding {
			st := a.Progress()
			caughtUp := st.SpooledMessages > 0 && st.AckedMessages >= st.SpooledMessages && st.Unacked == 0
			if caughtUp || time.Now().After(drainDeadline) {
				res := PipelineResult{Elapsed: time.Since(start), FeedElapsed: feedElapsed, Agent: a.Stats(), Drained: caughtUp,
					IngestedBytes: st.IngestedBytes, MachineBusy: machineBusy}
				latMu.Lock()
				res.IngestP50 = time.Duration(ingestLat.ValueAtQuantile(50)) * time.Microsecond
				res.IngestP99 = time.Duration(ingestLat.ValueAtQuantile(99)) * time.Microsecond
				latMu.Unlock()
				return res, feedErr
			}
			poll = time.After(drainPoll)
		}
	}
}

func printProgress(w io.Writer, t time.Duration, st, prev agent.Stats, dt time.Duration, feeding bool) {
	phase := ""
	if !feeding {
		phase = "  (draining)"
	}
	ratio := 1.0
	if st.WireBytes > 0 {
		ratio = float64(st.RawBytes) / float64(st.WireBytes)
	}
	fmt.Fprintf(w, "%5.1fs  %9.0f rec/s  %7.1f MB/s  in-flight %4d msgs %7s  window %s  ratio %4.1fx  resent %d  rtt %s%s\n",
		t.Seconds(),
		float64(st.AckedRecords-prev.AckedRecords)/dt.Seconds(),
		float64(st.AckedRawBytes-prev.AckedRawBytes)/dt.Seconds()/1e6,
		st.InFlightMsgs, HumanBytes(st.InFlightBytes), windowString(st), ratio, st.Resent,
		st.SRTT.Round(10*time.Microsecond), phase)
}

func windowString(st agent.Stats) string {
	switch {
	case st.WindowMsgs > 0 && st.WindowBytes > 0:
		return fmt.Sprintf("%d msgs/%s", st.WindowMsgs, HumanBytes(st.WindowBytes))
	case st.WindowMsgs > 0:
		return fmt.Sprintf("%d msgs", st.WindowMsgs)
	case st.WindowBytes > 0:
		return HumanBytes(st.WindowBytes)
	}
	return "unbounded"
}

// HumanBytes prints a byte count with a binary unit.
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// copyBatch copies records into one allocation the feeder owns.
func copyBatch(recs [][]byte) [][]byte {
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	arena := make([]byte, 0, n)
	out := make([][]byte, len(recs))
	for i, r := range recs {
		start := len(arena)
		arena = append(arena, r...)
		out[i] = arena[start:len(arena):len(arena)]
	}
	return out
}
