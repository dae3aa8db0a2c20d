package status

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/export"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
)

// Snapshot is one element of status.stream, sent as JSON. Rates are per
// second over the time since the stream's previous snapshot (0 in the
// first). A section a daemon does not have is null.
type Snapshot struct {
	Kind Kind      `json:"kind"`
	Time time.Time `json:"time"`
	Seq  uint64    `json:"seq"` // 1, 2, ... within one stream
	// Ready is the /readyz answer; Readiness says it in plain words.
	Ready     bool   `json:"ready"`
	Readiness string `json:"readiness"`
	// Identity is the token's identity when the daemon has tokens; Limited
	// says the token sees only the readiness (see Config.Full).
	Identity   string       `json:"identity,omitempty"`
	Limited    bool         `json:"limited,omitempty"`
	Throughput *Throughput  `json:"throughput,omitempty"`
	Errors     *Errors      `json:"errors,omitempty"`
	Agent      *AgentStatus `json:"agent,omitempty"`
	Sink       *SinkStatus  `json:"sink,omitempty"`
	Xfer       *XferStatus  `json:"xfer,omitempty"`
	// Gaps name what the page would show but this daemon does not expose.
	Gaps []string `json:"gaps,omitempty"`
}

// Throughput: records and bytes, raw (uncompressed) and on the wire, per
// second and in total since the daemon started.
type Throughput struct {
	Records        float64 `json:"records"`
	RawBytes       float64 `json:"rawBytes"`
	WireBytes      float64 `json:"wireBytes"`
	TotalRecords   float64 `json:"totalRecords"`
	TotalRawBytes  float64 `json:"totalRawBytes"`
	TotalWireBytes float64 `json:"totalWireBytes"`
}

// Errors counts failures since start; Last is the newest one in words
// (the agent: its last sink connection failure; the sink: the last store
// error, rejection, cut stream or refusal; kept after recovery) and
// LastAt when it happened.
type Errors struct {
	Total  float64    `json:"total"`
	Last   string     `json:"last,omitempty"`
	LastAt *time.Time `json:"lastAt,omitempty"`
}

// AgentStatus is the agent's delivery state.
type AgentStatus struct {
	SinkUp           bool    `json:"sinkUp"`
	InflightMessages float64 `json:"inflightMessages"`
	InflightBytes    float64 `json:"inflightBytes"`
	WindowMessages   float64 `json:"windowMessages"` // 0: unbounded
	WindowBytes      float64 `json:"windowBytes"`    // 0: unbounded
	RTTSeconds       float64 `json:"rttSeconds"`
	SpoolBytes       float64 `json:"spoolBytes"`
	SpoolQuotaBytes  int64   `json:"spoolQuotaBytes,omitempty"` // from a provider (SpoolQuota)
	// OldestUnackedSeconds is the age of the oldest message spooled and
	// not yet acknowledged (0: none; null: not exported).
	OldestUnackedSeconds *float64 `json:"oldestUnackedSeconds"`
	Resent               float64  `json:"resent"`
	Timeouts             float64  `json:"timeouts"`
	Reconnects           float64  `json:"reconnects"`
	// Parked: messages the sink refused for good, waiting for the next
	// session; DeadLetters: those in the spool's dead-letter log, set
	// aside by this run or an earlier one (sluice dead-letter list).
	Parked      float64 `json:"parked"`
	DeadLetters float64 `json:"deadLetters"`
}

// SinkStatus is the sink's state.
type SinkStatus struct {
	Agents         float64 `json:"agents"`  // open send streams
	Readers        float64 `json:"readers"` // open read streams
	Consumers      float64 `json:"consumers"`
	QueuedMessages float64 `json:"queuedMessages"`
	QueuedBytes    float64 `json:"queuedBytes"`
	Duplicates     float64 `json:"duplicates"`
	StoreAvailable bool    `json:"storeAvailable"`
	StoreOutages   float64 `json:"storeOutages"`
	StoredBytes    float64 `json:"storedBytes"` // appended since start
	// StoreSizeBytes is the store's size on disk (a provider: StoreSize);
	// null when not known (Kafka).
	StoreSizeBytes *int64       `json:"storeSizeBytes"`
	Kafka          *KafkaStatus `json:"kafka"`
	// AgentRows is one row per agent seen since the sink started (a
	// provider: AgentRows; the metrics have no per-agent series, by
	// design: agent ids are unbounded label values).
	AgentRows []AgentRow `json:"agentRows"`
	// Exporters is one row per --export exporter (a provider: Exporters);
	// empty without exporters.
	Exporters []export.Status `json:"exporters"`
}

// AgentRow is one agent as the sink sees it.
type AgentRow struct {
	ID string `json:"id"`
	// Identity names the credentials that proved the id ("token",
	// "certificate", "token+certificate"), "" when the sink has none.
	Identity     string    `json:"identity"`
	Connected    bool      `json:"connected"`
	Records      float64   `json:"records"` // stored per second, like Throughput
	TotalRecords float64   `json:"totalRecords"`
	LastSeen     time.Time `json:"lastSeen"`   // the snapshot's time while connected
	Duplicates   float64   `json:"duplicates"` // dedup hits since the sink started
}

