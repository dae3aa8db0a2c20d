package delivery

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// State × event transcripts. testdata/sender/*.txt and
// testdata/receiver/*.txt drive the two machines with a small command
// language (see runSenderCmd and runReceiverCmd); after every event the
// output names the cell it exercised ("Before × Row → After"), the actions
// emitted and the state. Every step is also recorded in a cellMatrix: a
// test fails if a cell of the product states × rows has no transcript case
// (or is exercised although the tables call it impossible), and
// TestDocTables renders docs/protocol.md's state tables from the matrix.
//
//	go test ./internal/delivery/ -run 'StateTable|DocTables' -rewrite
//
// regenerates the expected output (check the diff: it is the spec).

// A machine's table: its states (columns) and rows. A row is an event kind,
// split where the event's meaning depends on the state it meets (a live or
// a stale Timeout); the classifier in the runner picks the row of each
// step from the machine's state before it, so a transcript cannot
// mislabel a cell.
type machineTable struct {
	name   string
	states []string
	rows   []tableRow
	// impossible holds the cells no event can reach, with the reason. A
	// transcript that reaches one fails the test.
	impossible map[cellKey]string
	// ignoredWhy says why a cell whose every outcome is "ignored" is
	// ignored; "*" as the state applies to the whole row.
	ignoredWhy map[cellKey]string
}

type tableRow struct {
	name string // first word is the event kind, e.g. "Timeout, live"
	kind string // the EventKind or ReceiverEventKind name; "" for invalid events
	desc string // for the legend under the table
}

type cellKey struct{ state, row string }

// cellMatrix records, per cell, the distinct outcomes seen, in order.
type cellMatrix map[cellKey][]string

func (m cellMatrix) add(state, row, outcome string) {
	k := cellKey{state, row}
	if !slices.Contains(m[k], outcome) {
		m[k] = append(m[k], outcome)
	}
}

const (
	rowInvalid = "invalid event"
)

var senderTable = machineTable{
	name:   "Sender",
	states: []string{"Disconnected", "Idle", "CanSend", "Blocked"},
	rows: []tableRow{
		{"Spooled", "Spooled", "a message is durably spooled"},
		{"Acked", "Acked", "the sink acked ids (any of them: in flight, queued, parked, already acked or unknown)"},
		{"Timeout, live", "Timeout", "the timer of a message in flight with that Attempt fired"},
		{"Timeout, stale", "Timeout", "a timer fired whose message was acked, requeued or resent since"},
		{"Tick, nothing due", "Tick", "the driver's timer fired before any deadline (NextDeadline)"},
		{"Tick, deadline due", "Tick", "a resend timer, the dial back-off or the progress deadline is due"},
		{"Credits", "Credits", "the sink's Grant"},
		{"Connected", "Connected", "a stream is up, with its initial credits"},
		{"Disconnected", "Disconnected", "the stream broke, or a dial failed"},
		{"Rejected, retryable", "Rejected", "the sink refused a message in flight, for now (over credit)"},
		{"Rejected, final", "Rejected", "the sink refused a message in flight for good (oversize, bad body)"},
		{"Rejected, stale", "Rejected", "a Rejected for a message no longer in flight on this stream"},
		{"SetAside, parked", "SetAside", "the driver copied a parked message out of the spool (a dead letter)"},
		{"SetAside, stale", "SetAside", "a SetAside for a message not parked (acked, or unparked by a new stream)"},
		{rowInvalid, "", "non-contiguous or negative-size Spooled, an Acked range with First > Last, a Timeout never armed, jitter outside [0, 1), an unknown kind"},
	},
	impossible: map[cellKey]string{
		{"Disconnected", "Timeout, live"}:       "nothing is in flight without a stream",
		{"Idle", "Timeout, live"}:               "nothing is in flight",
		{"Disconnected", "Rejected, retryable"}: "without a stream every Rejected is stale",
		{"Disconnected", "Rejected, final"}:     "without a stream every Rejected is stale",
		{"Idle", "Rejected, retryable"}:         "nothing is in flight",
		{"Idle", "Rejected, final"}:             "nothing is in flight",
		{"Idle", "Tick, deadline due"}:          "no deadline: nothing in flight, no dial pending",
	},
	ignoredWhy: map[cellKey]string{
		{"*", "Acked"}:              "ids already settled, or never spooled",
		{"*", "Timeout, stale"}:     "its message was acked, requeued or resent since",
		{"*", "Tick, nothing due"}:  "before every deadline",
		{"*", "Credits"}:            "limits never shrink",
		{"Disconnected", "Credits"}: "credits of the broken stream",
		{"*", "Rejected, stale"}:    "the message is not in flight on this stream",
		{"*", "SetAside, stale"}:    "the message is not parked",
	},
}

