package driver

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/protocol"
)

// msgMeta is what the loop remembers about a message until it is acked.
type msgMeta struct {
	spooledAt int64
	records   int32
	raw       int32
	payload   int32
}

// loop owns the Sender: every event goes through Step, and the loop carries
// out the actions. Two goroutines step it, under Driver.mu: the driver's
// own (frames and session events, the clock, the watermark) and the
// spool writer's (Driver.Spooled). It keeps no protocol timing of its own:
// the Sender keeps the resend, reconnect and progress deadlines, and the
// loop keeps one timer at the Sender's NextDeadline, which steps Tick.
type loop struct {
	// refuseLog, refuseQuiet: a refusal is logged at most once a minute,
	// with how many the line left out.
	refuseLog   logutil.Every
	refuseQuiet int
	d           *Driver
	s           *delivery.Sender
	conn        *conn
	gen         uint64
	// attempts counts dials; attempt k goes to sink address k mod n, so
	// failover walks the list whatever gen does.
	attempts uint64
	// clock fires at clockAt, the Sender's NextDeadline, while armed.
	clock      *time.Timer
	clockAt    int64
	clockArmed bool
	// stalled: the Sender emitted Stalled; the stream is dropped once the
	// actions of that Step are carried out (see step).
	stalled bool
	meta    map[uint64]msgMeta
	ranges  []delivery.Range
	// watermark is the newest MarkAcked; persisted is what the spool has.
	watermark, persisted uint64
	// addr is the sink of the current stream.
	addr string
	// fresh holds the records of the newest spooled messages not yet
	// sent (ids ascending): a Send takes its record to the session writer,
	// which then sends it from memory. The window often opens for a
	// message only when an earlier one is acked, a step after it was
	// spooled, so the records are kept a while; at most freshMax of them
	// and freshMaxBytes, the oldest released first, so they never pile up
	// while the window is full or the sink is away: what was released is
	// read back from the spool.
	fresh      []freshRec
	freshBytes int
	// refusals holds why each parked message was refused, for its dead
	// letter (see setAside); parkedIDs and aside are setAside's scratch.
	refusals  map[uint64]refusal
	parkedIDs []uint64
	aside     []spool.Refused
	// setAsideErr is the last error setting a message aside, logged once
	// until it changes.
	setAsideErr string
	// The ERROR line of set-aside messages comes at most once per
	// setAsideLogEvery (a sink refusing everything would otherwise write
	// one per message): unlogged counts the messages since the last line,
	// unloggedBytes the bytes of their letters, unloggedHeld those whose
	// letter the log held already (a restart between the copy and the
	// watermark), lastAside is the newest of them, logAt when the last
	// line was written (the agent's clock), logged whether one was.
	unlogged      int
	unloggedBytes int
	unloggedHeld  int
	lastAside     setAsideNote
	logAt         int64
	logged        bool
}

// setAsideNote is what the ERROR line says of the last message set aside.
type setAsideNote struct {
	id uint64
	r  refusal
}

// setAsideLogEvery bounds the set-aside ERROR lines.
const setAsideLogEvery = int64(time.Minute)

// refusal is why a message was refused for good.
type refusal struct{ code, detail string }

type freshRec struct {
	id  uint64
	rec *[]byte // nil once taken
}

const (
	freshMax      = 32
	freshMaxBytes = 8 << 20
)

// takeFresh returns the record of id if it is still held, handing it over.
func (l *loop) takeFresh(id uint64) *[]byte {
	if len(l.fresh) == 0 || id < l.fresh[0].id {
		return nil
	}
	i := id - l.fresh[0].id
	if i >= uint64(len(l.fresh)) || l.fresh[i].id != id || l.fresh[i].rec == nil {
		return nil
	}
	rec := l.fresh[i].rec
	l.fresh[i].rec = nil
	l.freshBytes -= cap(*rec)
	return rec
}

