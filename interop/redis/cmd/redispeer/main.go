// Command redispeer is the Redis contestants of `sluice bench rr`
// (protocols resp, resp-pipelined, redis, redis-pipelined): tidwall/redcon
// v1.6.4's ECHO server, and the load loops of two clients, redis/go-redis
// v9.23.0 and redis/rueidis v1.0.79. It lives in this separate module so
// that none of the three enters sluice's own go.mod; `sluice bench rr`
// builds it into the user cache (internal/testkit/peerbuild).
//
//	redispeer serve [--addr 127.0.0.1:0]
//	redispeer client --addr HOST:PORT --lib go-redis|rueidis [--resp3] [--conns N] [--mode burst|open|closed] [--inflight N] [--rate N] [--duration D] [--payload N]
//
// serve speaks the split-process protocol of sluice's
// internal/lab/bench/rr: it prints "addr HOST:PORT" once it listens,
// answers each "cpu" line on stdin with "cpu MICROSECONDS" (its user+system
// CPU time so far), and exits at EOF on stdin. client prints one "result"
// line (see client.go).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/tidwall/redcon"
)

const usage = "usage: redispeer serve [--addr 127.0.0.1:0] | redispeer client --addr HOST:PORT --lib go-redis|rueidis [--resp3] [--mode burst|open|closed] ..."

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "client":
		err = client(os.Args[2:])
	case "serve":
		fs := flag.NewFlagSet("redispeer serve", flag.ExitOnError)
		addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0: a free one)")
		fs.Parse(os.Args[2:])
		if fs.NArg() > 0 {
			err = fmt.Errorf("unexpected arguments %q", fs.Args())
			break
		}
		err = serve(*addr)
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "redispeer:", err)
		os.Exit(1)
	}
}

// serve runs redcon's echo server until EOF on stdin.
func serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := redcon.NewServer("", handle, nil, nil)
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Printf("addr %s\n", ln.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "cpu" {
			fmt.Printf("cpu %d\n", cpuTime().Microseconds())
		}
	}
	return sc.Err()
}

// handle answers ECHO and PING; everything else is an error, as a real
// server answers what it does not know: go-redis probes with HELLO and
// CLIENT SETINFO unless told not to, and must see them refused.
func handle(c redcon.Conn, cmd redcon.Command) {
	switch strings.ToLower(string(cmd.Args[0])) {
	case "echo":
		if len(cmd.Args) != 2 {
			c.WriteError("ERR wrong number of arguments for 'echo'")
			return
		}
		c.WriteBulk(cmd.Args[1])
	case "ping":
		c.WriteString("PONG")
	default:
		c.WriteError("ERR unknown command '" + string(cmd.Args[0]) + "'")
	}
}
