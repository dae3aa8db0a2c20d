package peers

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// JavaEvent is one line the Java server printed: EVENT TRANSPORT KIND VALUE.
type JavaEvent struct{ Kind, Value string }

// StartRSocketJavaServer runs the rsocket-java peer's servers (`Peer
// server`, then mode: none or "resume") and returns their addresses and
// events by transport ("tcp", "ws"). They end with the test (its stdin is
// closed, then the JVM killed after 10 s).
func StartRSocketJavaServer(t testing.TB, ctx context.Context, java, cp string, mode ...string) (map[string]string, map[string]chan JavaEvent) {
	t.Helper()
	cmd := exec.CommandContext(ctx, java, append([]string{JVMFlags, "-cp", cp, "sluice.interop.Peer", "server"}, mode...)...)
	proc := Start(t, cmd, true)
	stdout := proc.Stdout
	events := map[string]chan JavaEvent{"tcp": make(chan JavaEvent, 16), "ws": make(chan JavaEvent, 16)}
	ports := make(chan [2]string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Split(sc.Text(), "\t")
			switch {
			case len(f) == 3 && f[0] == "LISTEN":
				ports <- [2]string{f[1], f[2]}
			case len(f) == 4 && f[0] == "EVENT" && events[f[1]] != nil:
				select {
				case events[f[1]] <- JavaEvent{f[2], f[3]}:
				default:
				}
			}
		}
	}()
	addrs := map[string]string{}
	for len(addrs) < 2 {
		select {
		case p := <-ports:
			addrs[p[0]] = "127.0.0.1:" + p[1]
		case <-time.After(60 * time.Second):
			t.Fatalf("the java server did not start; stderr:\n%s", proc.Stderr())
		}
	}
	return addrs, events
}