// addFresh holds the record of the message id just spooled (nil: none).
func (l *loop) addFresh(id uint64, rec *[]byte) {
	if rec == nil {
		return
	}
	if len(l.fresh) > 0 && l.fresh[len(l.fresh)-1].id+1 != id {
		// Ids are contiguous; should they jump, start over so the lookup
		// by offset stays exact.
		for _, f := range l.fresh {
			spool.PutBuf(f.rec)
		}
		l.fresh, l.freshBytes = l.fresh[:0], 0
	}
	l.fresh = append(l.fresh, freshRec{id, rec})
	l.freshBytes += cap(*rec)
}

// trimFresh releases the oldest records past the bounds, and drops the
// taken ones at the front.
func (l *loop) trimFresh() {
	n := 0
	for n < len(l.fresh) && (l.fresh[n].rec == nil || len(l.fresh)-n > freshMax || l.freshBytes > freshMaxBytes) {
		if r := l.fresh[n].rec; r != nil {
			l.freshBytes -= cap(*r)
			spool.PutBuf(r)
		}
		n++
	}
	if n > 0 {
		l.fresh = append(l.fresh[:0], l.fresh[n:]...)
	}
}

func (d *Driver) run() {
	defer close(d.done)
	l := d.loop
	defer l.clock.Stop()
	persist := time.NewTicker(100 * time.Millisecond)
	defer persist.Stop()
	for {
		select {
		case ev := <-d.connCh:
			d.mu.Lock()
			l.connEvent(ev)
		case <-l.clock.C:
			d.mu.Lock()
			l.clockArmed = false
			l.step(delivery.Tick(d.now()))
		case <-persist.C:
			d.mu.Lock()
			l.persist()
		case <-d.ctx.Done():
			d.mu.Lock()
			d.stopped = true
			if l.conn != nil {
				l.conn.close()
			}
			l.persist()
			for _, f := range l.fresh {
				spool.PutBuf(f.rec)
			}
			l.fresh = nil
			d.mu.Unlock()
			return
		}
		l.observe()
		d.mu.Unlock()
	}
}

// Spooled steps the messages the spool writer just appended, in id
// order, in the caller's goroutine: a message crosses no goroutine
// between the spool writer and the session writer. After the driver
// stopped it does nothing; the messages are in the spool, and the next
// start delivers them.
func (d *Driver) Spooled(infos []spool.Spooled) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		for _, in := range infos {
			spool.PutBuf(in.Rec)
		}
		return
	}
	for _, in := range infos {
		d.loop.spooled(in)
	}
	d.loop.observe()
}

// observe publishes the Sender's state to the metrics.
func (l *loop) observe() {
	oldest, ok := l.meta[l.s.Watermark()] // ids below the watermark are acknowledged
	l.d.metrics.ObserveSender(l.s, len(l.meta), oldest.spooledAt, ok)
}

// step feeds one event, carries out the resulting actions and sets the
// timer to the Sender's next deadline.
func (l *loop) step(ev delivery.Event) {
	if err := l.s.Step(ev); err != nil {
		l.d.log.Error("sender rejected an event", "event", ev.String(), "err", err)
		return
	}
	for _, act := range l.s.Ready() {
		l.do(act)
	}
	l.s.Advance()
	if l.stalled {
		// After Advance: lose steps Disconnected, which must not run
		// while Ready's actions are being carried out.
		l.stalled = false
		if l.conn != nil {
			l.lose(l.addr, errNoProgress, l.d.now())
			return // lose stepped and re-armed
		}
	}
	l.rearm()
}

// rearm keeps the one timer at the Sender's NextDeadline.
func (l *loop) rearm() {
	at, ok := l.s.NextDeadline()
	switch {
	case !ok:
		if l.clockArmed {
			l.clock.Stop()
			l.clockArmed = false
		}
	case !l.clockArmed || at != l.clockAt:
		// Since Go 1.23 Reset discards a pending fire of the old deadline.
		l.clock.Reset(time.Duration(at - l.d.now()))
		l.clockAt, l.clockArmed = at, true
	}
}

