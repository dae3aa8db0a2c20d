package main

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/balance"
)

// dialRSocketClient dials the --url of the `sluice rsocket` client
// commands: one URL is one connection; several, comma-separated, are
// balanced (rsocket/balance: power of two choices over EWMA latency ×
// outstanding, failed servers redialled with backoff). Requests are not
// retried, since the CLI cannot know whether the server's handler is
// idempotent.
func dialRSocketClient(ctx context.Context, url string, opts ...rsocket.Option) (balance.Requester, error) {
	var urls []string
	for _, u := range strings.Split(url, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 1 {
		c, err := rsocket.Dial(ctx, urls[0], opts...)
		return c, cli.DialHint(err, "server", urls[0], "--url", "the server's address")
	}
	c, err := balance.Dial(ctx, urls, balance.WithConnOptions(opts...))
	return c, cli.DialHint(err, "server", url, "--url", "the server's address")
}
