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
)

// ---- a real redis-server; the Redis clients and redcon are redispeer's ----

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
