package diskstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/xfer"
)

// RegisterStats exports a store's counters to reg as sluice_xfer_*_total:
// the same series whichever store (disk, S3) a server runs on.
func RegisterStats(reg prometheus.Registerer, s *xfer.Stats) {
	for _, c := range []struct {
		name, help string
		v          func() int64
	}{
		{"sluice_xfer_received_bytes_total", "Bytes written to partial uploads.", s.BytesReceived.Load},
		{"sluice_xfer_uploads_completed_total", "Uploads verified and renamed into place.", s.UploadsCompleted.Load},
		{"sluice_xfer_uploads_failed_total", "Uploads whose whole-file SHA-256 did not match (discarded).", s.UploadsFailed.Load},
		{"sluice_xfer_chunks_rejected_total", "Chunks refused for a bad CRC32C or tus checksum.", s.ChunksRejected.Load},
		{"sluice_xfer_expired_total", "Idle partial uploads, and records of finished tus uploads, removed at --expire.", s.Expired.Load},
		{"sluice_xfer_evicted_total", "Idle partial uploads, and records of finished tus uploads, removed because the server keeps at most --max-partials of each (the longest idle, the oldest first).", s.Evicted.Load},
		{"sluice_xfer_salvaged_total", "Partial uploads recovered from a torn or unreadable sidecar.", s.Salvaged.Load},
		{"sluice_xfer_takeovers_total", "Writers interrupted by a newer request for their upload (a tus client back on a new connection).", s.TakenOver.Load},
		{"sluice_xfer_idle_timeouts_total", "tus PATCHes ended because their body sent nothing for --idle-timeout.", s.IdleTimeouts.Load},
		{"sluice_xfer_unbuffered_writes_total", "Writes that found the upload buffer budget spent and went to disk without a block.", s.BufferMisses.Load},
	} {
		v := c.v
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, func() float64 { return float64(v()) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_xfer_upload_buffer_bytes",
		Help: "Upload buffer memory in use, out of the budget all uploads share."},
		func() float64 { return float64(s.BufferBytes.Load()) }))
}
