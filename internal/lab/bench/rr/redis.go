package rr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// ---- Redis at its best: rueidis auto-pipelining, and a real redis-server ----

// respPipelined is rueidis (github.com/redis/rueidis) on one connection:
// concurrent calls are auto-pipelined, every command queued while the
// last write was under way goes out in the next one, which is what
// rueidis is known for (its README, "Auto Pipelining"). rueidis is a
// dependency of this lab package only, in the main module: a benchmark
// competitor, never imported by sluice's own packages.
type respPipelined struct{ c rueidis.Client }

// dialRESPPipelined connects over RESP2 (redcon does not speak HELLO 3,
// rueidis' default) unless resp3; one connection (PipelineMultiplex -1:
// rueidis' default would open 2 here, log2 of GOMAXPROCS).
func dialRESPPipelined(resp3 bool) func(context.Context, string, DialOptions) (Client, error) {
	return func(_ context.Context, addr string, _ DialOptions) (Client, error) {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{addr},
			ForceSingleClient: true,
			PipelineMultiplex: -1,
			AlwaysRESP2:       !resp3,
			DisableCache:      true, // client-side caching needs RESP3 and is no part of an echo
			ClientSetInfo:     rueidis.DisableClientSetInfo,
		})
		if err != nil {
			return nil, err
		}
		return &respPipelined{c}, nil
	}
}

func (r *respPipelined) Call(ctx context.Context, p []byte) ([]byte, error) {
	return r.c.Do(ctx, r.c.B().Echo().Message(rueidis.BinaryString(p)).Build()).AsBytes()
}

func (r *respPipelined) Close() error { r.c.Close(); return nil }

// RedisServerBin is Debian's redis-server (package redis-server; scripts/
// install-redis.sh installs it where apt works).
const RedisServerBin = "redis-server"

// ErrRedisMissing is what the redis rows say when there is no redis-server.
var ErrRedisMissing = errors.New("redis-server not installed, skipped (scripts/install-redis.sh installs it)")

func redisInstalled() error {
	if _, err := exec.LookPath(RedisServerBin); err != nil {
		return ErrRedisMissing
	}
	return nil
}

// serveRedis starts a real redis-server on loopback, with nothing on disk
// (no RDB snapshots, no AOF), as the bench starts Kafka: a child that
// dies with the bench.
func serveRedis(ctx context.Context) (string, func(), error) {
	if err := redisInstalled(); err != nil {
		return "", nil, err
	}
	ln, err := listen()
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close() // redis-server listens itself
	cmd := exec.Command(RedisServerBin, "--bind", "127.0.0.1", "--port", strconv.Itoa(addr.Port),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning", "--dir", "/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	redisPIDs.Store(addr.String(), cmd.Process.Pid)
	stop := func() { redisPIDs.Delete(addr.String()); cmd.Process.Kill(); cmd.Wait() }
	// Ready when it accepts a connection; bounded.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err == nil {
			c.Close()
			return addr.String(), stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not start: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Unavailable says why protocol name cannot run on this machine (nil:
// it can); the bench skips such a protocol and says so.
func Unavailable(name string) error {
	switch name {
	case "redis", "redis-pipelined":
		return redisInstalled()
	}
	return nil
}

// redisPIDs maps each running redis-server's address to its process id,
// for ServerPID.
var redisPIDs sync.Map

// ServerPID is the process id of the server at addr when it is a program
// of its own started by Serve (redis-server), else 0: the bench reads its
// CPU time from /proc.
func ServerPID(addr string) int {
	pid, _ := redisPIDs.Load(addr)
	n, _ := pid.(int)
	return n
}

// OwnProcess says whether protocol name's server is a program of its own
// already (redis-server), which --split need not wrap in another.
func OwnProcess(name string) bool { return name == "redis" || name == "redis-pipelined" }
