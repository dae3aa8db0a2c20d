package rr

// Peer is a contestant's program, built from a module of its own under
// interop/ so that the competitor's library never enters sluice's go.mod
// (internal/docs TestMainModuleRequiresNoCompetitor). Its server answers
// the split-process protocol (remote.go) when started with "serve"; its
// client, started with "client" and the common load flags (--addr,
// --mode, --inflight, --rate, --duration, --payload, --burst-seconds,
// --seed, --warmup), runs the load itself and prints one "result" line.
type Peer struct {
	// Module is the module's directory under interop/, Cmd its command
	// (interop/Module/cmd/Cmd).
	Module, Cmd string
	// Client picks the peer's client for this row (after the common flags).
	Client []string
	// Pooled clients also take --conns: their pool size, DialOptions.Conns'
	// rule (one connection per request in flight, as users configure them).
	Pooled bool
}

// Peers are the rows whose server or client (Serve or Dial nil) is a
// peer's.
var Peers = map[string]Peer{
	"rsocket-go":        {Module: "rsocket-go", Cmd: "rrpeer", Client: []string{"--api", "block"}},
	"rsocket-go-async":  {Module: "rsocket-go", Cmd: "rrpeer", Client: []string{"--api", "async"}},
	"rsocket-go-server": {Module: "rsocket-go", Cmd: "rrpeer"},
	// go-redis speaks RESP2 to both servers; rueidis RESP2 to redcon,
	// which has no HELLO 3, and RESP3, its default, to redis-server.
	"resp":            {Module: "redis", Cmd: "redispeer", Client: []string{"--lib", "go-redis"}, Pooled: true},
	"resp-pipelined":  {Module: "redis", Cmd: "redispeer", Client: []string{"--lib", "rueidis"}},
	"redis":           {Module: "redis", Cmd: "redispeer", Client: []string{"--lib", "go-redis"}, Pooled: true},
	"redis-pipelined": {Module: "redis", Cmd: "redispeer", Client: []string{"--lib", "rueidis", "--resp3"}},
}