var receiverTable = machineTable{
	name:   "Receiver",
	states: []string{"Handshaking", "Receiving", "Blocked", "Closed"},
	rows: []tableRow{
		{"Hello, supported", "Hello", "version ≥ MinVersion"},
		{"Hello, too old", "Hello", "version < MinVersion"},
		{"Received, fits", "Received", "the queue has room for it, or is empty (the waiver)"},
		{"Received, queued id", "Received", "a copy of a message still queued"},
		{"Received, oversize", "Received", "bigger than MaxMessageBytes"},
		{"Received, over credit", "Received", "the queue is full by count, or not empty and short of bytes for it"},
		{"Discarded", "Discarded", "the driver's validation refused the message and told the agent"},
		{"Stored, queued ids", "Stored", "the storage writer reports ids, some of them queued here"},
		{"Stored, other ids", "Stored", "the writer reports only ids not queued here (duplicates), or none"},
		{"Close", "Close", "the stream ended"},
		{rowInvalid, "", "a negative size, an unknown kind"},
	},
	impossible: map[cellKey]string{
		{"Handshaking", "Received, queued id"}:   "the queue is empty before Hello",
		{"Handshaking", "Received, over credit"}: "the queue is empty before Hello",
		{"Handshaking", "Stored, queued ids"}:    "the queue is empty before Hello",
	},
	ignoredWhy: map[cellKey]string{
		{"Closed", "*"}:                    "stream closed",
		{"Receiving", "Stored, other ids"}: "no ids",
		{"Blocked", "Stored, other ids"}:   "no ids",
	},
}

// ---- Sender ----

// senderHarness is one transcript's Sender and clock.
type senderHarness struct {
	s   *Sender
	now int64
}

// senderSnap is what a step may change, for the outcome's effect words.
type senderSnap struct {
	state                     SenderState
	queued, inflight, parked  []uint64
	creditMsgs, creditBytes   uint64
	rto                       time.Duration
	stats                     Stats
	dialPending, stallPending bool
	line                      string
}

func (h *senderHarness) snap() senderSnap {
	s := h.s
	sn := senderSnap{state: s.State(), creditMsgs: s.creditMsgs, creditBytes: s.creditBytes,
		rto: s.rtt.rto, stats: s.stats, dialPending: s.dialPending, stallPending: s.stallSignalled}
	for id := s.base; id < s.next; id++ {
		switch s.slot(id).state {
		case slotQueued:
			sn.queued = append(sn.queued, id)
		case slotInFlight:
			sn.inflight = append(sn.inflight, id)
		case slotParked:
			sn.parked = append(sn.parked, id)
		}
	}
	deadline := "none"
	if at, ok := s.NextDeadline(); ok {
		deadline = time.Duration(at).String()
	}
	stream := "no stream"
	if s.connected {
		stream = fmt.Sprintf("sent %d/%d msgs %d/%d B", s.sentMsgs, s.creditMsgs, s.sentBytes, s.creditBytes)
	}
	sn.line = fmt.Sprintf("state: %v wm=%d queued=%s inflight=%s parked=%s; %s; rto=%v deadline=%s",
		sn.state, s.base, ids(sn.queued), ids(sn.inflight), ids(sn.parked), stream, sn.rto, deadline)
	return sn
}

