// Package export forwards what collectors sent through sluice (records
// marked by internal/telemetry) from the sink's store to the backends
// they were meant for: a Prometheus remote-write receiver, an OTLP/HTTP
// receiver (`sluice sink --export remote-write=URL`, `--export otlp=URL`).
//
// Each Exporter is a durable consumer of the sink's embedded store with
// its own committed position (the consumer group Target.Group): it reads
// the store in order, posts each marked record of its protocol as one
// request, one request in flight, retries 5xx and 429 with a capped
// exponential back-off that honours Retry-After, skips a record the
// receiver refuses with another 4xx (a poison record: retrying it would
// stop the exporter for good), and commits its position as it goes, so a
// restarted sink resumes where the last commit left it: at least once.
// docs/export.md is the user's side of it.
//
// Show renders a marked record readably for `sluice consume`: OTLP as
// JSON, remote-write samples in Prometheus' text exposition format.
package export
