package status

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/export"
)

// TestExporterRows: a sink's snapshot lists its exporters as the page
// reads them (JSON names of docs/status.md); an agent's has no sink
// section for them.
func TestExporterRows(t *testing.T) {
	list := func() []export.Status {
		return []export.Status{{Name: "otlp=http://127.0.0.1:4318", Position: 7, Lag: 3, Requests: 12, Poison: 1, Failing: true, LastError: "503"}}
	}
	s := &Snapshot{Sink: &SinkStatus{}}
	Exporters(list)(s)
	b, err := json.Marshal(s.Sink)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"exporters":[{"name":"otlp=http://127.0.0.1:4318","position":7,"lag":3,"requests":12,"poison":1,"failing":true,"lastError":"503"}]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("sink section %s lacks %s", b, want)
		}
	}
	a := &Snapshot{Agent: &AgentStatus{}}
	Exporters(list)(a)
	if a.Sink != nil {
		t.Errorf("an agent's snapshot got a sink section: %+v", a.Sink)
	}
}