// KafkaStatus is present when the sink stores into Kafka.
type KafkaStatus struct {
	Records        float64 `json:"records"`
	TailLagRecords float64 `json:"tailLagRecords"`
}

// XferStatus is an xfer server's state.
type XferStatus struct {
	Completed float64  `json:"completed"`
	Failed    float64  `json:"failed"`
	Expired   float64  `json:"expired"`
	Uploads   []Upload `json:"uploads"` // from a provider (Uploads)
}

// Upload is one partial upload.
type Upload struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Size    int64     `json:"size"`   // -1: not known yet (tus deferred length)
	Offset  int64     `json:"offset"` // bytes the server has durably
	Active  bool      `json:"active"` // a client is writing it now
	Updated time.Time `json:"updated"`
}

// build maps one gather onto a snapshot (without rates or providers).
func build(kind Kind, fs families) Snapshot {
	s := Snapshot{Kind: kind, Throughput: &Throughput{}, Errors: &Errors{}}
	t := s.Throughput
	switch kind {
	case KindAgent:
		t.TotalRecords = fs.sum("sluice_agent_acked_records_total")
		t.TotalRawBytes = fs.sum("sluice_agent_message_bytes_uncompressed_total")
		t.TotalWireBytes = fs.sum("sluice_agent_message_bytes_compressed_total")
		s.Agent = &AgentStatus{
			SinkUp:           fs.sum("sluice_agent_sink_up") > 0,
			InflightMessages: fs.sum("sluice_agent_inflight_messages"),
			InflightBytes:    fs.sum("sluice_agent_inflight_bytes"),
			WindowMessages:   fs.sum("sluice_agent_window_messages"),
			WindowBytes:      fs.sum("sluice_agent_window_bytes"),
			RTTSeconds:       fs.sum("sluice_agent_srtt_seconds"),
			SpoolBytes:       fs.sum("sluice_agent_spool_bytes"),
			Resent:           fs.sum("sluice_agent_resent_messages_total"),
			Timeouts:         fs.sum("sluice_agent_resend_timeouts_total"),
			Reconnects:       fs.sum("sluice_agent_reconnects_total"),
			Parked:           fs.sum("sluice_agent_parked_messages"),
			DeadLetters:      fs.sum("sluice_agent_dead_letter_messages"),
		}
		s.Errors.Total = fs.sum("sluice_agent_connect_failures_total") + fs.sum("sluice_agent_rejected_messages_total") +
			fs.sum("sluice_agent_spool_full_total")
		if code := fs.labelWhere("sluice_agent_last_error", "code"); code != "" {
			s.Errors.Last = "sink connection failed: " + code // AgentErrors says more
		}
		if fs.has("sluice_agent_oldest_unacked_seconds") {
			v := fs.sum("sluice_agent_oldest_unacked_seconds")
			s.Agent.OldestUnackedSeconds = &v
		}
	case KindSink:
		t.TotalRecords = fs.sum("sluice_sink_stored_records_total")
		t.TotalRawBytes = fs.sum("sluice_sink_received_decoded_bytes_total")
		t.TotalWireBytes = fs.sum("sluice_sink_received_bytes_total")
		s.Sink = &SinkStatus{
			Agents:         fs.label("sluice_sink_streams", "kind", "send"),
			Readers:        fs.label("sluice_sink_streams", "kind", "read"),
			Consumers:      fs.sum("sluice_sink_consumers"),
			QueuedMessages: fs.sum("sluice_sink_queued_messages"),
			QueuedBytes:    fs.sum("sluice_sink_queued_bytes"),
			Duplicates:     fs.sum("sluice_sink_duplicate_messages_total"),
			StoreAvailable: fs.sum("sluice_sink_store_available") > 0,
			StoreOutages:   fs.sum("sluice_sink_store_outages_total"),
			StoredBytes:    fs.sum("sluice_sink_stored_bytes_total"),
			AgentRows:      []AgentRow{},
		}
		if fs.has("sluice_sink_kafka_records_total") {
			s.Sink.Kafka = &KafkaStatus{Records: fs.sum("sluice_sink_kafka_records_total"),
				TailLagRecords: fs.sum("sluice_sink_kafka_tail_lag_records")}
		}
		s.Errors.Total = fs.sum("sluice_sink_store_errors_total") + fs.sum("sluice_sink_rejected_total") +
			fs.sum("sluice_sink_streams_cut_total") + fs.sum("sluice_sink_refused_total")
	case KindXfer:
		// A file's bytes are its records: no compression, raw = wire.
		t.TotalRawBytes = fs.sum("sluice_xfer_received_bytes_total")
		t.TotalWireBytes = t.TotalRawBytes
		s.Xfer = &XferStatus{
			Completed: fs.sum("sluice_xfer_uploads_completed_total"),
			Failed:    fs.sum("sluice_xfer_uploads_failed_total"),
			Expired:   fs.sum("sluice_xfer_expired_total"),
			Uploads:   []Upload{},
		}
		s.Errors.Total = fs.sum("sluice_xfer_uploads_failed_total") + fs.sum("sluice_xfer_chunks_rejected_total")
	}
	return s
}

