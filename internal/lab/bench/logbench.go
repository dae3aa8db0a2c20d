package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/seglog"
)

// LogConfig configures LogBench.
type LogConfig struct {
	Dir         string // where the logs are written; a temporary dir if empty
	RecordSizes []int
	Sync        seglog.SyncPolicy
	Writers     int           // concurrent appenders (group commit needs >1)
	Duration    time.Duration // per record size, for the log run
	MaxBytes    int64         // stop a run early after this many payload bytes
	Progress    io.Writer     // progress lines; nil for none
}

// Run is one measured run.
type Run struct {
	Bytes   int64 // payload bytes
	Records int64
	Writes  int64
	Fsyncs  int64
	Elapsed time.Duration
	Allocs  uint64 // heap allocations during the run
}

func (r Run) MBps() float64      { return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6 }
func (r Run) RecordsPs() float64 { return float64(r.Records) / r.Elapsed.Seconds() }
func (r Run) FsyncsPs() float64  { return float64(r.Fsyncs) / r.Elapsed.Seconds() }

// LogResult compares the log with raw file writes of the same bytes at the
// same write and fdatasync cadence.
type LogResult struct {
	RecordSize int
	Sync       string
	Writers    int
	Log, Raw   Run
}

// Ratio is the log's throughput as a fraction of the raw baseline.
func (r LogResult) Ratio() float64 { return r.Log.MBps() / r.Raw.MBps() }

// AllocsPerRecord is heap allocations per appended record in the log run,
// everything in the process included: segment rolls (a new file, an index)
// and the runtime's own. The hot path itself allocates nothing (see
// BenchmarkAppend -benchmem in package seglog).
func (r LogResult) AllocsPerRecord() float64 {
	return float64(r.Log.Allocs) / float64(max(r.Log.Records, 1))
}

// LogBench measures seglog appends against the raw baseline.
func LogBench(cfg LogConfig) ([]LogResult, error) {
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-logbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var out []LogResult
	const rounds = 4
	for i, size := range cfg.RecordSizes {
		progress(cfg.Progress, "record size %s: %d rounds of log and raw baseline, %d writers, sync %s, %s of log in all ...",
			SizeName(size), rounds, cfg.Writers, cfg.Sync, cfg.Duration)
		res := LogResult{RecordSize: size, Sync: cfg.Sync.String(), Writers: cfg.Writers}
		var prev Run
		// Rounds alternate which run goes first, so neither always pays for
		// the other's writeback; the raw run of an odd round copies the
		// cadence of the log run before it. Files stay until the end so
		// deleting them (and the discards that follows) happens outside the
		// measurements.
		for r := 0; r < rounds; r++ {
			logDir := filepath.Join(dir, fmt.Sprintf("log-%d-%d", i, r))
			rawPath := filepath.Join(dir, fmt.Sprintf("raw-%d-%d", i, r))
			roundCfg := cfg
			roundCfg.Duration = cfg.Duration / rounds
			var lr, rr Run
			var err error
			if r%2 == 0 {
				if lr, err = runLog(logDir, size, roundCfg); err == nil {
					rr, err = runRaw(rawPath, lr)
				}
			} else {
				if rr, err = runRaw(rawPath, prev); err == nil {
					lr, err = runLog(logDir, size, roundCfg)
				}
			}
			if err != nil {
				return nil, err
			}
			prev = lr
			res.Log, res.Raw = res.Log.add(lr), res.Raw.add(rr)
		}
		for r := 0; r < rounds; r++ {
			os.RemoveAll(filepath.Join(dir, fmt.Sprintf("log-%d-%d", i, r)))
			os.Remove(filepath.Join(dir, fmt.Sprintf("raw-%d-%d", i, r)))
		}
		out = append(out, res)
	}
	return out, nil
}