func ids(v []uint64) string {
	if len(v) == 0 {
		return "[]"
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(v); {
		j := i
		for j+1 < len(v) && v[j+1] == v[j]+1 {
			j++
		}
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", v[i], v[j])
		} else {
			fmt.Fprintf(&b, "%d", v[i])
		}
		i = j + 1
	}
	b.WriteByte(']')
	return b.String()
}

// senderRow classifies ev against the Sender's state before it.
func senderRow(s *Sender, ev Event, now int64) string {
	inFlight := func(id uint64) (*slot, bool) {
		if id < s.base || id >= s.next {
			return nil, false
		}
		sl := s.slot(id)
		return sl, sl.state == slotInFlight
	}
	switch ev.Kind {
	case EventTimeout:
		if sl, ok := inFlight(ev.ID); ok && sl.attempt == ev.Attempt {
			return "Timeout, live"
		}
		return "Timeout, stale"
	case EventTick:
		if at, ok := s.NextDeadline(); ok && at <= max(now, s.now) {
			return "Tick, deadline due"
		}
		return "Tick, nothing due"
	case EventRejected:
		if _, ok := inFlight(ev.ID); !ok || !s.connected {
			return "Rejected, stale"
		}
		if ev.Retryable {
			return "Rejected, retryable"
		}
		return "Rejected, final"
	case EventSetAside:
		if ev.ID >= s.base && ev.ID < s.next && s.slot(ev.ID).state == slotParked {
			return "SetAside, parked"
		}
		return "SetAside, stale"
	}
	return ev.Kind.String()
}

// senderOutcome is a step's short form for the doc table: what it did, in
// words derived from the state before and after, and its actions.
func senderOutcome(ev Event, before, after senderSnap, acts []Action) string {
	var parts []string
	d := func(a, b uint64) bool { return b > a }
	if ev.Kind == EventSpooled && len(after.queued) > len(before.queued) {
		parts = append(parts, "queue")
	}
	if d(before.stats.Acked, after.stats.Acked) {
		parts = append(parts, "settle")
	}
	if d(before.stats.SetAside, after.stats.SetAside) {
		parts = append(parts, "set aside")
	}
	if d(before.stats.Timeouts, after.stats.Timeouts) {
		w := "requeue"
		if after.rto > before.rto {
			w += ", RTO×2"
		}
		parts = append(parts, w)
	}
	if d(before.stats.Rejected, after.stats.Rejected) {
		if d(before.stats.Parked, after.stats.Parked) {
			parts = append(parts, "park")
		} else {
			parts = append(parts, "requeue")
		}
	}
	if ev.Kind == EventDisconnected && len(before.inflight) > 0 {
		parts = append(parts, "requeue all")
	}
	if len(after.parked) < len(before.parked) && !d(before.stats.Acked, after.stats.Acked) && !d(before.stats.SetAside, after.stats.SetAside) {
		parts = append(parts, "unpark")
	}
	if ev.Kind == EventCredits && (after.creditMsgs > before.creditMsgs || after.creditBytes > before.creditBytes) {
		parts = append(parts, "raise credits")
	}
	for i := 0; i < len(acts); i++ {
		k := acts[i].Kind
		// A run of one kind is one word; Send is always followed by its
		// ArmTimer, which Send\* includes.
		for i+1 < len(acts) && (acts[i+1].Kind == k || k == ActionSend && acts[i+1].Kind == ActionArmTimer ||
			k == ActionSend && acts[i+1].Kind == ActionSend) {
			i++
		}
		w := k.String()
		if k == ActionSend {
			w = `Send\*`
		}
		parts = append(parts, "`"+w+"`")
	}
	if len(parts) == 0 && before.line == after.line && before.stats == after.stats {
		return "ignored"
	}
	return strings.TrimSpace(strings.Join(parts, ", ") + " → " + after.state.String())
}