// rate fills the per-second rates from the previous snapshot of a stream.
func rate(s, prev *Snapshot) {
	if prev == nil || prev.Throughput == nil || s.Throughput == nil {
		return
	}
	dt := s.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		return
	}
	per := func(now, before float64) float64 {
		if now < before { // the daemon restarted: its counters began again
			return 0
		}
		return (now - before) / dt
	}
	t, p := s.Throughput, prev.Throughput
	t.Records = per(t.TotalRecords, p.TotalRecords)
	t.RawBytes = per(t.TotalRawBytes, p.TotalRawBytes)
	t.WireBytes = per(t.TotalWireBytes, p.TotalWireBytes)
	if s.Sink != nil && prev.Sink != nil && len(prev.Sink.AgentRows) > 0 {
		before := make(map[string]float64, len(prev.Sink.AgentRows))
		for _, r := range prev.Sink.AgentRows {
			before[r.ID] = r.TotalRecords
		}
		for i := range s.Sink.AgentRows {
			r := &s.Sink.AgentRows[i]
			if b, ok := before[r.ID]; ok {
				r.Records = per(r.TotalRecords, b)
			}
		}
	}
}

// readiness says the /readyz answer in plain words.
func readiness(kind Kind, err error) (bool, string) {
	if err != nil {
		return false, "Not ready: " + err.Error()
	}
	switch kind {
	case KindAgent:
		return true, "Ready: delivering to a sink, spool writable"
	case KindSink:
		return true, "Ready: taking messages, store writable"
	}
	return true, "Ready: taking uploads"
}

// A Provider adds what the registry does not have to a snapshot (its
// sections are set; a Limited snapshot never reaches a provider).
type Provider func(*Snapshot)

// SpoolQuota reports the agent's spool quota.
func SpoolQuota(bytes int64) Provider {
	return func(s *Snapshot) {
		if s.Agent != nil {
			s.Agent.SpoolQuotaBytes = bytes
		}
	}
}

// AgentRows lists the sink's agents (sink.Sink.Agents) as rows.
func AgentRows(agents func() []sink.AgentActivity) Provider {
	return func(s *Snapshot) {
		if s.Sink == nil {
			return
		}
		list := agents()
		rows := make([]AgentRow, len(list))
		for i, a := range list {
			rows[i] = AgentRow{ID: a.ID, Identity: a.Vouched, Connected: a.Connected > 0,
				TotalRecords: float64(a.Records), LastSeen: a.LastSeen, Duplicates: float64(a.Duplicates)}
			if a.Connected > 0 {
				rows[i].LastSeen = s.Time
			}
		}
		s.Sink.AgentRows = rows
	}
}

// LastError reports the daemon's newest failure in words and when it
// happened (agent.Agent.LastError, sink.Sink.LastError). It stays after the
// daemon recovered, where a metric's label does not.
func LastError(last func() (string, time.Time)) Provider {
	return func(s *Snapshot) {
		if s.Errors == nil {
			return
		}
		if msg, at := last(); msg != "" {
			s.Errors.Last, s.Errors.LastAt = msg, &at
		}
	}
}

// StoreSize reports the size on disk of the files under dir (the sink's
// embedded store). A walk per snapshot: a store of a few thousand segment
// files costs well under a millisecond a second.
func StoreSize(dir string) Provider {
	return func(s *Snapshot) {
		if s.Sink == nil {
			return
		}
		var n int64
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // a segment removed under us: count the rest
			}
			if d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		s.Sink.StoreSizeBytes = &n
	}
}

// Uploads lists the partial uploads of an xfer store with their progress.
// The store has no list call; its partial directory names them (ID.meta)
// and StatID describes each.
func Uploads(st *diskstore.Uploads) Provider {
	return func(s *Snapshot) {
		if s.Xfer == nil {
			return
		}
		s.Xfer.Uploads = listUploads(st)
	}
}

func listUploads(st *diskstore.Uploads) []Upload {
	out := []Upload{}
	ents, err := os.ReadDir(filepath.Join(st.Dir(), diskstore.PartialDir))
	if err != nil {
		return out
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".meta")
		if !ok {
			continue
		}
		in, err := st.StatID(id)
		if errors.Is(err, xfer.ErrNotFound) || err != nil {
			continue // completed or expired since the listing
		}
		out = append(out, Upload{ID: in.ID, Name: in.Name, Size: in.Size, Offset: in.Offset, Active: in.Active, Updated: in.Updated})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