func (l *loop) do(act delivery.Action) {
	switch act.Kind {
	case delivery.ActionSend:
		if l.conn != nil {
			l.conn.enqueue(act.ID, l.takeFresh(act.ID))
		}
	case delivery.ActionArmTimer, delivery.ActionCancelTimer, delivery.ActionCancelAllTimers:
		// The Sender keeps its timers itself; see rearm.
	case delivery.ActionMarkAcked:
		l.watermark = act.Watermark
	case delivery.ActionReconnect:
		if l.conn != nil {
			l.conn.close()
			l.conn = nil
		}
	case delivery.ActionDial:
		l.dial()
	case delivery.ActionStalled:
		// Messages in flight and no ack for the progress deadline: the
		// sink is frozen or the path is dead in a way TCP does not report
		// (keepalive would catch it too, but only after its own, longer,
		// timeout). Drop the stream after this Step (see step).
		l.stalled = true
	}
}

func (l *loop) spooled(in spool.Spooled) {
	l.meta[in.ID] = msgMeta{spooledAt: in.At, payload: int32(in.Size), records: int32(in.Records), raw: int32(in.Raw)}
	l.addFresh(in.ID, in.Rec)
	l.step(delivery.Spooled(in.ID, in.Size, in.At))
	l.trimFresh()
}

func (l *loop) dial() {
	l.gen++
	l.attempts++
	go l.d.dial(l.gen, l.attempts-1)
}

func (l *loop) connEvent(ev connEvent) {
	if ev.gen != l.gen {
		if ev.conn != nil {
			ev.conn.close() // a handshake that finished after we gave up on it
		}
		return
	}
	now := l.d.now()
	switch {
	case ev.err != nil:
		l.lose(ev.addr, ev.err, now)
	case ev.welcome != nil:
		l.conn, l.addr = ev.conn, ev.addr
		w := ev.welcome
		if f := l.d.cfg.SealKafka; f != nil {
			// New messages follow the ask. Messages already spooled as
			// Kafka records go so only to a sink that asked; the write
			// loop turns them into zstd for any other (unsealer).
			f(w.Codec == protocol.CodecKafkaZstd)
		}
		cr := w.Credits
		if max := w.MaxMessageBytes; max > 0 && uint64(l.d.cfg.MaxMessageBytes) > max {
			// Byte fields are numbers, as every *_bytes field of the logs;
			// the message says the sizes for people.
			l.d.log.Error(fmt.Sprintf("the sink accepts messages up to %s, smaller than the %s this agent builds; they will be refused",
				humanBytes(max), humanBytes(l.d.cfg.MaxMessageBytes)),
				"sink_max_bytes", max, "agent_max_bytes", l.d.cfg.MaxMessageBytes)
		}
		if f := l.d.connectedTo(ev.addr); f != nil {
			l.d.log.Info("sink connection recovered", "sink", ev.addr, "after", f.code)
		}
		l.d.log.Info("connected to sink", "sink", ev.addr, "session", w.SessionID,
			"credit_messages", cr.Messages, "credit_bytes", cr.Bytes)
		l.step(delivery.Connected(cr.Messages, cr.Bytes, now))
	case ev.frame != nil:
		l.frame(ev.frame, now)
	case ev.refused != nil:
		r := ev.refused
		l.d.log.Error(r.reason+"; parked until the next session", "id", r.id, "code", r.code, "err", r.err)
		l.d.metrics.Rejected.WithLabelValues(r.code).Inc()
		l.refused(r.id, r.code, r.reason+": "+errString(r.err))
		l.step(delivery.Rejected(r.id, false, now))
	}
}

// lose ends the current stream, or records a failed attempt when there is
// none, and lets the Sender schedule the reconnect.
func (l *loop) lose(addr string, err error, now int64) {
	if l.conn != nil {
		l.conn.close()
		l.conn = nil
		l.d.metrics.Reconnects.Inc() // an established stream was lost
	} else {
		l.d.metrics.ConnectFailures.Inc()
	}
	l.d.failed(addr, err)
	l.gen++ // nothing more from this connection is relevant
	if st := protocol.StatusOf(err); st == protocol.StatusAborted || st == protocol.StatusFailedPrecondition {
		// A newer session of this agent id took over on the sink: another
		// agent with this id (see classify); or the sink holds ids another
		// spool numbered under it, which nothing here changes. Back off
		// fully rather than retry at once.
		l.step(delivery.Replaced(rand.Float64(), now))
		return
	}
	l.step(delivery.Disconnected(rand.Float64(), now))
}