func fmtAction(a Action) string {
	if a.Kind == ActionArmTimer {
		return fmt.Sprintf("ArmTimer{ID:%d Attempt:%d At:%v}", a.ID, a.Attempt, time.Duration(a.At))
	}
	return a.String()
}

// senderConfigFromArgs: the table configuration (window 2, RTO 1s in
// [100ms, 8s], reconnect 1s..8s) unless overridden.
func senderConfigFromArgs(t testing.TB, td *datadriven.TestData) SenderConfig {
	cfg := tableSenderConfig
	for _, a := range td.CmdArgs {
		v := a.SingleVal(t)
		switch a.Key {
		case "window":
			cfg.MaxInFlightMsgs = atoi(t, v)
		case "window-bytes":
			cfg.MaxInFlightBytes = int64(atoi(t, v))
		case "rto":
			cfg.InitialRTO = dur(t, v)
		case "progress":
			cfg.ProgressTimeout = dur(t, v)
		case "watermark":
			cfg.Watermark = uint64(atoi(t, v))
		default:
			t.Fatalf("%s: new: unknown argument %q", td.Pos, a.Key)
		}
	}
	return cfg
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func dur(t testing.TB, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// senderEvent parses one event command. Every command takes now=DURATION
// (the clock, from 0; it stays where it was if omitted).
//
//	spool size=N [id=N] [n=COUNT]   Spooled, ids from the next one
//	ack A-B C ...                  Acked
//	timeout id=N attempt=N          Timeout
//	tick                            Tick
//	credits msgs=N bytes=N          Credits
//	connect [msgs=N] [bytes=N]      Connected (default 100 msgs, 1 MiB)
//	disconnect [jitter=F]           Disconnected (default 0.5: no spread)
//	reject id=N [retryable]         Rejected
//	setaside id=N                   SetAside
func (h *senderHarness) events(t testing.TB, cmd string, args []datadriven.CmdArg) []Event {
	t.Helper()
	val := func(key, def string) string {
		for _, a := range args {
			if a.Key == key {
				if len(a.Vals) == 0 {
					return "true"
				}
				return a.Vals[0]
			}
		}
		return def
	}
	num := func(key, def string) uint64 {
		v, err := strconv.ParseUint(val(key, def), 10, 64)
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", cmd, key, val(key, def), err)
		}
		return v
	}
	if v := val("now", ""); v != "" {
		h.now = int64(dur(t, v))
	}
	now := h.now
	switch cmd {
	case "spool":
		size, err := strconv.ParseInt(val("size", "10"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		id := num("id", strconv.FormatUint(h.s.next, 10))
		var evs []Event
		for i := range num("n", "1") {
			evs = append(evs, Spooled(id+i, size, now))
		}
		return evs
	case "ack":
		var rs []Range
		for _, a := range args {
			if a.Key == "now" {
				continue
			}
			lo, hi, ok := strings.Cut(a.Key, "-")
			if !ok {
				hi = lo
			}
			first, err1 := strconv.ParseUint(lo, 10, 64)
			last, err2 := strconv.ParseUint(hi, 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("ack: bad range %q", a.Key)
			}
			rs = append(rs, Range{first, last})
		}
		return []Event{Acked(rs, now)}
	case "timeout":
		return []Event{Timeout(num("id", "0"), uint32(num("attempt", "1")), now)}
	case "tick":
		return []Event{Tick(now)}
	case "credits":
		return []Event{Credits(num("msgs", "0"), num("bytes", "0"), now)}
	case "connect":
		return []Event{Connected(num("msgs", "100"), num("bytes", "1048576"), now)}
	case "disconnect":
		j, err := strconv.ParseFloat(val("jitter", "0.5"), 64)
		if err != nil {
			t.Fatal(err)
		}
		return []Event{Disconnected(j, now)}
	case "reject":
		return []Event{Rejected(num("id", "0"), val("retryable", "") != "", now)}
	case "setaside":
		return []Event{SetAside(num("id", "0"), now)}
	case "unknown":
		return []Event{{Kind: 99, Now: now}}
	}
	t.Fatalf("unknown sender command %q", cmd)
	return nil
}

// step applies ev, records its cell and writes its transcript lines.
func (h *senderHarness) step(t testing.TB, m cellMatrix, ev Event, out *strings.Builder) {
	before := h.snap()
	row := senderRow(h.s, ev, ev.Now)
	err := h.s.Step(ev)
	if ierr := h.s.checkInvariants(); ierr != nil {
		t.Fatalf("after %v: %v", ev, ierr)
	}
	if err != nil {
		if ev.Kind != EventConnected {
			row = rowInvalid
		}
		after := h.snap()
		if after.line != before.line || h.s.HasReady() {
			t.Fatalf("failed Step(%v) changed the Sender", ev)
		}
		fmt.Fprintf(out, "%v × %s → error: %v\n", before.state, row, err)
		m.add(before.state.String(), row, "error")
		return
	}
	acts := slices.Clone(h.s.Ready())
	h.s.Advance()
	after := h.snap()
	fmt.Fprintf(out, "%v × %s → %v\n", before.state, row, after.state)
	for _, a := range acts {
		fmt.Fprintf(out, "  %s\n", fmtAction(a))
	}
	m.add(before.state.String(), row, senderOutcome(ev, before, after, acts))
}

// senderTranscript runs one file's commands on a fresh harness per "new".
//
//	new [window=N] [window-bytes=N] [rto=D] [progress=D] [watermark=N]
//	state                            prints the state
//	run                              one event command per input line
//	<event command>                  see events
func senderTranscript(m cellMatrix) func(t *testing.T, td *datadriven.TestData) string {
	var h *senderHarness
	return func(t *testing.T, td *datadriven.TestData) string {
		var out strings.Builder
		switch td.Cmd {
		case "new":
			h = &senderHarness{s: newTestSender(t, senderConfigFromArgs(t, td))}
		case "state":
		case "run":
			for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
				cmd, args, err := datadriven.ParseLine(line)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&out, "> %s\n", line)
				for _, ev := range h.events(t, cmd, args) {
					h.step(t, m, ev, &out)
				}
			}
		default:
			if h == nil {
				t.Fatalf("%s: %s before new", td.Pos, td.Cmd)
			}
			for _, ev := range h.events(t, td.Cmd, td.CmdArgs) {
				h.step(t, m, ev, &out)
			}
		}
		out.WriteString(h.snap().line)
		out.WriteByte('\n')
		return out.String()
	}
}

// ---- Receiver ----

func (r *Receiver) snapLine() string {
	q := slices.Sorted(func(yield func(uint64) bool) {
		for id := range r.queue {
			if !yield(id) {
				return
			}
		}
	})
	var b strings.Builder
	for i, id := range q {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", id, r.queue[id])
	}
	return fmt.Sprintf("state: %v queue=[%s] (%d msgs, %d B) limits=%d/%d received=%d/%d",
		r.State(), b.String(), len(r.queue), r.queuedBytes, r.msgLimit, r.byteLimit, r.receivedMsgs, r.receivedBytes)
}

func receiverRow(r *Receiver, ev ReceiverEvent) string {
	switch ev.Kind {
	case EventHello:
		if ev.Version < r.cfg.MinVersion {
			return "Hello, too old"
		}
		return "Hello, supported"
	case EventReceived:
		n := len(r.queue)
		_, dup := r.queue[ev.ID]
		switch {
		case ev.Size > r.cfg.MaxMessageBytes:
			return "Received, oversize"
		case dup:
			return "Received, queued id"
		case n >= r.cfg.QueueMsgs || n > 0 && r.queuedBytes+ev.Size > r.cfg.QueueBytes:
			return "Received, over credit"
		}
		return "Received, fits"
	case EventStored:
		for _, id := range ev.IDs {
			if _, ok := r.queue[id]; ok {
				return "Stored, queued ids"
			}
		}
		return "Stored, other ids"
	}
	return ev.Kind.String()
}

func fmtReceiverAction(a ReceiverAction) string {
	switch a.Kind {
	case ActionWelcome:
		return fmt.Sprintf("Welcome{MsgLimit:%d ByteLimit:%d Version:%d}", a.MsgLimit, a.ByteLimit, a.Version)
	case ActionAck:
		var s []string
		for _, r := range a.Ranges {
			if r.First == r.Last {
				s = append(s, strconv.FormatUint(r.First, 10))
			} else {
				s = append(s, fmt.Sprintf("%d-%d", r.First, r.Last))
			}
		}
		return "Ack{" + strings.Join(s, " ") + "}"
	}
	return a.String()
}

func receiverOutcome(before, after string, afterState ReceiverState, acts []ReceiverAction) string {
	var parts []string
	for i, a := range acts {
		if i > 0 && acts[i-1].Kind == a.Kind && acts[i-1].Reason == a.Reason {
			continue
		}
		w := a.Kind.String()
		if a.Reason != ReasonNone {
			w += "{" + a.Reason.String() + "}"
		}
		parts = append(parts, "`"+w+"`")
	}
	if len(parts) == 0 && before == after {
		return "ignored"
	}
	return strings.TrimSpace(strings.Join(parts, ", ") + " → " + afterState.String())
}

// receiverTranscript runs one file's commands.
//
//	new [msgs=N] [bytes=N] [max=N] [min-version=N] [max-version=N]
//	                        a Receiver (default queue 2 msgs / 100 B,
//	                        messages up to 150 B)
//	hello [version=N]       Hello (default ProtocolVersion)
//	receive id=N size=N     Received
//	discard id=N size=N     Discarded
//	stored ID...            Stored
//	close                   Close
//	unknown                 an event of an unknown kind
//	state, run              as for the Sender
func receiverTranscript(m cellMatrix) func(t *testing.T, td *datadriven.TestData) string {
	var r *Receiver
	event := func(t testing.TB, cmd string, args []datadriven.CmdArg) ReceiverEvent {
		num := func(key string, def int64) int64 {
			for _, a := range args {
				if a.Key == key {
					n, err := strconv.ParseInt(a.Vals[0], 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					return n
				}
			}
			return def
		}
		switch cmd {
		case "hello":
			return Hello(uint32(num("version", int64(ProtocolVersion))))
		case "receive":
			return Received(uint64(num("id", 0)), num("size", 10))
		case "discard":
			return Discarded(uint64(num("id", 0)), num("size", 10))
		case "stored":
			var v []uint64
			for _, a := range args {
				n, err := strconv.ParseUint(a.Key, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				v = append(v, n)
			}
			return Stored(v)
		case "close":
			return Close()
		case "unknown":
			return ReceiverEvent{Kind: 99}
		}
		t.Fatalf("unknown receiver command %q", cmd)
		return ReceiverEvent{}
	}
	step := func(t testing.TB, ev ReceiverEvent, out *strings.Builder) {
		before, bstate := r.snapLine(), r.State()
		row := receiverRow(r, ev)
		err := r.Step(ev)
		if ierr := r.checkInvariants(); ierr != nil {
			t.Fatalf("after %v: %v", ev, ierr)
		}
		if err != nil {
			if ev.Kind != EventStored {
				row = rowInvalid
			}
			if r.snapLine() != before || r.HasReady() {
				t.Fatalf("failed Step(%v) changed the Receiver", ev)
			}
			fmt.Fprintf(out, "%v × %s → error: %v\n", bstate, row, err)
			m.add(bstate.String(), row, "error")
			return
		}
		acts := slices.Clone(r.Ready())
		for i := range acts {
			acts[i].Ranges = slices.Clone(acts[i].Ranges)
		}
		r.Advance()
		fmt.Fprintf(out, "%v × %s → %v\n", bstate, row, r.State())
		for _, a := range acts {
			fmt.Fprintf(out, "  %s\n", fmtReceiverAction(a))
		}
		m.add(bstate.String(), row, receiverOutcome(before, r.snapLine(), r.State(), acts))
	}
	return func(t *testing.T, td *datadriven.TestData) string {
		var out strings.Builder
		switch td.Cmd {
		case "new":
			cfg := tableReceiverConfig
			for _, a := range td.CmdArgs {
				n := atoi(t, a.SingleVal(t))
				switch a.Key {
				case "msgs":
					cfg.QueueMsgs = n
				case "bytes":
					cfg.QueueBytes = int64(n)
				case "max":
					cfg.MaxMessageBytes = int64(n)
				case "min-version":
					cfg.MinVersion = uint32(n)
				case "max-version":
					cfg.MaxVersion = uint32(n)
				default:
					t.Fatalf("%s: new: unknown argument %q", td.Pos, a.Key)
				}
			}
			var err error
			if r, err = NewReceiver(cfg); err != nil {
				t.Fatal(err)
			}
		case "state":
		case "run":
			for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
				cmd, args, err := datadriven.ParseLine(line)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&out, "> %s\n", line)
				step(t, event(t, cmd, args), &out)
			}
		default:
			if r == nil {
				t.Fatalf("%s: %s before new", td.Pos, td.Cmd)
			}
			step(t, event(t, td.Cmd, td.CmdArgs), &out)
		}
		out.WriteString(r.snapLine())
		out.WriteByte('\n')
		return out.String()
	}
}

// ---- Running and coverage ----

// runTranscripts runs every transcript of a machine as subtests and
// returns the cells they exercised.
func runTranscripts(t *testing.T, tab *machineTable) cellMatrix {
	m := cellMatrix{}
	dir := "testdata/" + strings.ToLower(tab.name)
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		if tab == &senderTable {
			datadriven.RunTest(t, path, senderTranscript(m))
		} else {
			datadriven.RunTest(t, path, receiverTranscript(m))
		}
	})
	return m
}

