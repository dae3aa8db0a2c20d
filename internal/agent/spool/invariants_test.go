package spool

import (
	"testing"
)

// TestWatermarkPersistedIsTheAcked: after Acknowledge(w) and a restart,
// the spool resumes from exactly w, and entry w (not acknowledged) is still
// there to send. A watermark persisted past the acks would skip it on
// restart, and the agent would never send it (mutation_watermarkahead;
// the "INVARIANT lost" message is what scripts/mutate.sh greps for).
func TestWatermarkPersistedIsTheAcked(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := sp.Log().Append([][]byte{{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.Acknowledge(1); err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	sp, err = Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if got := sp.AckedWatermark(); got != 1 {
		t.Fatalf("INVARIANT lost: the persisted watermark is %d after Acknowledge(1): a restart skips unacknowledged entry 1", got)
	}
	it := sp.Log().NewIterator(1, 1<<20)
	if !it.Next() || it.Offset() != 1 {
		t.Fatalf("INVARIANT lost: unacknowledged entry 1 is gone after a restart (%v)", it.Err())
	}
}