func (r Run) add(o Run) Run {
	return Run{Bytes: r.Bytes + o.Bytes, Records: r.Records + o.Records, Writes: r.Writes + o.Writes,
		Fsyncs: r.Fsyncs + o.Fsyncs, Elapsed: r.Elapsed + o.Elapsed, Allocs: r.Allocs + o.Allocs}
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

func runLog(dir string, size int, cfg LogConfig) (Run, error) {
	l, err := seglog.Open(dir, seglog.WithSync(cfg.Sync), seglog.WithMaxRecordBytes(max(size, 1<<20)))
	if err != nil {
		return Run{}, err
	}
	// Warm up so buffers reach their steady-state size before counting.
	warm := [][]byte{make([]byte, size)}
	for i := 0; i < 8; i++ {
		if _, err := l.Append(warm); err != nil {
			l.Close()
			return Run{}, err
		}
	}
	before := l.Stats()
	var stop atomic.Bool
	var total atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	recsByWriter := make([][][]byte, cfg.Writers)
	for w := range recsByWriter {
		payload := make([]byte, size)
		for j := range payload {
			payload[j] = byte(j*31 + w)
		}
		recsByWriter[w] = [][]byte{payload}
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	timer := time.AfterFunc(cfg.Duration, func() { stop.Store(true) })
	for w := 0; w < cfg.Writers; w++ {
		wg.Add(1)
		go func(recs [][]byte) {
			defer wg.Done()
			for !stop.Load() {
				if _, err := l.Append(recs); err != nil {
					errOnce.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
				if cfg.MaxBytes > 0 && total.Add(int64(size)) >= cfg.MaxBytes {
					stop.Store(true)
				}
			}
		}(recsByWriter[w])
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms1)
	timer.Stop()
	st := l.Stats()
	if err := l.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	recs := int64(st.Records - before.Records)
	return Run{
		Bytes: recs * int64(size), Records: recs,
		Writes:  int64(st.Writes - before.Writes),
		Fsyncs:  int64(st.Syncs - before.Syncs),
		Elapsed: elapsed,
		Allocs:  ms1.Mallocs - ms0.Mallocs,
	}, firstErr
}

// runRaw writes the same payload bytes to a plain file with the same number
// of write calls and fdatasyncs, evenly spread: the cost of the disk alone.
func runRaw(path string, lr Run) (Run, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return Run{}, err
	}
	defer f.Close()
	writes := max(lr.Writes, 1)
	chunk := make([]byte, lr.Bytes/writes)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	syncEvery := float64(writes) / float64(max(lr.Fsyncs, 1))
	var fsyncs int64
	start := time.Now()
	for i := int64(0); i < writes; i++ {
		if _, err := f.Write(chunk); err != nil {
			return Run{}, err
		}
		if lr.Fsyncs > 0 && float64(i+1) >= float64(fsyncs+1)*syncEvery {
			if err := fdatasync(f); err != nil {
				return Run{}, err
			}
			fsyncs++
		}
	}
	return Run{Bytes: int64(len(chunk)) * writes, Records: lr.Records, Writes: writes, Fsyncs: fsyncs, Elapsed: time.Since(start)}, nil
}

func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// SizeName prints a byte count the way the docs do: 100 B, 16 KiB, 4 MiB.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// Name is the result's row name in a report.
func (r LogResult) Name() string {
	return fmt.Sprintf("%s, sync %s, %d writers", SizeName(r.RecordSize), r.Sync, r.Writers)
}

// Metrics are the numbers of one run, for the shared JSON report.
func (r LogResult) Metrics() Metrics {
	return Metrics{"log_mb_per_sec": r.Log.MBps(), "log_records_per_sec": r.Log.RecordsPs(), "log_fsyncs_per_sec": r.Log.FsyncsPs(),
		"raw_mb_per_sec": r.Raw.MBps(), "raw_fsyncs_per_sec": r.Raw.FsyncsPs(), "log_vs_raw": r.Ratio(),
		"allocs_per_record": r.AllocsPerRecord()}
}

// Params are the result's configuration, for the shared JSON report.
func (r LogResult) Params() map[string]any {
	return map[string]any{"record_bytes": r.RecordSize, "sync": r.Sync, "writers": r.Writers}
}

// PrintLogRepsTable writes the results of several reps as a Markdown
// table: medians, with (min–max) for the throughputs and the ratio.
func PrintLogRepsTable(w io.Writer, rs Results) {
	fmt.Fprintln(w, "| record | sync | writers | log MB/s | log records/s | log fsyncs/s | raw MB/s | raw fsyncs/s | log/raw | allocs/record |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs.Rows {
		ratio := r.Stat("log_vs_raw")
		ratio.Median, ratio.Min, ratio.Max = 100*ratio.Median, 100*ratio.Min, 100*ratio.Max
		fmt.Fprintf(w, "| %s | %s | %v | %s | %s | %.0f | %s | %.0f | %s | %.3f |\n",
			SizeName(r.Params["record_bytes"].(int)), r.Params["sync"], r.Params["writers"], r.Stat("log_mb_per_sec").Format(1),
			r.Stat("log_records_per_sec").Format(0), r.Stat("log_fsyncs_per_sec").Median, r.Stat("raw_mb_per_sec").Format(1),
			r.Stat("raw_fsyncs_per_sec").Median, ratio.FormatUnit(0, "%"), r.Stat("allocs_per_record").Median)
	}
}
