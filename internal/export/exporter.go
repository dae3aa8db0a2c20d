package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// chunkBytes is the read size of an exporter's store iterator: an
// exporter holds this, one decompressed message and one request at a
// time, whatever the store holds ahead of it.
const chunkBytes = 256 << 10

// commitEvery bounds how many messages an exporter goes past between two
// commits while it is catching up (a commit is an fsync and a rename): a
// restart sends at most this many messages' records again. Once caught
// up it commits at once.
const commitEvery = 64

// requestTimeout bounds one request to the receiver; a receiver that
// takes longer is treated as not answering, and the request is retried.
const requestTimeout = 30 * time.Second

// Config is what an Exporter needs.
type Config struct {
	Target Target
	// Reader is the sink's embedded store; Decoder decompresses its
	// message bodies (used by this exporter alone).
	Reader  store.Reader
	Decoder *store.BodyDecoder
	Metrics *Metrics
	Logger  *slog.Logger
}

// Exporter forwards one protocol's marked records to one receiver. Run
// drives it; Status reports it.
type Exporter struct {
	cfg    Config
	name   string
	log    *slog.Logger
	poster poster

	// body is the reused buffer of decompressed message bodies.
	body []byte
	// committed is the position last committed, pos the next message to
	// export (owned by Run's goroutine).
	committed, pos uint64
	// poisonLogged: a poison record is logged once a minute, and
	// poisonQuiet counts those skipped without a log since.
	poisonLogged logutil.Every
	poisonQuiet  int
	// rejectLogged: a partial success is logged once a minute.
	rejectLogged logutil.Every

	mu sync.Mutex
	st Status
}