// frame carries one frame of the sink's into the Sender.
func (l *loop) frame(f protocol.Frame, now int64) {
	switch f := f.(type) {
	case *protocol.Ack:
		l.ranges = l.ranges[:0]
		for _, rg := range f.Ranges {
			if rg.Last < rg.First {
				continue
			}
			l.ranges = append(l.ranges, delivery.Range{First: rg.First, Last: rg.Last})
			l.acked(rg.First, rg.Last, now)
		}
		l.step(delivery.Acked(l.ranges, now))
	case *protocol.Credit:
		if c := f.Credits; c != nil {
			l.step(delivery.Credits(c.Messages, c.Bytes, now))
		}
		if st := f.Store; st != nil {
			l.d.log.Warn("sink store status", "available", st.Available, "detail", st.Detail)
		}
	case *protocol.Error:
		// A message refused for good is logged and counted once: it is
		// parked and offered again at each session, and refused again
		// (before, a line and a count each time: 329 parked messages gave
		// 658 after one sink restart); a retryable one is counted each
		// time. Lines come at most once a minute, saying how many
		// refusals they left out (rejected_messages_total has them all).
		_, again := l.refusals[f.MessageID]
		again = again && !f.Retryable
		if !again {
			if l.refuseLog.Due(time.Now(), time.Minute) {
				l.d.log.Warn("sink refused a message", "id", f.MessageID, "code", f.Code.String(),
					"detail", f.Detail, "retryable", f.Retryable, "refusals_not_logged", l.refuseQuiet)
				l.refuseQuiet = 0
			} else {
				l.refuseQuiet++
			}
		}
		if !again {
			// The label keeps the wire enum's name (ERROR_CODE_OVERSIZE),
			// as before the protocol layer existed, so dashboards work.
			l.d.metrics.Rejected.WithLabelValues("ERROR_CODE_" + f.Code.String()).Inc()
		}
		if !f.Retryable {
			l.refused(f.MessageID, "ERROR_CODE_"+f.Code.String(), f.Detail)
		}
		l.step(delivery.Rejected(f.MessageID, f.Retryable, now))
	default:
		// A frame a Send session's sink does not send (a Welcome again):
		// a newer or broken sink. Ignoring it keeps the session going;
		// the progress deadline catches a sink that only sends those.
		l.d.log.Debug("ignoring an unexpected frame from the sink", "frame", protocol.Name(f))
	}
}

// acked records latency for ids newly acknowledged in [first, last].
func (l *loop) acked(first, last uint64, now int64) {
	if last-first > uint64(len(l.meta)) {
		// A range wider than what we track: walk the map instead.
		for id, m := range l.meta {
			if id >= first && id <= last {
				l.d.metrics.Acked(int(m.records), int(m.raw), int(m.payload), time.Duration(now-m.spooledAt))
				delete(l.meta, id)
			}
		}
	} else {
		for id := first; ; id++ {
			if m, ok := l.meta[id]; ok {
				l.d.metrics.Acked(int(m.records), int(m.raw), int(m.payload), time.Duration(now-m.spooledAt))
				delete(l.meta, id)
			}
			if id == last {
				break
			}
		}
	}
	// A parked message the sink took after all (a later session): its
	// refusal is no longer needed. Usually there are none.
	if n := len(l.refusals); n > 0 && last-first < uint64(n) {
		for id := first; ; id++ {
			delete(l.refusals, id)
			if id == last { // last may be the largest id: no id <= last loop
				break
			}
		}
	} else if n > 0 {
		for id := range l.refusals {
			if id >= first && id <= last {
				delete(l.refusals, id)
			}
		}
	}
}

// persist writes the acknowledged watermark and frees spool segments. It is
// rate-limited: a watermark persisted late only causes resends, which the
// sink deduplicates.
func (l *loop) persist() {
	if l.s.Parked() > 0 {
		l.setAside()
	} else if l.unlogged > 0 {
		l.logSetAside()
	}
	if l.watermark == l.persisted {
		return
	}
	if err := l.d.spool.Acknowledge(l.watermark); err != nil {
		l.d.log.Error("cannot persist acknowledged watermark", "err", err)
		return
	}
	l.persisted = l.watermark
}

