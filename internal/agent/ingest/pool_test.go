package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/seglog"
)

// spoolLog collects what the spool writer announces (Config.OnSpooled),
// in the order it announces it; with discard, it only gives the records'
// buffers back, as the driver does once it has sent them.
type spoolLog struct {
	discard bool
	mu      sync.Mutex
	msg     []spool.Spooled
}

func (l *spoolLog) add(ms []spool.Spooled) {
	if l.discard {
		for _, m := range ms {
			spool.PutBuf(m.Rec)
		}
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msg = append(l.msg, ms...)
}

// newPoolIngester is an Ingester compressing with kind on workers
// encoders into a spool that does not fsync (the disk is not what these
// measure), with messages of at most maxMessage bytes.
func newPoolIngester(tb testing.TB, kind codec.Kind, workers, maxMessage int, discard bool) (*Ingester, *spoolLog) {
	tb.Helper()
	sp, err := spool.Open(tb.TempDir(), 0, "", slog.New(slog.DiscardHandler), seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sp.Close() })
	log := &spoolLog{discard: discard}
	reg := prometheus.NewRegistry()
	g, err := New(Config{
		MaxMessageBytes: maxMessage, MaxRecordBytes: maxMessage / 4, Linger: time.Millisecond,
		Compression: kind, CompressWorkers: workers, Logger: slog.New(slog.DiscardHandler),
		Now: func() int64 { return 0 }, OnSpooled: log.add,
	}, sp, metrics.New(reg), spool.NewMetrics(reg))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(g.Close)
	return g, log
}

// poolRecord is record i of request seq of producer p: compressible, and
// of a length that varies so that messages take different times to
// compress.
func poolRecord(p, seq, i int) []byte {
	head := fmt.Sprintf("p%d/s%d/r%d ", p, seq, i)
	return append([]byte(head), bytes.Repeat([]byte("cpu_seconds{host=\"h\"} 12.5 "), 1+(p*7+seq*3+i)%40)...)
}

