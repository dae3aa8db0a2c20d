package connlimit

import (
	"net"
	"testing"
)

// TestLimitListener: Accept takes a connection only while fewer than max are
// open; closing one (once, however often Close is called) lets the next in.
func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, 2)
	defer l.Close()
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	a, _ := l.Accept()
	b, _ := l.Accept()
	third := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		third <- c
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted while two were open")
	default:
	}
	a.Close()
	a.Close() // a second Close frees no second slot
	c := <-third
	if c == nil {
		t.Fatal("no third connection after one closed")
	}
	if n := l.Open(); n != 2 {
		t.Fatalf("%d open, want 2", n)
	}
	b.Close()
	c.Close()
	if n := l.Open(); n != 0 {
		t.Fatalf("%d open after all closed, want 0", n)
	}
}