// checkCoverage fails for every cell of states × rows that no transcript
// exercised and the table does not call impossible, for every impossible
// cell a transcript reached, and for every cell that is only ever
// "ignored" without a reason.
func checkCoverage(t *testing.T, tab *machineTable, m cellMatrix) {
	t.Helper()
	var missing []string
	for _, row := range tab.rows {
		for _, st := range tab.states {
			k := cellKey{st, row.name}
			why, impossible := tab.impossible[k]
			switch _, seen := m[k]; {
			case impossible && seen:
				t.Errorf("%s: cell %s × %s is called impossible (%s) but a transcript reached it: %v",
					tab.name, st, row.name, why, m[k])
			case !impossible && !seen:
				missing = append(missing, st+" × "+row.name)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d cells have no transcript case:\n  %s", tab.name, len(missing), strings.Join(missing, "\n  "))
	}
	for k := range m {
		if !slices.ContainsFunc(tab.rows, func(r tableRow) bool { return r.name == k.row }) ||
			!slices.Contains(tab.states, k.state) {
			t.Errorf("%s: transcript cell %s × %s is not in the table", tab.name, k.state, k.row)
		}
	}
}

// TestSenderStateTable runs testdata/sender/*.txt: every cell of the
// Sender's state table, state × event, has a transcript case.
func TestSenderStateTable(t *testing.T) {
	checkCoverage(t, &senderTable, runTranscripts(t, &senderTable))
}

// TestReceiverStateTable is the same for testdata/receiver/*.txt.
func TestReceiverStateTable(t *testing.T) {
	checkCoverage(t, &receiverTable, runTranscripts(t, &receiverTable))
}
