package balance_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/balance"
)

// logRecords is a slog.Handler that keeps what is logged.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}

// find returns the first record with message msg.
func (l *logRecords) find(msg string) (slog.Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.Message == msg {
			return r, true
		}
	}
	return slog.Record{}, false
}

// TestClientOptions: with WithIdempotent every request (no Idempotent
// context) that dies with its server is sent again to another, unless
// WithRetryBudget leaves no retries; WithLogger gets the server-down line,
// whose redial delay comes from WithConfig's backoff.
func TestClientOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []balance.Option
		retried bool
	}{
		{"default budget", nil, true},
		{"no budget", []balance.Option{balance.WithRetryBudget(0, 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Round robin sends the first request to the first server,
			// which holds it until it is killed.
			ss := []*server{startServer(t, time.Hour), startServer(t, 0)}
			log := &logRecords{}
			cfg := balance.DefaultConfig
			cfg.BackoffBase, cfg.BackoffMax = 10*time.Hour, 10*time.Hour
			c := dialAll(t, ss, append([]balance.Option{balance.WithPolicy(balance.RoundRobin), balance.WithIdempotent(),
				balance.WithLogger(slog.New(log)), balance.WithConfig(cfg)}, tc.opts...)...)
			errc := make(chan error, 1)
			go func() {
				_, err := c.RequestResponse(context.Background(), rsocket.Payload{Data: []byte("x")})
				errc <- err
			}()
			testwait.For(t, "the request to reach the first server", func() bool { return ss[0].n.Load() == 1 })
			ss[0].kill()
			err := <-errc
			if tc.retried {
				if err != nil || ss[1].n.Load() != 1 {
					t.Fatalf("request on a dead server: %v, second server served %d, want it retried there", err, ss[1].n.Load())
				}
			} else if err == nil || !strings.Contains(err.Error(), "retry budget exhausted") {
				t.Fatalf("request on a dead server without retry budget: %v", err)
			}

			var down slog.Record
			testwait.For(t, "the server-down log line", func() bool {
				var ok bool
				down, ok = log.find("rsocket balance: server down")
				return ok
			})
			found := false
			down.Attrs(func(a slog.Attr) bool {
				if a.Key == "redial_in" {
					found = true
					// Jittered to [½, 1]× the configured backoff.
					if d := a.Value.Duration(); d < 5*time.Hour || d > 10*time.Hour {
						t.Errorf("redial in %v, want 5h–10h from WithConfig", d)
					}
				}
				return true
			})
			if !found {
				t.Error("the server-down line names no redial_in")
			}
		})
	}
}
