package kafkarec

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/defaults"
)

// FuzzRecords: a records section comes from an agent, which the sink does
// not trust. Any bytes, agent, message and count are accepted or refused
// with ErrMalformed, never a panic; what is accepted is canonical (the
// values rebuild, through AppendRecords, the same bytes), and what the
// fast path refuses the field-by-field check refuses too. And the other
// way round: the input split at newlines is a message whose section,
// built by AppendRecords, Records accepts with the same values.
func FuzzRecords(f *testing.F) {
	b := func(recs ...string) []byte {
		var bb batch.Builder
		for _, r := range recs {
			_ = bb.Add([]byte(r))
		}
		return bb.Bytes()
	}
	for _, seed := range []struct {
		recs  []string
		agent string
		msg   uint64
	}{
		{[]string{"a"}, "e", 5},
		{[]string{"cpu,host=a usage=1", "", "mem free=2"}, "edge-1", 1<<64 - 1},
	} {
		s, n, _ := AppendRecords(nil, b(seed.recs...), []byte(seed.agent), seed.msg)
		f.Add(s, seed.agent, seed.msg, uint16(n))
		f.Add(s[:len(s)-1], seed.agent, seed.msg, uint16(n))
	}
	f.Fuzz(func(t *testing.T, section []byte, agent string, message uint64, count uint16) {
		var values [][]byte
		err := Records(section, []byte(agent), message, int(count), func(_ int, v []byte) error {
			values = append(values, v)
			return nil
		})
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error not wrapping ErrMalformed: %v", err)
		}
		var me *MalformedError
		if errors.As(err, &me) && strings.Contains(me.Reason, "a bug of this package") {
			t.Fatalf("Records' fast path and checkRecord disagree on %x: %v", section, err)
		}
		if err == nil {
			var bb batch.Builder
			for _, v := range values {
				if err := bb.Add(v); err != nil {
					t.Fatal(err)
				}
			}
			again, n, err := AppendRecords(nil, bb.Bytes(), []byte(agent), message)
			if err != nil && count > 0 || n != int(count) || !bytes.Equal(again, section) {
				t.Fatalf("accepted a non-canonical section %x (rebuilds as %x, %d records, %v)", section, again, n, err)
			}
		}
		if agent == "" || len(agent) > defaults.MaxAgentIDLen {
			return
		}
		recs := bytes.Split(section, []byte("\n"))
		var bb batch.Builder
		for _, r := range recs {
			if err := bb.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		built, n, err := AppendRecords(nil, bb.Bytes(), []byte(agent), message)
		if err != nil || n != len(recs) {
			t.Fatalf("AppendRecords: %d records of %d, %v", n, len(recs), err)
		}
		err = Records(built, []byte(agent), message, n, func(i int, v []byte) error {
			if !bytes.Equal(v, recs[i]) {
				t.Fatalf("record %d: %q, want %q", i, v, recs[i])
			}
			return nil
		})
		if err != nil {
			t.Fatalf("refused what AppendRecords built: %v", err)
		}
	})
}
