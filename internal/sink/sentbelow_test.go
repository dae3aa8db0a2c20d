package sink

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// helloSentBelow is sinkclient.Hello with the agent's bound on sent ids.
func helloSentBelow(agent string, below uint64) *sluicev1.Request {
	req := sinkclient.Hello(agent)
	req.GetHello().SentBelow = &below
	return req
}

// TestSentBelowRefusesTakenIDs: a Hello whose spool never sent an id the
// sink holds under its agent id (Hello.sent_below at or below it) is
// refused with FailedPrecondition, counted and logged; a bound above every held id, or none (agents before the
// field), is welcome, as is any bound for an agent id the sink has never
// seen.
func TestSentBelowRefusesTakenIDs(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	msgs := map[uint64][]string{}
	for id := range uint64(5) {
		msgs[id] = sinkclient.Records(id, 2)
	}
	sendAll(a, msgs, 0, 1, 2, 3, 4)
	a.Cancel()

	for _, below := range []uint64{0, 3, 4} {
		b := sinkclient.OpenAgent(t, h.client)
		b.Send(helloSentBelow("edge-1", below))
		err := b.Status()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "message ids taken under agent id") ||
			!strings.Contains(err.Error(), "up to 4") {
			t.Fatalf("sent_below %d with ids up to 4 held: %v, want FailedPrecondition naming the ids taken", below, err)
		}
		b.Cancel()
	}
	if got := metricValue(t, h, "sluice_sink_refused_total{reason=ids_taken}"); got != 3 {
		t.Errorf("refused_total{ids_taken} = %v, want 3", got)
	}
	if !strings.Contains(h.logs.String(), "never sent ids this sink holds") {
		t.Error("the refusal is not logged")
	}
	for _, req := range []*sluicev1.Request{helloSentBelow("edge-1", 5), sinkclient.Hello("edge-1"), helloSentBelow("edge-2", 0)} {
		c := sinkclient.OpenAgent(t, h.client)
		c.Send(req)
		if w := c.Next().GetWelcome(); w == nil {
			t.Fatalf("Hello %v not welcomed", req.GetHello())
		}
		c.Cancel()
	}
}
