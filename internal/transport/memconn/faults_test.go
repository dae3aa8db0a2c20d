package memconn

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
)

// recorder is a Service that records the ids of the messages it receives
// on Send sessions and acks each one.
type recorder struct {
	mu  sync.Mutex
	ids []uint64
}

func (r *recorder) ServeRead(protocol.Conn) error { return nil }
func (r *recorder) ServeSend(c protocol.Conn) error {
	for {
		f, err := c.Recv()
		if err != nil {
			return nil
		}
		if _, ok := f.(*protocol.Dictionary); ok {
			return nil // the end: the client reads the acks queued, then EOF
		}
		if m, ok := f.(*protocol.Message); ok {
			r.mu.Lock()
			r.ids = append(r.ids, m.ID)
			r.mu.Unlock()
			if err := c.Send(&protocol.Ack{Ranges: []protocol.IDRange{{First: m.ID, Last: m.ID}}}); err != nil {
				return nil
			}
		}
	}
}

// faultRun sends n messages through a FaultDialer and returns what the
// service received and the acks that came back, in order.
func faultRun(t *testing.T, seed uint64, f Faults, n int) (got, acks []uint64) {
	t.Helper()
	rec := &recorder{}
	d := &FaultDialer{Inner: &Dialer{Service: rec}, Seed: seed, Faults: f}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := c.Send(&protocol.Message{ID: uint64(i), Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// A Dictionary is never faulted: it ends the session in order.
	if err := c.Send(&protocol.Dictionary{ID: 1}); err != nil {
		t.Fatal(err)
	}
	for {
		fr, err := c.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, fr.(*protocol.Ack).Ranges[0].First)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.ids), acks
}

// TestFaultsReplay: the same seed gives the same drops and duplicates in
// both directions, another seed others; and the faults happen at about the
// rates asked.
func TestFaultsReplay(t *testing.T) {
	f := Faults{Drop: 0.1, Dup: 0.1}
	a, aa := faultRun(t, 7, f, 500)
	b, ba := faultRun(t, 7, f, 500)
	c, _ := faultRun(t, 8, f, 500)
	if !slices.Equal(a, b) || !slices.Equal(aa, ba) {
		t.Fatalf("seed 7 twice: different faults\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same faults")
	}
	if len(a) < 450 || len(a) > 550 || len(a) == 500 || len(aa) == len(a) {
		t.Fatalf("%d messages arrived and %d acks of 500 sent with 10%% drops and 10%% duplicates", len(a), len(aa))
	}
}

// TestFaultsHold: held frames arrive, later than frames sent after them.
func TestFaultsHold(t *testing.T) {
	rec := &recorder{}
	d := &FaultDialer{Inner: &Dialer{Service: rec}, Seed: 3, Faults: Faults{Hold: 0.3, HoldFrames: 3, HoldFor: time.Millisecond}}
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(nil)
	go func() { // drain the acks
		for {
			if _, err := c.Recv(); err != nil {
				return
			}
		}
	}()
	for i := range 200 {
		if err := c.Send(&protocol.Message{ID: uint64(i), Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec.mu.Lock()
		got := slices.Clone(rec.ids)
		rec.mu.Unlock()
		if len(got) == 200 {
			if slices.IsSorted(got) {
				t.Fatal("nothing was reordered")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 200 arrived; holding must not lose frames", len(got))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFaultsDisconnect: a session is reset within 2×DisconnectEvery
// frames, with StatusUnavailable; while down, dials fail.
func TestFaultsDisconnect(t *testing.T) {
	d := &FaultDialer{Inner: &Dialer{Service: &recorder{}}, Seed: 1, Faults: Faults{DisconnectEvery: 5}}
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The reset comes within 2×5 frames counted in both directions, but
	// when the pump counts the frame that resets, the Sends go on until it
	// gets to close the session: a pump descheduled between the two (a CI
	// machine under load) lets the Sends fill both queues first (64 frames
	// each way, then Send blocks until the close). So the loop runs until
	// the error, bounded far above what the queues hold.
	var serr error
	for i := range 10_000 {
		if serr = c.Send(&protocol.Message{ID: uint64(i)}); serr != nil {
			break
		}
	}
	if protocol.StatusOf(serr) != protocol.StatusUnavailable {
		t.Fatalf("send error %v, want a reset (Unavailable)", serr)
	}
	d.SetDown(true)
	if _, err := d.Send(context.Background()); !errors.Is(err, err) || protocol.StatusOf(err) != protocol.StatusUnavailable {
		t.Fatalf("dial while down: %v", err)
	}
}