// TestCompressionPoolKeepsOrder: with more compression workers than the
// requests need, so that messages finish compressing out of order, the
// spool still holds every record exactly once, under consecutive ids, each
// producer's records in the order it sent them (requests split over
// several messages included), and every message compressed exactly as one
// encoder alone compresses it (the same bytes, so the same ratio).
func TestCompressionPoolKeepsOrder(t *testing.T) {
	const producers, requests, perRequest = 6, 12, 300
	g, log := newPoolIngester(t, codec.Zstd, 4, 16<<10, false)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for seq := 1; seq <= requests; seq++ {
				recs := make([][]byte, perRequest)
				for i := range recs {
					recs[i] = poolRecord(p, seq, i)
				}
				if _, err := g.IngestFrom(context.Background(), fmt.Sprint("producer-", p), uint64(seq), recs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	g.Close()

	next := make([]int, producers) // next record number of each producer, seq·perRequest + i
	var dec []byte
	d := codec.NewDecoder(1 << 20)
	alone := codec.NewEncoder(codec.LevelDefault)
	for k, m := range log.msg {
		if m.ID != log.msg[0].ID+uint64(k) {
			t.Fatalf("message %d has id %d, want %d: ids not consecutive", k, m.ID, log.msg[0].ID+uint64(k))
		}
		rec, err := spool.Decode(*m.Rec)
		if err != nil {
			t.Fatal(err)
		}
		if dec, err = d.Decode(dec[:0], rec.Body, rec.Kind, rec.DictID); err != nil {
			t.Fatalf("message %d: %v", m.ID, err)
		}
		if again, _ := alone.Encode(nil, dec, codec.Zstd, 0); !bytes.Equal(again, rec.Body) {
			t.Fatalf("message %d: compressed by the pool to %d bytes, by one encoder alone to %d", m.ID, len(rec.Body), len(again))
		}
		err = batch.Decode(dec, func(r []byte) error {
			var p, seq, i int
			if _, err := fmt.Sscanf(string(r), "p%d/s%d/r%d ", &p, &seq, &i); err != nil {
				return err
			}
			if got, want := (seq-1)*perRequest+i, next[p]; got != want {
				return fmt.Errorf("producer %d: record %d (request %d, #%d) where record %d was due", p, got, seq, i, want)
			}
			next[p]++
			return nil
		})
		if err != nil {
			t.Fatalf("message %d: %v", m.ID, err)
		}
	}
	for p, n := range next {
		if n != requests*perRequest {
			t.Errorf("producer %d: %d records spooled, want %d", p, n, requests*perRequest)
		}
	}
	if len(log.msg) < 2*producers*requests {
		t.Errorf("%d messages: the requests were not split over several messages each, so the pool was not exercised", len(log.msg))
	}
}

// BenchmarkCompressionWorkers: 16 callers ingest 256 KiB messages of
// 200-byte metric-like records with zstd at the default level into a spool
// that does not fsync, with one compression worker and with one per core
// (GOMAXPROCS). One op is one message; MB/s are uncompressed bytes.
//
//	go test -run XXX -bench CompressionWorkers -benchmem ./internal/agent/ingest/
func BenchmarkCompressionWorkers(b *testing.B) {
	const msgBytes, recBytes, feeders = 256 << 10, 200, 16
	msgs := make([][][]byte, 64)
	rnd := rand.New(rand.NewPCG(1, 2))
	for k := range msgs {
		for i := 0; batch.Size(msgs[k])+recBytes+BatchOverhead < msgBytes; i++ {
			r := fmt.Appendf(nil, "cpu_seconds_total{host=\"host-%d\",core=\"%d\",mode=\"user\"} %d.%03d 17%09d", rnd.IntN(200), rnd.IntN(64), rnd.Uint32(), rnd.IntN(1000), rnd.IntN(1e9))
			msgs[k] = append(msgs[k], append(r, bytes.Repeat([]byte{' '}, max(0, recBytes-len(r)))...))
		}
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			g, _ := newPoolIngester(b, codec.Zstd, workers, msgBytes+BatchOverhead, true)
			b.SetBytes(int64(batch.Size(msgs[0])))
			b.ReportAllocs()
			b.SetParallelism((feeders + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			var k sync.Mutex
			n := 0
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k.Lock()
					m := msgs[n%len(msgs)]
					n++
					k.Unlock()
					if err := g.IngestMessage(context.Background(), m); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestEncodersFollowConcurrency: a trickle of messages, one compressed at
// a time, keeps using one encoder of eight; the others never make their
// zstd state (1.6–3.7 MB each, codec BenchmarkZstdState). Before, the encoders were a queue that
// handed each message to the next one in turn, and eight requests woke
// all eight: with GOMAXPROCS 8 the agent of TestHostileListeners held
// 12 MB more after one well-behaved client's few requests than before
// them.
func TestEncodersFollowConcurrency(t *testing.T) {
	const workers = 8
	g, _ := newPoolIngester(t, codec.Zstd, workers, 16<<10, true)
	// A message sealed by the linger timer is compressed on the timer's
	// goroutine, which gives its encoder back after the message's ingest
	// call returned: each request waits until all are back, so that the
	// requests come one at a time (without it, the next request could
	// find the last encoder still out and take another: 2 warm, seen
	// under -race on a loaded machine).
	var free []*encoder
	allBack := func() {
		testwait.For(t, "every encoder back in the stack", func() bool {
			g.encs.mu.Lock()
			defer g.encs.mu.Unlock()
			free = append(free[:0], g.encs.free...)
			return len(free) == workers
		})
	}
	for seq := 1; seq <= 4*workers; seq++ {
		recs := [][]byte{poolRecord(0, seq, 0), poolRecord(0, seq, 1)}
		if _, err := g.IngestFrom(context.Background(), "trickle", uint64(seq), recs); err != nil {
			t.Fatal(err)
		}
		allBack()
	}
	g.Close()
	allBack()
	warm := 0
	for _, e := range free {
		if e.States() > 0 {
			warm++
		}
	}
	if warm != 1 {
		t.Fatalf("after %d requests one at a time: %d of %d encoders made their zstd state, want 1", 4*workers, warm, len(free))
	}
}