// refused remembers why message id was refused for good, for its dead
// letter, until it is set aside or acknowledged. At most maxRefusals are
// kept: past that (a sink refusing everything while the spool has room)
// the letter says only that the reason was not kept.
func (l *loop) refused(id uint64, code, detail string) {
	if l.refusals == nil {
		l.refusals = map[uint64]refusal{}
	}
	if _, ok := l.refusals[id]; ok || len(l.refusals) < maxRefusals {
		l.refusals[id] = refusal{code, detail}
	}
}

// maxRefusals bounds what refused keeps: parked messages are few unless a
// sink refuses everything.
const maxRefusals = 4096

// setAside copies the parked messages to the dead-letter log and settles
// them, when the spool needs the room they hold (spool.Pressed). A
// parked message holds the watermark: every segment from it on stays,
// however much of it the sink acknowledged, and once the quota or the
// disk is full ingest refuses everything. Parked messages wait for the
// next session otherwise (a sink fixed meanwhile takes them). A message
// that cannot be read back stays parked: the spool reports itself
// unhealthy for it (ReadFailed), and the repair at the next start decides.
func (l *loop) setAside() {
	if !l.d.spool.Pressed() {
		return
	}
	l.parkedIDs = l.s.AppendParked(l.parkedIDs[:0])
	l.aside = l.aside[:0]
	for _, id := range l.parkedIDs {
		r, ok := l.refusals[id]
		if !ok {
			r = refusal{code: "unknown", detail: "refused for good; the reason was not kept (over 4096 parked messages)"}
		}
		if r.code == refusedUnreadable {
			continue
		}
		l.aside = append(l.aside, spool.Refused{ID: id, Code: r.code, Detail: r.detail})
	}
	// One call for all of them: their letters are made durable a few
	// megabytes per fsync, not one fsync each, so a sink refusing
	// thousands holds this loop (and every ack and send) for a few fsyncs.
	var res spool.SetAsideResult
	var err error
	if !mutationSetAsideNoCopy {
		res, err = l.d.spool.SetAsideMany(l.aside, time.Now())
	} else {
		res.Done = len(l.aside)
	}
	for _, a := range l.aside[:res.Done] {
		l.unlogged++
		l.lastAside = setAsideNote{a.ID, refusal{a.Code, a.Detail}}
		l.d.metrics.DeadLetters.Inc()
		delete(l.refusals, a.ID)
		delete(l.meta, a.ID)
		l.step(delivery.SetAside(a.ID, l.d.now()))
	}
	l.unloggedBytes += res.Copied
	l.unloggedHeld += res.Held
	if err != nil {
		if msg := err.Error(); msg != l.setAsideErr {
			l.setAsideErr = msg
			l.d.log.Error("cannot set a parked message aside; it keeps holding the spool", "id", l.aside[res.Done].ID, "err", err)
		}
	} else if res.Done > 0 {
		l.setAsideErr = ""
	}
	l.logSetAside()
}

// logSetAside writes the ERROR line of the messages set aside since the
// last one, at most once per setAsideLogEvery.
func (l *loop) logSetAside() {
	if now := l.d.now(); l.unlogged > 0 && (!l.logged || now-l.logAt >= setAsideLogEvery) {
		a := l.lastAside
		args := []any{"messages", l.unlogged, "last_id", a.id, "code", a.r.code, "detail", a.r.detail, "bytes", l.unloggedBytes}
		if l.unloggedHeld > 0 {
			// Their letters were written before a restart: "bytes" counts
			// only what this run wrote.
			args = append(args, "already_in_log", l.unloggedHeld)
		}
		l.d.log.Error("the sink refused messages for good and the spool needs their room: set aside in the dead-letter log (sluice dead-letter list)",
			append(args, "dir", l.d.spool.DeadLetterDir())...)
		l.unlogged, l.unloggedBytes, l.unloggedHeld, l.logAt, l.logged = 0, 0, 0, now, true
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