// Status is what the status page shows of an exporter.
type Status struct {
	Name string `json:"name"`
	// Position is the next store offset to export; Lag the messages
	// stored beyond it.
	Position uint64 `json:"position"`
	Lag      uint64 `json:"lag"`
	Requests uint64 `json:"requests"` // accepted by the receiver
	Poison   uint64 `json:"poison"`   // refused with a 4xx, skipped
	// Failing says the receiver is not taking the current request (it is
	// being retried); LastError is the newest failure in words.
	Failing     bool      `json:"failing"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

// New returns an exporter; Run starts it.
func New(cfg Config) *Exporter {
	e := &Exporter{cfg: cfg, name: cfg.Target.Name(), log: cfg.Logger}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.log = e.log.With("exporter", e.name)
	e.poster = poster{target: cfg.Target, client: &http.Client{Timeout: requestTimeout}}
	e.st.Name = e.name
	return e
}

// Status returns the exporter's state now.
func (e *Exporter) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.st
	if next := e.cfg.Reader.NextOffset(); next > st.Position {
		st.Lag = next - st.Position
	}
	return st
}

// Run exports from the committed position (the store's first offset
// when the exporter has none) until ctx ends or the store closes, and
// commits what it went past before it returns. A receiver's failures are
// retried request by request; a failure of the store (its position
// cannot be read or committed, the store cannot be read) is counted,
// shown on the status page and retried with the same back-off from the
// committed position: the sink goes on storing meanwhile.
func (e *Exporter) Run(ctx context.Context) {
	for failed := 1; ; failed++ {
		err := e.run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		e.cfg.Metrics.errors.WithLabelValues(e.name, reasonStore).Inc()
		e.noteError(err, true)
		e.log.Error("export: the store failed under the exporter; starting again from its committed position", "err", err)
		t := time.NewTimer(backoff(failed, 0))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// run is one run of Run: nil when ctx ended or the store closed.
func (e *Exporter) run(ctx context.Context) error {
	r := e.cfg.Reader
	pos, ok, err := r.Committed(e.cfg.Target.Group())
	if err != nil {
		return fmt.Errorf("read its position: %w", err)
	}
	if first := r.FirstOffset(); !ok || pos < first {
		pos = first
	}
	e.committed, e.pos = pos, pos
	e.setPos(pos)
	e.log.Info("exporter started", "position", pos)
	for {
		err := e.drain(ctx)
		if cerr := e.commit(); err == nil {
			err = cerr
		}
		if errors.Is(err, store.ErrClosed) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-r.Wait(e.pos):
		case <-ctx.Done():
		}
	}
}

// drain exports from e.pos to the end of the store.
func (e *Exporter) drain(ctx context.Context) error {
	r := e.cfg.Reader
	if e.pos >= r.NextOffset() {
		return nil
	}
	it := r.NewIterator(e.pos, chunkBytes)
	for it.Next() {
		off := it.Offset()
		if err := e.message(ctx, off, it.Value()); err != nil {
			return err
		}
		e.pos = off + 1
		e.setPos(e.pos)
		e.cfg.Metrics.records.WithLabelValues(e.name).Inc()
		if e.pos-e.committed >= commitEvery {
			if err := e.commit(); err != nil {
				return err
			}
		}
	}
	err := it.Err()
	if errors.Is(err, store.ErrTruncated) {
		// Removed from the store before it was exported: nothing can
		// bring it back; go on from what is still there.
		first := r.FirstOffset()
		e.log.Error("export: messages removed from the store before they were exported; skipping them",
			"from", e.pos, "to", first)
		e.cfg.Metrics.errors.WithLabelValues(e.name, reasonUnreadable).Add(float64(first - e.pos))
		e.pos = first
		e.setPos(first)
		return nil
	}
	return err
}

// commit stores e.pos as the exporter's position if it moved.
func (e *Exporter) commit() error {
	if e.pos == e.committed {
		return nil
	}
	if err := e.cfg.Reader.Commit(e.cfg.Target.Group(), e.pos); err != nil {
		return fmt.Errorf("commit position %d: %w", e.pos, err)
	}
	e.committed = e.pos
	return nil
}

// setPos publishes the position to Status and the lag gauge.
func (e *Exporter) setPos(pos uint64) {
	e.mu.Lock()
	e.st.Position = pos
	e.mu.Unlock()
	var lag uint64
	if next := e.cfg.Reader.NextOffset(); next > pos {
		lag = next - pos
	}
	e.cfg.Metrics.lag.WithLabelValues(e.name).Set(float64(lag))
}

// message exports the marked records of one stored message, in order.
// Its only error is ctx's: a message that cannot be decoded is counted
// and skipped.
func (e *Exporter) message(ctx context.Context, off uint64, rec []byte) error {
	m, err := storedmsg.Decode(rec)
	var body []byte
	if err == nil {
		body, err = e.cfg.Decoder.Decode(e.body[:0], string(m.AgentID), m.Codec, m.DictID, m.Body)
	}
	if err != nil {
		e.unreadable("export: stored message cannot be decoded; skipped", "offset", off, "err", err)
		return nil
	}
	if cap(body) <= 16<<20 {
		e.body = body[:0] // keep the buffer, unless one huge message grew it
	}
	err = batch.Decode(body, func(r []byte) error {
		kind, payload, err := telemetry.Decode(r)
		switch {
		case errors.Is(err, telemetry.ErrNotMarked):
			return nil // a plain record: not for an exporter
		case err != nil:
			e.unreadable("export: marked record cannot be read; skipped", "offset", off, "err", err)
			return nil
		case !e.cfg.Target.Protocol.carries(kind):
			return nil
		}
		return e.send(ctx, kind, payload)
	})
	if err != nil && ctx.Err() == nil {
		// The records before the damage went out; the rest cannot.
		e.unreadable("export: stored message's records cannot be unpacked; the rest skipped", "offset", off, "err", err)
		return nil
	}
	return err
}

// unreadable counts and logs a record the exporter cannot read.
func (e *Exporter) unreadable(msg string, args ...any) {
	e.cfg.Metrics.errors.WithLabelValues(e.name, reasonUnreadable).Inc()
	e.log.Error(msg, args...)
}

// send posts one record until the receiver accepts or refuses it, or
// ctx ends.
func (e *Exporter) send(ctx context.Context, kind telemetry.Kind, payload []byte) error {
	var failingSince time.Time
	for failed := 0; ; {
		res := e.poster.post(ctx, kind, payload)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch res.outcome {
		case accepted:
			e.accepted(res, failingSince)
			return nil
		case poison:
			e.poisoned(res)
			return nil
		}
		failed++
		e.cfg.Metrics.errors.WithLabelValues(e.name, reasonRetried).Inc()
		e.setPos(e.pos) // the lag grows while the receiver is down
		if failed == 1 {
			failingSince = time.Now()
			e.log.Warn("export: the receiver did not take a request; retrying with back-off until it does", "err", res.err)
		}
		e.noteError(res.err, true)
		t := time.NewTimer(backoff(failed, res.retryAfter))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// accepted counts an accepted request.
func (e *Exporter) accepted(res result, failingSince time.Time) {
	e.cfg.Metrics.requests.WithLabelValues(e.name).Inc()
	e.cfg.Metrics.bytes.WithLabelValues(e.name).Add(float64(res.sent))
	e.mu.Lock()
	e.st.Requests++
	e.st.Failing = false
	e.mu.Unlock()
	if !failingSince.IsZero() {
		e.log.Info("export: the receiver takes requests again", "after", time.Since(failingSince).Round(time.Millisecond))
	}
	if res.rejected > 0 || res.rejectedWhy != "" {
		e.cfg.Metrics.rejected.WithLabelValues(e.name).Add(float64(res.rejected))
		e.noteError(fmt.Errorf("the receiver rejected %d items of a request: %s", res.rejected, res.rejectedWhy), false)
		if e.rejectLogged.Due(time.Now(), time.Minute) {
			e.log.Warn("export: the receiver took a request but rejected part of it; not sent again (logged once a minute)",
				"rejected", res.rejected, "why", res.rejectedWhy)
		}
	}
}

// poisoned counts a refused record and logs it, at most once a minute
// (a receiver refusing everything would otherwise log every record).
func (e *Exporter) poisoned(res result) {
	e.cfg.Metrics.errors.WithLabelValues(e.name, reasonPoison).Inc()
	e.mu.Lock()
	e.st.Poison++
	e.mu.Unlock()
	e.noteError(res.err, false)
	if e.poisonLogged.Due(time.Now(), time.Minute) {
		e.log.Error("export: the receiver refused a record; skipped (logged once a minute)",
			"err", res.err, "skipped_unlogged", e.poisonQuiet)
		e.poisonQuiet = 0
		return
	}
	e.poisonQuiet++
}

// noteError keeps err as the status page's last error.
func (e *Exporter) noteError(err error, failing bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.Failing = failing
	e.st.LastError, e.st.LastErrorAt = err.Error(), time.Now()
}
